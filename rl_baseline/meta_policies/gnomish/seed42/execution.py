# Reference policy over skills for the "gnomish" task.
#
# Hand-written reference, following the strategy described in the MaestroMotif paper.
# `python -m scripts.generate_code --task gnomish --seed N` followed by
# `python -m scripts.combine --task gnomish --seed N` regenerates a module of this
# shape with a language model (in rl_baseline/meta_policies/gnomish/seedN/).
#
# Interface (called by the game run-time through rl_baseline/skills/meta_policy.py):
#   NetHackPlayer(max_depth, branch_depth), then set_initial_values()
#   skill_precondition(char_ascii_encodings, char_ascii_colors, num_items, color_map)
#       -> (worshipper_ok, merchant_ok)
#   skill_termination(skill, skill_time, current_depth, previous_depth, preconditions) -> bool
#   perform_task(current_skill, dungeon_depth, branch_number,
#                merchant_precondition, worshipper_precondition) -> skill name
# The run-time sets `branch_depth` once the Gnomish Mines entrance is known.

# Strategy: the Mines entrance is on level 2, 3 or 4 of the Dungeons of Doom. Go down, exploring
# those levels for the second down staircase; past level 4 come back up to level 2 and try
# again; once in the Mines (branch 2) keep exploring there.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def set_initial_values(self):
        self.skill = "discoverer"
        self.discoverer_skill_steps = 500
        self.merchant_skill_steps = self.discoverer_skill_steps * 20
        self.worshipper_skill_steps = self.discoverer_skill_steps * 20
        self.direction = "down"
        self.max_depth = 4
        self.first_entrance_level = 2
        self.use_merchant = False
        self.use_worshipper = False

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        # 3x3 neighbourhood, hero at [1][1]: any other '@' is a shopkeeper, '_' an altar.
        shopkeeper = False
        altar = False
        for row in range(3):
            for col in range(3):
                if row == 1 and col == 1:
                    continue
                char = int(char_ascii_encodings[row][col])
                if char == ord("@"):
                    shopkeeper = True
                elif char == ord("_"):
                    altar = True
        has_items = num_items > 0
        return altar and has_items, shopkeeper and has_items

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        worshipper_ok, merchant_ok = preconditions[0], preconditions[1]
        if skill in ("discoverer", "descender", "ascender"):
            # an interaction this task wants interrupts the navigation skills
            if (self.use_merchant and merchant_ok) or (self.use_worshipper and worshipper_ok):
                return True
        if skill == "discoverer":
            return skill_time >= self.discoverer_skill_steps
        if skill in ("descender", "ascender"):
            return current_depth != previous_depth
        if skill == "merchant":
            return skill_time >= self.merchant_skill_steps
        if skill == "worshipper":
            return skill_time >= self.worshipper_skill_steps
        return True

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
        if dungeon_depth > self.max_depth:
            self.direction = "up"
            return "ascender"
        if dungeon_depth >= self.first_entrance_level and current_skill == "descender":
            return "discoverer"
        return "descender"
