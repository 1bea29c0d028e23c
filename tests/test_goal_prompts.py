"""The judge's goal sentences carry the content and the strength of the release's goals.

The release's goals (its ``rlaif/prompts.py``, ``goal_strings``, and the god clause its prompt
template appends) are restated in this project's words in :mod:`rlaif.prompts`; these tests pin
what each sentence must and must not ask for, so a rewording cannot weaken or widen a goal.
"""
from __future__ import annotations

import re

from rlaif.motif_prompts import MotifPromptBuilder
from rlaif.prompts import GOD_WARNING, SKILL_PREFERENCES, PromptBuilder


def _has(text: str, *patterns: str) -> bool:
    return all(re.search(p, text, re.IGNORECASE) for p in patterns)


def test_discoverer_keeps_what_it_finds_and_refuses_any_change_of_level() -> None:
    goal = SKILL_PREFERENCES["discoverer"]
    assert _has(goal, r"fight\w* monsters", r"gold", r"scrolls")
    assert _has(goal, r"(never|not) drop"), "the release says: but do not drop them"
    # "categorically refuse going up and down dungeon levels": an outright refusal, not a mild "bad"
    assert _has(goal, r"reject outright|without exception", r"up or down")
    assert not _has(goal, r"is bad for this goal")


def test_descender_says_going_deeper_is_urgent() -> None:
    goal = SKILL_PREFERENCES["descender"]
    assert _has(goal, r"\burgent\b", r"strongly", r"same level", r"shallower|higher")
    assert _has(goal, r"even more|worse"), "going up is worse than staying"


def test_ascender_strongly_dislikes_staying_whatever_the_consequences() -> None:
    goal = SKILL_PREFERENCES["ascender"]
    assert _has(goal, r"only progress|only by going up", r"strongly", r"same dungeon level", r"no matter")


def test_worshipper_is_about_identifying_items_not_praying_and_gives_no_hint() -> None:
    goal = SKILL_PREFERENCES["worshipper"]
    assert _has(goal, r"strongly", r"altar", r"cursed", r"blessed", r"not to pray", r"favour|pleas")
    # the release does not tell the judge how an altar reveals curses
    assert not _has(goal, r"flash|black|amber|drop")


def test_merchant_negotiates_and_sells_and_says_nothing_of_buying_or_entering() -> None:
    goal = SKILL_PREFERENCES["merchant"]
    assert _has(goal, r"shopkeeper", r"haggl|negotiat", r"sell", r"steal")
    assert not _has(goal, r"\bbuy|bought|purchas|enter")


def test_god_clause_overrides_every_goal() -> None:
    # "Above everything else, categorically refuse to anger or displease your god"
    assert _has(GOD_WARNING, r"above all", r"reject outright", r"anger", r"displeas", r"thunder|boom")
    for skill in SKILL_PREFERENCES:
        text = PromptBuilder(skill).user_prompt("c1", "c2")
        assert SKILL_PREFERENCES[skill] in text and GOD_WARNING in text


def test_motif_layout_prompts_read_the_same_sentences() -> None:
    # one home: the Motif-layout annotation of a skill key puts the same preference sentence in its prompt
    for skill, sentence in SKILL_PREFERENCES.items():
        conv = MotifPromptBuilder(goal_key=skill).conversation("first description", "second description")
        assert sentence in conv[-1]["content"]
