"""Hand-written reference policy over skills for the "goldenexit" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/goldenexit/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values,
which ``python -m scripts.combine --task goldenexit --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/goldenexit/seed42/execution.py`` (without this docstring).
"""

# Decides as the authors' released policy over skills for this task does (their
# rl_baseline/meta_policies/goldenexit/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy: explore each level for 500 turns on the way down to level 3 and back up; once the
# hero holds 20 gold and has defeated 25 monsters, go up, whatever the depth (from level 1 the
# ascender leaves the dungeon). Out of the Gnomish Mines should the hero be there.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def update_gold(self, gold):
        self.gold_pieces = int(gold)

    def defeat_monster(self):
        self.monsters_defeated += 1

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if self.gold_pieces >= 20 and self.monsters_defeated >= 25:
            return "ascender"
        if branch_number == 2:
            return self.reach_dungeons_of_doom(current_skill, dungeon_depth, branch_number,
                                               merchant_precondition, worshipper_precondition)
        return self.select_skill(current_skill, dungeon_depth, merchant_precondition,
                                 worshipper_precondition)
