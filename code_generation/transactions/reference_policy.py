"""Hand-written reference policy over skills for the "transactions" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/transactions/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values,
which ``python -m scripts.combine --task transactions --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/transactions/seed42/execution.py`` (without this docstring).
"""

# Decides as the authors' released policy over skills for this task does (their
# rl_baseline/meta_policies/transactions/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy: sell to shopkeepers. A shopkeeper in view (with new items held) calls the merchant;
# otherwise keep to the Dungeons of Doom, exploring each level for 500 turns on the way down to
# level 5 and back up.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if merchant_precondition:
            return "merchant"
        return self.reach_dungeons_of_doom(current_skill, dungeon_depth, branch_number,
                                           merchant_precondition, worshipper_precondition)
