"""Hand-written reference policy over skills for the "gnomish" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/gnomish/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values,
which ``python -m scripts.combine --task gnomish --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/gnomish/seed42/execution.py`` (without this docstring).
"""

# Decides as the authors' released policy over skills for this task does (their
# rl_baseline/meta_policies/gnomish/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy: explore a level for 50 turns, then go down, to level 5, then back up to level 1, and
# again; a shopkeeper or an altar in view (with new items held) calls the merchant or the
# worshipper. Once the Mines entrance is known, its level takes the descender, and a descent
# that took the main staircase instead (one level below it, still in the Dungeons of Doom) is
# undone by the ascender, until the hero is in the Mines.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        return self.reach_gnomish_mines(current_skill, dungeon_depth, branch_number,
                                        merchant_precondition, worshipper_precondition)
