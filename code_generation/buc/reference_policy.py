"""Hand-written reference policy over skills for the "buc" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/buc/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task buc --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/buc/seed42/execution.py`` (without this docstring).
"""

# Strategy: items are BUC-identified by dropping them on an altar: explore levels 1 to
# max_depth of the Dungeons of Doom, going down and back up, picking up items, and use the
# worshipper skill whenever an altar is next to the hero and items are held.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if worshipper_precondition:
            return "worshipper"
        if branch_number == 2:
            return "ascender"  # shops are searched in the Dungeons of Doom
        if current_skill != "discoverer":
            return "discoverer"  # explore each level to find altars
        if self.direction == "down":
            if dungeon_depth >= self.max_depth:
                self.direction = "up"
                return "ascender"
            return "descender"
        if dungeon_depth <= 1:
            self.direction = "down"
            return "descender"
        return "ascender"
