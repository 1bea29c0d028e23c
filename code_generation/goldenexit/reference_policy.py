"""Hand-written reference policy over skills for the "goldenexit" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/goldenexit/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task goldenexit --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/goldenexit/seed42/execution.py`` (without this docstring).
"""

# State hooks of this task, called by the run-time before perform_task:
#   update_gold(gold)   the hero's current gold
#   defeat_monster()    once for every monster the hero killed

# Strategy: stay on levels 1 to 3 of the Dungeons of Doom (leave the Mines at once): explore
# each level, going down to level 3 and back up, until levels 1-3 were all visited, at
# least 20 gold is held and 25 monsters were defeated; then go up and leave the dungeon
# by ascending from level 1.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def update_gold(self, gold):
        self.gold_pieces = int(gold)

    def defeat_monster(self):
        self.monsters_defeated += 1

    def ready_to_leave(self):
        return (self.gold_pieces >= self.gold_goal and self.monsters_defeated >= self.kill_goal
                and self.deepest_level >= self.max_depth)

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if branch_number == 2:
            return "ascender"
        self.deepest_level = max(self.deepest_level, dungeon_depth)
        if self.ready_to_leave():
            return "ascender"  # from level 1 this leaves the dungeon
        if current_skill != "discoverer":
            return "discoverer"
        if self.direction == "down":
            if dungeon_depth >= self.max_depth:
                self.direction = "up"
                return "ascender"
            return "descender"
        if dungeon_depth <= 1:
            self.direction = "down"
            return "descender"
        return "ascender"
