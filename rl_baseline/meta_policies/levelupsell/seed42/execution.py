# Reference policy over skills for the "levelupsell" task.
#
# Hand-written reference, following the strategy described in the MaestroMotif paper.
# `python -m scripts.generate_code --task levelupsell --seed N` followed by
# `python -m scripts.combine --task levelupsell --seed N` regenerates a module of this
# shape with a language model (in rl_baseline/meta_policies/levelupsell/seedN/).
#
# Interface (called by the game run-time through rl_baseline/skills/meta_policy.py):
#   NetHackPlayer(max_depth, branch_depth), then set_initial_values()
#   skill_precondition(char_ascii_encodings, char_ascii_colors, num_items, color_map)
#       -> (worshipper_ok, merchant_ok)
#   skill_termination(skill, skill_time, current_depth, previous_depth, preconditions) -> bool
#   perform_task(current_skill, dungeon_depth, branch_number,
#                merchant_precondition, worshipper_precondition) -> skill name
# The run-time sets `branch_depth` once the Gnomish Mines entrance is known.
#
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

    def set_initial_values(self):
        self.skill = "discoverer"
        self.discoverer_skill_steps = 500
        self.merchant_skill_steps = self.discoverer_skill_steps * 20
        self.worshipper_skill_steps = self.discoverer_skill_steps * 20
        self.direction = "down"
        self.max_depth = 6
        self.xp_level = 1
        self.xp_goal = 4
        self.item_sold = False
        self.use_merchant = True
        self.use_worshipper = False

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        # 7x7 window around the hero (the hero's own cell has colour 0): a shopkeeper is an
        # '@' in the shopkeeper's colour, an altar a '_' in the altar's colour. Both skills
        # need items that were not in the starting kit (coins and food do not count).
        if num_items <= 0:
            return False, False
        shopkeeper = False
        altar = False
        for row in range(len(char_ascii_encodings)):
            for col in range(len(char_ascii_encodings[row])):
                char = int(char_ascii_encodings[row][col])
                color = int(char_ascii_colors[row][col])
                if char == ord("@") and color == color_map["@"]:
                    shopkeeper = True
                elif char == ord("_") and color == color_map["_"]:
                    altar = True
        return altar, shopkeeper

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
