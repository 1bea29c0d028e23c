"""Captions: the text the annotator reads for one observation.

An observation (one dataset sample) is the message shown before and after a
step plus the bottom-line stats before and after it, laid out as
:data:`rlaif.dataset.STAT_FIELDS` (depth, gold, hp, hpmax, xp level, hunger).
:func:`caption_sample` turns it into a few short lines, for example::

    Message before: "You see here a scroll labeled ZELGO MER."
    Message after: "f - a scroll labeled ZELGO MER."
    Dungeon depth: did not change (level 1).
    Gold: went up from 3 to 17.
    Hit points: did not change (12 out of 12).
    Experience level: did not change (1).
    Hunger: did not change (not hungry).

Hunger values are NetHack's hunger states as NLE's blstats report them
(``u.uhs``: 0 satiated, 1 not hungry, 2 hungry, 3 weak, 4 fainting, 5 fainted,
6 starved; a fresh game starts at 1), named by :data:`rlaif.dataset.HUNGER_NAMES`.

The field labels ("Message before:", "Dungeon depth:", ...) are also read back
by the rule-based annotator in :mod:`rlaif.heuristic`, so change them together.
"""
from __future__ import annotations

import numpy as np

from common.nethack import blstats as B
from common.nethack.messages import MESSAGE_LEN, decode_message
from rlaif.dataset import HUNGER_NAMES, STAT_FIELDS

NO_MESSAGE = "(no message)"

# Line labels, shared with rlaif.heuristic which parses captions back.
LABEL_MSG_BEFORE = "Message before"
LABEL_MSG_AFTER = "Message after"
LABEL_DEPTH = "Dungeon depth"
LABEL_GOLD = "Gold"
LABEL_HP = "Hit points"
LABEL_XP = "Experience level"
LABEL_HUNGER = "Hunger"

_DEPTH, _GOLD, _HP, _HPMAX, _XP, _HUNGER = range(len(STAT_FIELDS))


def hunger_name(value: int) -> str:
    """Name of a NetHack hunger state; out-of-range values are reported as such."""
    if 0 <= value < len(HUNGER_NAMES):
        return HUNGER_NAMES[value]
    return f"unknown hunger state {value}"


def _quoted(text: str) -> str:
    if not text:
        return NO_MESSAGE
    return '"' + text.replace('"', "'") + '"'


def _change(before: int, after: int, unchanged_note: str) -> str:
    if before == after:
        return f"did not change ({unchanged_note})"
    direction = "up" if after > before else "down"
    return f"went {direction} from {before} to {after}"


def _depth_line(before: int, after: int) -> str:
    # in the game's sense, as the release's captions: a larger level number is further DOWN
    if before == after:
        return f"{LABEL_DEPTH}: did not change (level {before})."
    if after > before:
        step = "one level" if after - before == 1 else f"{after - before} levels"
        return f"{LABEL_DEPTH}: went down from level {before} to level {after} ({step} deeper)."
    step = "one level" if before - after == 1 else f"{before - after} levels"
    return f"{LABEL_DEPTH}: went up from level {before} to level {after} ({step} closer to the surface)."


def _hp_line(hp0: int, hp1: int, max0: int, max1: int) -> str:
    if hp0 == hp1 and max0 == max1:
        return f"{LABEL_HP}: did not change ({hp1} out of {max1})."
    text = f"{LABEL_HP}: " + _change(hp0, hp1, f"{hp1}")
    if max0 != max1:
        text += f", maximum {_change(max0, max1, '')}"
    else:
        text += f" (maximum {max1})"
    return text + "."


def _hunger_line(h0: int, h1: int) -> str:
    if h0 == h1:
        return f"{LABEL_HUNGER}: did not change ({hunger_name(h1)})."
    return f"{LABEL_HUNGER}: changed from {hunger_name(h0)} to {hunger_name(h1)}."


def caption_from_values(message_before: str, message_after: str, stats_before: list[int], stats_after: list[int]) -> str:
    """Caption from already decoded messages and stats lists (see :func:`caption_sample`)."""
    s0, s1 = stats_before, stats_after
    lines = (
        f"{LABEL_MSG_BEFORE}: {_quoted(message_before)}",
        f"{LABEL_MSG_AFTER}: {_quoted(message_after)}",
        _depth_line(s0[_DEPTH], s1[_DEPTH]),
        f"{LABEL_GOLD}: {_change(s0[_GOLD], s1[_GOLD], str(s1[_GOLD]))}.",
        _hp_line(s0[_HP], s1[_HP], s0[_HPMAX], s1[_HPMAX]),
        f"{LABEL_XP}: {_change(s0[_XP], s1[_XP], str(s1[_XP]))}.",
        _hunger_line(s0[_HUNGER], s1[_HUNGER]),
    )
    return "\n".join(lines)


def caption_sample(messages: np.ndarray, stats: np.ndarray) -> str:
    """The annotator's text for one sample.

    Args:
        messages: uint8 [2, 256], the message before and after (zero padded).
        stats: int [2, 6], the stats before and after, laid out as ``STAT_FIELDS``.

    Returns:
        A multi-line caption: both messages, then how depth, gold, hit points,
        experience level and hunger changed ("did not change (...)",
        "went up from a to b", "went down from a to b", ...).
    """
    messages = np.asarray(messages)
    stats = np.asarray(stats)
    if messages.shape != (2, MESSAGE_LEN):
        raise ValueError(f"messages must have shape (2, {MESSAGE_LEN}), got {messages.shape}")
    if stats.shape != (2, len(STAT_FIELDS)):
        raise ValueError(f"stats must have shape (2, {len(STAT_FIELDS)}), got {stats.shape}")
    raw = messages.astype(np.uint8, copy=False).tobytes()
    values = stats.tolist()
    return caption_from_values(
        decode_message(raw[:MESSAGE_LEN]), decode_message(raw[MESSAGE_LEN:]), values[0], values[1]
    )


def caption_pair(messages: np.ndarray, stats: np.ndarray, pair: int) -> tuple[str, str]:
    """Captions of pair ``pair`` (samples ``2*pair`` and ``2*pair + 1``) of a dataset's arrays."""
    return caption_sample(messages[2 * pair], stats[2 * pair]), caption_sample(messages[2 * pair + 1], stats[2 * pair + 1])


# --------------------------------------------------------------------------- Motif's descriptions
#
# Motif's annotator shows the judge the messages of a pair member: the messages of its L
# observations in order, empty ones left out, a run of the same message written once with its
# count ("You hit the newt! (x3)"), one per line. With --use-blstats each line also carries the
# stats of the observation it starts at, in NetHack's status-line notation.

_STATUS_HUNGER = ("Satiated", "", "Hungry", "Weak", "Fainting", "Fainted", "Starved")


def group_messages(messages: list[str]) -> tuple[list[str], list[int]]:
    """Runs of equal messages: (texts with " (xN)" for runs longer than one, index where each run
    starts). Empty messages are skipped; with no message at all the index list is ``[0]``."""
    texts: list[str] = []
    starts: list[int] = []
    i = 0
    while i < len(messages):
        j = i
        while j + 1 < len(messages) and messages[j + 1] == messages[i]:
            j += 1
        if messages[i]:
            count = j - i + 1
            texts.append(f"{messages[i]} (x{count})" if count > 1 else messages[i])
            starts.append(i)
        i = j + 1
    return texts, starts or [0]


def status_line(blstats: np.ndarray) -> str:
    """One observation's stats as NetHack's bottom line writes them: ``Dlvl:2 $:14 HP:9(12) Xp:1 Hungry``."""
    b = [int(v) for v in np.asarray(blstats).reshape(-1)]
    hunger = b[B.BL_HUNGER]
    hunger_text = _STATUS_HUNGER[hunger] if 0 <= hunger < len(_STATUS_HUNGER) else f"hunger {hunger}"
    text = f"Dlvl:{b[B.BL_DEPTH]} $:{b[B.BL_GOLD]} HP:{b[B.BL_HP]}({b[B.BL_HPMAX]}) Xp:{b[B.BL_XP_LEVEL]}"
    return f"{text} {hunger_text}" if hunger_text else text


def motif_description(messages: list[str] | None, blstats: np.ndarray | None = None) -> str:
    """The text the judge reads for one pair member (see above).

    Args:
        messages: the decoded messages of the member's L observations (None: messages not used);
        blstats: its blstats [L, 26 or 27] (None: stats not used).
    """
    if messages is None and blstats is None:
        raise ValueError("a description needs the messages, the stats or both")
    if messages is None:
        return "\n".join(status_line(row) for row in np.asarray(blstats))
    texts, starts = group_messages(messages)
    if blstats is None:
        return "\n".join(texts)
    stats = np.asarray(blstats)
    if not texts:
        return status_line(stats[starts[0]])
    return "\n".join(f"{text} {status_line(stats[i])}" for text, i in zip(texts, starts))
