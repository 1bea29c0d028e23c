"""Hand-written reference policy over skills for the "discoveryhunger" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/discoveryhunger/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task discoveryhunger --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/discoveryhunger/seed42/execution.py`` (without this docstring).
"""

# State of this task, set by the run-time before perform_task:
#   eaten_food = True        once the hero has eaten while in the Gnomish Mines
#   update_hunger(hunger)    NLE hunger state (0 satiated, 1 not hungry, 2 hungry, 3 weak, ...)

# Strategy: find the Gnomish Mines (levels 2-4 of the Dungeons of Doom; the search turns back
# up at max_depth) and explore there
# until the hero got hungry and ate; then climb back to the Dungeons of Doom and go down to
# the Oracle (levels 5 to 9).


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def update_hunger(self, hunger):
        self.hunger = int(hunger)

    def go_to_mines(self, current_skill, dungeon_depth):
        if self.branch_depth > 0:
            if dungeon_depth > self.branch_depth:
                return "ascender"
            return "descender"
        if self.direction == "up":
            if dungeon_depth > self.first_entrance_level:
                return "ascender"
            self.direction = "down"
        if dungeon_depth >= self.max_depth:  # the deepest level of the search
            self.direction = "up"
            return "ascender"
        if dungeon_depth >= self.first_entrance_level and current_skill == "descender":
            return "discoverer"
        return "descender"

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if not self.eaten_food:
            if branch_number == 2:
                return "discoverer"  # wait (exploring) in the Mines until hungry; eating is automatic
            return self.go_to_mines(current_skill, dungeon_depth)
        if branch_number == 2:
            return "ascender"
        if dungeon_depth >= self.oracle_max_depth:
            return "discoverer"
        return "descender"
