"""Hand-written reference policy over skills for the "levelupsell" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/levelupsell/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task levelupsell --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/levelupsell/seed42/execution.py`` (without this docstring).
"""

# State hook of this task, called by the run-time before perform_task:
#   update_xp_level(xp_level)   the hero's experience level

# Strategy: stay on level 1 and explore (fighting monsters) until experience level 4; then go
# down looking for a shop and sell an item with the merchant skill; afterwards keep exploring
# the current level to survive.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def update_xp_level(self, xp_level):
        self.xp_level = int(xp_level)

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if current_skill == "merchant" and self.xp_level >= self.xp_goal:
            self.item_sold = True
        if self.xp_level < self.xp_goal:
            if dungeon_depth > 1:
                return "ascender"
            return "discoverer"  # never ascend from level 1: that would end the game
        if self.item_sold:
            return "discoverer"
        if merchant_precondition:
            return "merchant"
        if branch_number == 2:
            return "ascender"
        if current_skill != "discoverer":
            return "discoverer"
        if self.direction == "down":
            if dungeon_depth >= self.max_depth:
                self.direction = "up"
                return "ascender"
            return "descender"
        if dungeon_depth <= 2:
            self.direction = "down"
            return "descender"
        return "ascender"
