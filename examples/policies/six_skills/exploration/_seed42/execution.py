# Hand-written, standing in for a language model's policy over six skills for the training task (the designed
# five and the fighter); no language model wrote it. examples/policies/six_skills/README.md says how it is used.
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        # a Mines episode heads for the Gnomish Mines; any other keeps to the Dungeons of Doom
        if self.mines:
            return self.reach_gnomish_mines(current_skill, dungeon_depth, branch_number,
                                            merchant_precondition, worshipper_precondition)
        return self.reach_dungeons_of_doom(current_skill, dungeon_depth, branch_number,
                                           merchant_precondition, worshipper_precondition)

    def wants_fighter(self):
        return True

    def select_skill(self, current_skill, dungeon_depth, merchant_precondition, worshipper_precondition):
        # A shopkeeper, then an altar, in view while new items are held comes first.
        if merchant_precondition:
            return "merchant"
        if worshipper_precondition:
            return "worshipper"
        return self.explore_then_move(current_skill, dungeon_depth)

    def explore_then_move(self, current_skill, dungeon_depth):
        # After exploring, the fighter clears the level before the hero moves on (the one change from the
        # release's strategy); every other skill hands over to the discoverer; then down to max_depth and back up.
        if current_skill == "discoverer" and self.wants_fighter():
            return "fighter"
        if current_skill not in ("discoverer", "fighter"):
            return "discoverer"
        if self.direction == "down" and dungeon_depth >= self.max_depth:
            self.direction = "up"
        elif self.direction == "up" and dungeon_depth <= 1:
            self.direction = "down"
        return "descender" if self.direction == "down" else "ascender"

    def reach_gnomish_mines(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                            worshipper_precondition):
        if branch_number == 0 and dungeon_depth == self.branch_depth:
            return "descender"
        if branch_number == 0 and dungeon_depth == self.branch_depth + 1:
            return "ascender"
        return self.select_skill(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)

    def reach_dungeons_of_doom(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                               worshipper_precondition):
        if dungeon_depth == self.branch_depth:
            return "ascender" if branch_number == 2 else "descender"
        if branch_number == 2 and dungeon_depth == self.branch_depth + 1:
            return "ascender"
        return self.select_skill(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)
