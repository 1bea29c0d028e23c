# Reference skill functions joined into generated policies by scripts.combine when the
# generation run produced none (python -m scripts.generate_code --skill_functions).
# They expect set_initial_values() to define discoverer_skill_steps,
# merchant_skill_steps, worshipper_skill_steps, use_merchant and use_worshipper.


def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
    # 3x3 neighbourhood around the hero (hero at [1][1]): another '@' is a shopkeeper,
    # '_' is an altar. Both skills need items that were not in the starting kit.
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
