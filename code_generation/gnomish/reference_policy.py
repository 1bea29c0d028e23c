"""Hand-written reference policy over skills for the "gnomish" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/gnomish/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task gnomish --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/gnomish/seed42/execution.py`` (without this docstring).
"""

# Strategy: the Mines entrance is on level 2, 3 or 4 of the Dungeons of Doom. Go down, exploring
# those levels for the second down staircase; on reaching max_depth (level 5) come back up to
# level 2 and try again; once in the Mines (branch 2) keep exploring there.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if branch_number == 2:
            return "discoverer"
        if self.branch_depth > 0:
            # entrance known: walk to its level and take the other staircase down
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
