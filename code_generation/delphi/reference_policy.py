"""Hand-written reference policy over skills for the "delphi" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/delphi/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values,
which ``python -m scripts.combine --task delphi --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/delphi/seed42/execution.py`` (without this docstring).
"""

# Decides as the authors' released policy over skills for this task does (their
# rl_baseline/meta_policies/delphi/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy: the Oracle is on level 5 to 9 of the Dungeons of Doom. Straight down to level 9 (the
# descender after every skill); out of the Gnomish Mines should the hero be there; from level 9
# on explore and go on as the explore/descend loop does (max_depth 10).


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if branch_number != 0:
            return self.reach_dungeons_of_doom(current_skill, dungeon_depth, branch_number,
                                               merchant_precondition, worshipper_precondition)
        if dungeon_depth < 9:
            return "descender"
        return self.select_skill(current_skill, dungeon_depth, merchant_precondition,
                                 worshipper_precondition)
