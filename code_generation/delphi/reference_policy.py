"""Hand-written reference policy over skills for the "delphi" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/delphi/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions and the initial values, which
``python -m scripts.combine --task delphi --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/delphi/seed42/execution.py`` (without this docstring).
"""

# Strategy: the Oracle is on level 5 to 9 of the Dungeons of Doom. Leave the Gnomish Mines if
# the hero ends up there, otherwise keep going down, exploring a level before each descent
# once past level 4; stop at max_depth and explore.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if branch_number == 2:
            return "ascender"
        if dungeon_depth >= self.max_depth:
            return "discoverer"
        if dungeon_depth >= 5 and current_skill == "descender":
            return "discoverer"
        return "descender"
