"""Hand-written reference policy over skills for the "discoveryhunger" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/discoveryhunger/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values,
which ``python -m scripts.combine --task discoveryhunger --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/discoveryhunger/seed42/execution.py`` (without this docstring).
"""

# Decides as the authors' released policy over skills for this task does (their
# rl_baseline/meta_policies/discoveryhunger/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy: reach the Gnomish Mines as the gnomish task does (500-turn explorations, down to
# level 10); explore there until the hero has eaten in the Mines; then leave the Mines and go
# straight down to level 9, exploring from there. Its own select_skill: once the hero has eaten,
# every other skill hands over to the descender (or the ascender on the way up), not the
# discoverer.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def select_skill(self, current_skill, dungeon_depth, merchant_precondition, worshipper_precondition):
        if merchant_precondition:
            return "merchant"
        if worshipper_precondition:
            return "worshipper"
        if self.eaten_food:
            return "descender" if self.direction == "down" else "ascender"
        return self.explore_then_move(current_skill, dungeon_depth)

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if not self.explored_gnomish_mines:
            if branch_number != 2:
                return self.reach_gnomish_mines(current_skill, dungeon_depth, branch_number,
                                                merchant_precondition, worshipper_precondition)
            self.explored_gnomish_mines = True
            return "discoverer"
        if not self.eaten_food:
            return "discoverer"
        if branch_number != 0:
            return self.reach_dungeons_of_doom(current_skill, dungeon_depth, branch_number,
                                               merchant_precondition, worshipper_precondition)
        return "descender" if dungeon_depth < 9 else "discoverer"
