"""Hand-written reference policy over skills for the "levelupsell" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/levelupsell/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values,
which ``python -m scripts.combine --task levelupsell --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/levelupsell/seed42/execution.py`` (without this docstring).
"""

# Decides as the authors' released policy over skills for this task does (their
# rl_baseline/meta_policies/levelupsell/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy: explore (500 turns at a time, wherever the hero is) until experience level 4; then
# sell once: the merchant when a shopkeeper is in view (with new items held), else keep to the
# Dungeons of Doom, exploring each level on the way down to level 5 and back up; after the sale
# go on as the explore/descend loop does.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def update_xp_level(self, xp_level):
        self.xp_level = int(xp_level)

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if self.xp_level < 4:
            return "discoverer"
        if self.items_sold:
            return self.select_skill(current_skill, dungeon_depth, merchant_precondition,
                                     worshipper_precondition)
        if merchant_precondition:
            self.items_sold = True
            return "merchant"
        return self.reach_dungeons_of_doom(current_skill, dungeon_depth, branch_number,
                                           merchant_precondition, worshipper_precondition)
