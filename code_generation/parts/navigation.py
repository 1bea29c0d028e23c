# Reference navigation methods, the one copy every hand-written reference policy gets from
# scripts.combine --reference (a reference policy that defines a method of the same name keeps
# its own: the discoveryhunger task's select_skill). They decide as the authors' released
# policies over skills do (their rl_baseline/meta_policies/{task}/seed42/execution.py), written
# anew here. They expect set_initial_values() to define max_depth and direction ("down" or "up").
# branch_depth is -2 while the Gnomish Mines entrance is unknown: then no depth matches it.


def select_skill(self, current_skill, dungeon_depth, merchant_precondition, worshipper_precondition):
    # A shopkeeper, then an altar, in view while new items are held comes first.
    if merchant_precondition:
        return "merchant"
    if worshipper_precondition:
        return "worshipper"
    return self.explore_then_move(current_skill, dungeon_depth)


def explore_then_move(self, current_skill, dungeon_depth):
    # Every other skill hands over to the discoverer; after exploring, the hero moves on: down to
    # max_depth, then back up to level 1, then down again.
    if current_skill != "discoverer":
        return "discoverer"
    if self.direction == "down" and dungeon_depth >= self.max_depth:
        self.direction = "up"
    elif self.direction == "up" and dungeon_depth <= 1:
        self.direction = "down"
    return "descender" if self.direction == "down" else "ascender"


def reach_gnomish_mines(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                        worshipper_precondition):
    # In the Dungeons of Doom: go down on the level of the Mines entrance, and come back up when
    # the descender took the main staircase instead (it lands one level below the entrance).
    if branch_number == 0 and dungeon_depth == self.branch_depth:
        return "descender"
    if branch_number == 0 and dungeon_depth == self.branch_depth + 1:
        return "ascender"
    return self.select_skill(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)


def reach_dungeons_of_doom(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                           worshipper_precondition):
    # Keep to the Dungeons of Doom: from the first Mines level go back up; on the entrance level go
    # down (again up should that descent have entered the Mines).
    if dungeon_depth == self.branch_depth:
        return "ascender" if branch_number == 2 else "descender"
    if branch_number == 2 and dungeon_depth == self.branch_depth + 1:
        return "ascender"
    return self.select_skill(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)
