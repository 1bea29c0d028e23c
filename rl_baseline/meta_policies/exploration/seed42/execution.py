# Reference policy over skills for the "exploration" task: the policy used while the skills
# are trained.
#
# Hand-written reference that behaves as the authors' released training policy (their
# rl_baseline/meta_policies/exploration/seed42/execution.py), written anew here.
# `python -m scripts.generate_code --task exploration --seed N` followed by
# `python -m scripts.combine --task exploration --seed N` regenerates a module of this
# shape with a language model (in rl_baseline/meta_policies/exploration/seedN/).
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
# Strategy (the release's): every episode draws its deepest level uniformly from {2, 3, 4}
# and, with probability 1/2, whether it heads for the Gnomish Mines. The hero explores each
# level it reaches (discoverer), then goes down until the deepest level and back up to
# level 1, again and again. A Mines episode goes down on the level holding the Mines
# entrance and back up when it took the main staircase instead, until it is in the Mines;
# the other episodes leave the Mines at once when they enter them by chance. Whenever a
# shopkeeper or an altar is in view while the hero holds new items, the merchant or
# worshipper skill starts, and any such sighting ends the running skill (the merchant and
# worshipper included: they then start again).
import random


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def set_initial_values(self):
        self.skill = "discoverer"
        self.max_depth = random.randint(2, 4)
        self.mines = random.randint(0, 1) == 1
        self.discoverer_skill_steps = 500
        self.merchant_skill_steps = self.discoverer_skill_steps * 20
        self.worshipper_skill_steps = self.discoverer_skill_steps * 20
        self.direction = "down"
        self.use_merchant = True
        self.use_worshipper = True

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
        if any(preconditions):
            return True  # a shopkeeper or an altar in view ends whatever runs
        if skill == "discoverer":
            return skill_time >= self.discoverer_skill_steps
        if skill == "descender":
            return current_depth > previous_depth
        if skill == "ascender":
            return current_depth < previous_depth
        if skill == "merchant":
            return skill_time >= self.merchant_skill_steps
        if skill == "worshipper":
            return skill_time >= self.worshipper_skill_steps
        return True

    def select_skill(self, current_skill, dungeon_depth):
        # explore every level reached, then move on: down to max_depth, back up to level 1
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

    def select_skill_mines(self, current_skill, dungeon_depth, branch_number):
        # an episode that heads for the Gnomish Mines
        if branch_number == 0 and self.branch_depth > 0:
            if dungeon_depth == self.branch_depth:
                return "descender"  # the level with the Mines entrance: go down
            if dungeon_depth == self.branch_depth + 1:
                return "ascender"  # took the main staircase: back to the entrance level
        return self.select_skill(current_skill, dungeon_depth)

    def select_skill_dungeons(self, current_skill, dungeon_depth, branch_number):
        # an episode that stays in the Dungeons of Doom
        if branch_number == 2 and self.branch_depth > 0 and dungeon_depth == self.branch_depth + 1:
            return "ascender"  # first Mines level: leave the Mines
        if branch_number == 0 and self.branch_depth > 0 and dungeon_depth == self.branch_depth:
            return "descender"
        return self.select_skill(current_skill, dungeon_depth)

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if merchant_precondition:
            return "merchant"
        if worshipper_precondition:
            return "worshipper"
        if self.mines:
            return self.select_skill_mines(current_skill, dungeon_depth, branch_number)
        return self.select_skill_dungeons(current_skill, dungeon_depth, branch_number)
