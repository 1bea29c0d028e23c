"""Hand-written reference policy over skills for the "minetown" task; no language model wrote it.

It stands in for what a language model writes into ``code_generation/minetown/_seed{N}/execution.py``:
the ``NetHackPlayer`` class without the skill functions, the navigation methods and the initial values,
which ``python -m scripts.combine --task minetown --seed 42 --reference`` joins to it to write the shipped
``rl_baseline/meta_policies/minetown/seed42/execution.py`` (without this docstring).
"""

# Decides as the authors' released policy over skills for this task does (their
# rl_baseline/meta_policies/minetown/seed42/execution.py), written anew here; the navigation methods
# (select_skill, explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom) come from
# code_generation/parts/navigation.py.
#
# Strategy: Minetown is the third or fourth level of the Gnomish Mines. Reach the Mines as the
# gnomish task does; in the Mines go down to depth 8, then explore.


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.set_initial_values()

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if branch_number == 2:
            return "descender" if dungeon_depth < 8 else "discoverer"
        return self.reach_gnomish_mines(current_skill, dungeon_depth, branch_number,
                                        merchant_precondition, worshipper_precondition)
