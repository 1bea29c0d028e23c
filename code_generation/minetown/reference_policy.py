"""Hand-written reference policy over skills for the "minetown" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/minetown/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task minetown --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/minetown/seed42/execution.py`` (without this docstring).
"""

# Strategy: reach the Gnomish Mines as in the gnomish task (levels 2-4 of the Dungeons of
# Doom, turning back up at max_depth), then keep going down inside the Mines: Minetown lies three or four levels below
# the entrance level; explore once four levels below it.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

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
        if branch_number != 2:
            return self.go_to_mines(current_skill, dungeon_depth)
        entrance = self.branch_depth if self.branch_depth > 0 else dungeon_depth - 1
        if dungeon_depth < entrance + self.minetown_offset:
            return "descender"
        return "discoverer"
