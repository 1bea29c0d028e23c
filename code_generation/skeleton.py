

class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        # max_depth: the deepest dungeon level the agent may go to.
        # branch_depth: depth of the Dungeons of Doom level holding the Gnomish Mines
        # entrance; -2 while it is unknown (the game updates it once the Mines are found).
        self.max_depth = max_depth
        self.branch_depth = branch_depth

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        # current_skill: the skill that just ended ("discoverer", "descender", "ascender",
        # "worshipper" or "merchant"); dungeon_depth: the current depth; branch_number: 0 in
        # the Dungeons of Doom, 2 in the Gnomish Mines; merchant_precondition: a shopkeeper is
        # in view of the hero and items can be sold; worshipper_precondition: an altar is in
        # view of the hero and items can be identified.
        # Returns the name of the next skill.
        return "discoverer"
