"""Hand-written reference policy over skills for the "exploration" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/exploration/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task exploration --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/exploration/seed42/execution.py`` (without this docstring).
"""

# Behaves as the authors' released training policy (their
# rl_baseline/meta_policies/exploration/seed42/execution.py), written anew here.
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

    def select_skill(self, current_skill, dungeon_depth, merchant_precondition, worshipper_precondition):
        # a shopkeeper or an altar in view first; else explore every level reached, then move
        # on: down to max_depth, back up to level 1
        if merchant_precondition:
            return "merchant"
        if worshipper_precondition:
            return "worshipper"
        if current_skill != "discoverer":
            return "discoverer"
        if self.direction == "down":
            if dungeon_depth < self.max_depth:
                return "descender"
            self.direction = "up"
            return "ascender"
        if dungeon_depth > 1:
            return "ascender"
        self.direction = "down"
        return "descender"

    def select_skill_mines(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                           worshipper_precondition):
        # an episode that heads for the Gnomish Mines (branch_depth is -2 while unknown: no level matches)
        if branch_number == 0:
            if dungeon_depth == self.branch_depth:
                return "descender"  # the level with the Mines entrance: go down
            if dungeon_depth == self.branch_depth + 1:
                return "ascender"  # took the main staircase: back to the entrance level
        return self.select_skill(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)

    def select_skill_dungeons(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                              worshipper_precondition):
        # an episode that stays in the Dungeons of Doom
        if dungeon_depth == self.branch_depth:
            return "ascender" if branch_number == 2 else "descender"  # past the entrance level
        if branch_number == 2 and dungeon_depth == self.branch_depth + 1:
            return "ascender"  # first Mines level: leave the Mines
        return self.select_skill(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        preconditions = (merchant_precondition, worshipper_precondition)
        if self.mines:
            return self.select_skill_mines(current_skill, dungeon_depth, branch_number, *preconditions)
        return self.select_skill_dungeons(current_skill, dungeon_depth, branch_number, *preconditions)
