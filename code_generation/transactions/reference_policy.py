"""Hand-written reference policy over skills for the "transactions" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/transactions/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task transactions --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/transactions/seed42/execution.py`` (without this docstring).
"""

# Strategy: pick up items while exploring levels 1 to max_depth of the Dungeons of Doom,
# going down and back up; whenever a shopkeeper is next to the hero and items are held,
# use the merchant skill to sell them.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if merchant_precondition:
            return "merchant"
        if branch_number == 2:
            return "ascender"  # shops are searched in the Dungeons of Doom
        if current_skill != "discoverer":
            return "discoverer"  # explore each level to find shops
        if self.direction == "down":
            if dungeon_depth >= self.max_depth:
                self.direction = "up"
                return "ascender"
            return "descender"
        if dungeon_depth <= 1:
            self.direction = "down"
            return "descender"
        return "ascender"
