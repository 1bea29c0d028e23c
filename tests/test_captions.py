"""Captions and prompts: the text the annotator reads, and how its answers are parsed."""
from __future__ import annotations

import numpy as np
import pytest

from common.nethack.messages import encode_message
from common.vocabulary import SKILLS
from rlaif.captions import caption_pair, caption_sample, hunger_name
from rlaif.dataset import HUNGER_NAMES
from rlaif.preferences import FIRST, SECOND, TIE, UNKNOWN
from rlaif.prompts import (
    GOD_WARNING,
    RETRY_PROMPT,
    SKILL_PREFERENCES,
    SYSTEM_PROMPT,
    PromptBuilder,
    PromptError,
    load_template,
    parse_answer,
    retry_conversation,
)


def sample(before: str, after: str, s0: list[int], s1: list[int]) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([encode_message(before), encode_message(after)]), np.array([s0, s1], dtype=np.int32)


def lines(caption: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in caption.splitlines())


def test_unchanged_stats_say_did_not_change() -> None:
    msgs, stats = sample("You see here a dagger.", "f - a dagger.", [2, 10, 12, 14, 1, 1], [2, 10, 12, 14, 1, 1])
    got = lines(caption_sample(msgs, stats))
    assert got["Message before"] == '"You see here a dagger."'
    assert got["Message after"] == '"f - a dagger."'
    assert got["Dungeon depth"] == "did not change (level 2)."
    assert got["Gold"] == "did not change (10)."
    assert got["Hit points"] == "did not change (12 out of 14)."
    assert got["Experience level"] == "did not change (1)."
    assert got["Hunger"] == "did not change (not hungry)."


def test_changes_are_described_with_both_values() -> None:
    msgs, stats = sample("", "You kill the newt!", [1, 5, 12, 14, 1, 1], [2, 17, 9, 16, 2, 2])
    got = lines(caption_sample(msgs, stats))
    assert got["Message before"] == "(no message)"
    # the game's sense, as in the release's captions: level 1 -> 2 is going down
    assert got["Dungeon depth"] == "went down from level 1 to level 2 (one level deeper)."
    assert got["Gold"] == "went up from 5 to 17."
    assert got["Hit points"] == "went down from 12 to 9, maximum went up from 14 to 16."
    assert got["Experience level"] == "went up from 1 to 2."
    assert got["Hunger"] == "changed from not hungry to hungry."


def test_going_up_the_dungeon_and_losing_gold() -> None:
    msgs, stats = sample("You climb up the stairs.", "", [4, 30, 10, 10, 3, 0], [2, 20, 10, 10, 3, 1])
    got = lines(caption_sample(msgs, stats))
    assert got["Dungeon depth"] == "went up from level 4 to level 2 (2 levels closer to the surface)."
    assert got["Gold"] == "went down from 30 to 20."
    assert got["Hit points"] == "did not change (10 out of 10)."
    assert got["Hunger"] == "changed from satiated to not hungry."
    assert got["Message after"] == "(no message)"


def test_hunger_names_follow_nethack_order() -> None:
    # NetHack's u.uhs as NLE reports it: 0 satiated, 1 not hungry (a new game), 2 hungry, 3 weak, 4 fainting.
    assert [hunger_name(i) for i in range(5)] == ["satiated", "not hungry", "hungry", "weak", "fainting"]
    assert HUNGER_NAMES[5:] == ("fainted", "starved")
    assert hunger_name(42) == "unknown hunger state 42"


def test_quotes_in_messages_do_not_break_the_caption() -> None:
    msgs, stats = sample('He says "hello".', 'Call it "bob"?', [1] * 6, [1] * 6)
    got = lines(caption_sample(msgs, stats))
    assert got["Message before"] == "\"He says 'hello'.\""


def test_caption_checks_shapes() -> None:
    with pytest.raises(ValueError, match="messages"):
        caption_sample(np.zeros((3, 256), np.uint8), np.zeros((2, 6), np.int32))
    with pytest.raises(ValueError, match="stats"):
        caption_sample(np.zeros((2, 256), np.uint8), np.zeros((2, 5), np.int32))


def test_caption_pair_uses_samples_2k_and_2k_plus_1() -> None:
    messages = np.stack([np.stack([encode_message(f"m{i}a"), encode_message(f"m{i}b")]) for i in range(6)])
    stats = np.ones((6, 2, 6), np.int32)
    first, second = caption_pair(messages, stats, 2)
    assert '"m4b"' in first and '"m5b"' in second


# ------------------------------------------------------------------ prompts


@pytest.mark.parametrize(
    "reply, code",
    [
        ("Moment 1 is better.\nAnswer: 1", FIRST),
        ("Answer: 2", SECOND),
        ("**Answer:** 2", SECOND),
        ('{"answer": "1"}', FIRST),
        ("Answer: none", TIE),
        ("Answer: Neither", TIE),
        ("answer = tie", TIE),
        ("Answer: 1 ... on reflection, Answer: 2", SECOND),
        ("Answer: Moment 2", SECOND),
        ("I prefer moment 1.", UNKNOWN),
        ("Answer: 3", UNKNOWN),
        ("", UNKNOWN),
        (None, UNKNOWN),
    ],
)
def test_parse_answer(reply: str | None, code: int) -> None:
    assert parse_answer(reply) == code


def test_every_skill_has_its_own_preference_sentence() -> None:
    assert set(SKILL_PREFERENCES) == set(SKILLS)
    assert len(set(SKILL_PREFERENCES.values())) == len(SKILLS)
    assert "deeper" in SKILL_PREFERENCES["descender"]
    assert "altar" in SKILL_PREFERENCES["worshipper"]
    assert "shopkeeper" in SKILL_PREFERENCES["merchant"]
    assert "god" in GOD_WARNING


def test_prompt_builder_puts_goal_and_captions_in_order() -> None:
    conv = PromptBuilder("merchant").conversation("CAPTION-ONE", "CAPTION-TWO")
    assert conv[0] == {"role": "system", "content": SYSTEM_PROMPT}
    user = conv[1]["content"]
    assert conv[1]["role"] == "user"
    assert SKILL_PREFERENCES["merchant"] in user and GOD_WARNING in user
    assert user.index("CAPTION-ONE") < user.index("CAPTION-TWO")
    assert "Answer: 1" in user and "{" not in user
    retry = retry_conversation(conv, "no idea")
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "user"]
    assert retry[-1]["content"] == RETRY_PROMPT and len(conv) == 2


def test_unknown_skill_is_refused() -> None:
    with pytest.raises(ValueError, match="valid skills"):
        PromptBuilder("wizard")


def test_custom_template_file(tmp_path) -> None:
    good = tmp_path / "t.txt"
    good.write_text("Goal: {preference}\nA:\n{caption_1}\nB:\n{caption_2}\nSay Answer: 1, 2 or none.")
    builder = PromptBuilder("ascender", load_template(str(good)))
    text = builder.user_prompt("x1", "x2")
    assert text.startswith("Goal: " + SKILL_PREFERENCES["ascender"]) and "A:\nx1\nB:\nx2" in text
    bad = tmp_path / "bad.txt"
    bad.write_text("only {caption_1} here {preference}")
    with pytest.raises(PromptError, match="caption_2"):
        load_template(str(bad))
    with pytest.raises(PromptError, match="neither"):
        load_template(str(tmp_path / "missing.txt"))
    assert "{caption_1}" in load_template("default")


def test_nle_reports_a_new_game_as_not_hungry() -> None:
    """Ties HUNGER_NAMES to what NLE actually reports (index 1 = not hungry at the start)."""
    from nle import nethack  # a hard requirement: missing, the test fails
    env = nethack.Nethack(observation_keys=("blstats",), ttyrec=None)
    try:
        (blstats,) = env.reset()
        assert HUNGER_NAMES[int(blstats[nethack.NLE_BL_HUNGER])] == "not hungry"
    finally:
        env.close()


def test_none_is_reserved_for_two_undesirable_moments() -> None:
    """The release's judge answers None only when both observations are bad, not when unsure."""
    from rlaif.prompts import ANSWER_INSTRUCTIONS

    assert "cannot tell" not in ANSWER_INSTRUCTIONS
    assert "Answer: none\" only if both moments show something undesirable" in ANSWER_INSTRUCTIONS
