"""Reading the model's choice out of its reply.

The prompts ask for a last line ``Action: <name>`` or ``Skill: <name>``; the last such line counts
(a model that thinks aloud may name other actions first). Names are matched without regard to case,
markdown emphasis, quotes or a trailing full stop, and spellings such as ``north-east`` or
``far north`` are accepted. Anything else is a parse failure: the caller then takes a safe fallback
and counts the failure (it is reported in the results, never hidden).
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

_LINE = {
    "action": re.compile(r"^[\s>*_#-]*action[\s*_]*[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE),
    "skill": re.compile(r"^[\s>*_#-]*skill[\s*_]*[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE),
}


def normalise(name: str) -> str:
    """``"**Far North**."`` -> ``far_north``; ``north-east`` -> ``northeast``."""
    text = re.sub(r"[*_`'\"<>.!]+", " ", name.lower()).strip()
    words = [w for w in re.split(r"[\s\-]+", text) if w]
    if not words:
        return ""
    if words[0] == "far" and len(words) > 1:
        return "far_" + "".join(words[1:])
    return "".join(words)


def parse_choice(reply: str, kind: str, valid: Sequence[str]) -> Optional[str]:
    """The name on the last ``Action:`` / ``Skill:`` line of ``reply`` if it is one of ``valid``, else None."""
    matches = _LINE[kind].findall(reply or "")
    if not matches:
        return None
    lookup = {normalise(v): v for v in valid}
    # "Action: east (towards the stairs)" -> the first word(s) before an explanation
    candidate = re.split(r"[(,;:]", matches[-1], maxsplit=1)[0]
    return lookup.get(normalise(candidate))


def parse_action(reply: str, action_names: Sequence[str]) -> Optional[int]:
    """Index of the action the reply names, or None."""
    name = parse_choice(reply, "action", action_names)
    return None if name is None else list(action_names).index(name)


def parse_skill(reply: str, skills: Sequence[str]) -> Optional[str]:
    return parse_choice(reply, "skill", skills)
