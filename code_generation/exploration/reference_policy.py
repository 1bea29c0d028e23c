"""Hand-written reference policy over skills for the "exploration" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/exploration/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values, which
``python -m scripts.combine --task exploration --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/exploration/seed42/execution.py`` (without this docstring).
"""

# Behaves as the authors' released training policy (their
# rl_baseline/meta_policies/exploration/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy (the release's): every episode draws its deepest level uniformly from {2, 3, 4}
# and, with probability 1/2, whether it heads for the Gnomish Mines. The hero explores each
# level it reaches (discoverer), then goes down until the deepest level and back up to
# level 1, again and again. A Mines episode goes down on the level holding the Mines
# entrance and back up when it took the main staircase instead, until it is in the Mines;
# the other episodes leave the Mines at once when they enter them by chance. Whenever a
# shopkeeper or an altar is in view while the hero holds new items, the merchant or
# worshipper skill starts, and any such sighting ends the running skill (the merchant and
# worshipper included: they then start again). Near the Mines entrance the way comes first,
# as in the release: on the entrance level, on the main-dungeon level below it (Mines
# episodes) and on the first Mines level (other episodes) the descender or ascender is
# chosen even with a shopkeeper or an altar in view.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        # a Mines episode heads for the Gnomish Mines; any other keeps to the Dungeons of Doom
        if self.mines:
            return self.reach_gnomish_mines(current_skill, dungeon_depth, branch_number,
                                            merchant_precondition, worshipper_precondition)
        return self.reach_dungeons_of_doom(current_skill, dungeon_depth, branch_number,
                                           merchant_precondition, worshipper_precondition)
