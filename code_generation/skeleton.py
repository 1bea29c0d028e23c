

class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        # max_depth: the deepest dungeon level the agent may go to.
        # branch_depth: depth of the Dungeons of Doom level holding the Gnomish Mines
        # entrance; -2 while it is unknown (the game updates it once the Mines are found).
        self.max_depth = max_depth
        self.branch_depth = branch_depth

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        # {{perform_task_arguments}}
        # Returns the name of the next skill.
        return "discoverer"
