## A template: code_generation/skill_rules.py renders each skill's branch of skill_termination from its
## skill file (skills/*.toml, its [rules] end) where the placeholder is, and drops these two lines.
# Reference skill functions, the one copy every meta-policy module gets from scripts.combine:
# generated policies when the generation run produced none (python -m scripts.generate_code
# --skill_functions), and the hand-written references (scripts.combine --reference). A task
# whose skill functions differ on purpose may override them in code_generation/{task}/skill_functions.py;
# none does today. They decide as the authors' released modules do, for the nine tasks and the
# training policy alike, and expect set_initial_values() to define discoverer_skill_steps,
# merchant_skill_steps and worshipper_skill_steps. The skills are trained under skill_termination,
# so it must not change without re-recording tests/data/skill_env_trace.json
# (tests/test_skill_env_equivalence.py).


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
        return True  # a shopkeeper or an altar in view ends whatever runs (the merchant and worshipper restart)
    # {{skill_termination_branches}}
    return True
