# The training policy's own skill_termination, joined by scripts.combine instead of the one of
# code_generation/parts/skill_functions.py (skill_precondition still comes from there). It
# differs on purpose, as the authors' released training policy does: any shopkeeper or altar in
# view ends whatever skill runs (the merchant and worshipper included: they then start again),
# the descender ends only on going down and the ascender only on going up. The skills are
# trained under this rule, so it must not change without re-recording
# tests/data/skill_env_trace.json (tests/test_skill_env_equivalence.py).


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
