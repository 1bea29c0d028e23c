"""The five skills: names, index order and short descriptions (their one home).

The index order is used everywhere: the one-hot input of the policy network,
``--reward_dir`` lists, ``--eps_threshold_quantile`` lists and meta-policy code.
"""
from __future__ import annotations

SKILLS: tuple[str, ...] = ("discoverer", "descender", "ascender", "worshipper", "merchant")
NUM_SKILLS: int = len(SKILLS)
SKILL_INDEX: dict[str, int] = {name: i for i, name in enumerate(SKILLS)}

SKILL_DESCRIPTIONS: dict[str, str] = {
    "discoverer": "explore the current level fully (fight, pick up gold and scrolls) and never change level",
    "descender": "reach a down staircase and go down; staying on the level or going up is bad",
    "ascender": "reach an up staircase and go up; staying on the level is bad",
    "worshipper": "use an altar to learn whether items are cursed or blessed by dropping them on it, not to pray",
    "merchant": "negotiate, sell and interact with shopkeepers, never steal",
}


def skill_index(name: str) -> int:
    """Index of a skill by name, with an error that lists the valid names."""
    try:
        return SKILL_INDEX[name]
    except KeyError:
        raise ValueError(f"unknown skill {name!r}; valid skills: {', '.join(SKILLS)}") from None


def skill_from_experiment(experiment: str) -> str:
    """Reads the skill out of an annotator/experiment string such as ``llama3_descender_default``."""
    for part in experiment.split("_"):
        if part in SKILL_INDEX:
            return part
    raise ValueError(
        f"cannot read a skill from experiment name {experiment!r}: expected one of "
        f"{', '.join(SKILLS)} as a '_'-separated part (e.g. llama3_descender_default); pass --skill"
    )
