"""The agent's action set (the paper's, see docs/paper.md) and the keys the macros send.

Actions are NLE key codes. ``ACTIONS[i]`` is what discrete action ``i`` means; names
(``ACTION_NAMES[i]``) are used in logs and by the task detectors.

Note: the compass keys ``y`` (north-west) and ``n`` (south-east) double as the answers to
yes/no questions, which is how an agent answers the questions it is allowed to see
(attack a peaceful, sell an item, ...).
"""
from __future__ import annotations

from nle import nethack

MORE = nethack.MiscAction.MORE
KICK = nethack.Command.KICK
EAT = nethack.Command.EAT
SEARCH = nethack.Command.SEARCH
CAST = nethack.Command.CAST
ENHANCE = nethack.Command.ENHANCE
PRAY = nethack.Command.PRAY
QUAFF = nethack.Command.QUAFF
DROP = nethack.Command.DROP
UP = nethack.MiscDirection.UP
DOWN = nethack.MiscDirection.DOWN
WAIT = nethack.MiscDirection.WAIT

ACTIONS: tuple[int, ...] = tuple(
    [MORE]
    + list(nethack.CompassDirection)
    + list(nethack.CompassDirectionLonger)
    + [UP, DOWN, WAIT]
    + [KICK, EAT, SEARCH, CAST, ENHANCE, PRAY, QUAFF, DROP]
)

_COMPASS = ("north", "east", "south", "west", "northeast", "southeast", "southwest", "northwest")
ACTION_NAMES: tuple[str, ...] = (
    ("more",)
    + _COMPASS
    + tuple("far_" + d for d in _COMPASS)
    + ("up", "down", "wait", "kick", "eat", "search", "cast", "enhance", "pray", "quaff", "drop")
)
assert len(ACTION_NAMES) == len(ACTIONS)
ACTION_INDEX: dict[str, int] = {name: i for i, name in enumerate(ACTION_NAMES)}

# ``--travel_actions`` (a lever of the CPU presets' screens, not the release's action set): two more actions
# after the 28, each NetHack's travel command to a staircase in one action: ``_`` (travel), then ``>`` or
# ``<`` (the cursor jumps to a down / up staircase on the map), then ``.`` (go there). The values are pseudo
# keys above the byte range, so no key NetHack knows can be mistaken for them.
TRAVEL_KEY = ord("_")
TRAVEL_CONFIRM = ord(".")
TRAVEL_DOWN = 0x100 | ord(">")
TRAVEL_UP = 0x100 | ord("<")
TRAVEL_ACTIONS: tuple[int, ...] = (TRAVEL_DOWN, TRAVEL_UP)
TRAVEL_ACTION_NAMES: tuple[str, ...] = ("travel_down", "travel_up")


def agent_actions(travel: bool = False) -> tuple[int, ...]:
    """The agent's action set: the release's 28, plus the two travel actions with ``travel``."""
    return ACTIONS + TRAVEL_ACTIONS if travel else ACTIONS


def action_names_for(num_actions: int) -> tuple[str, ...]:
    """The names of an action set of ``num_actions`` actions (28, or 30 with the travel actions); the indices
    as strings for any other size."""
    if num_actions == len(ACTIONS):
        return ACTION_NAMES
    if num_actions == len(ACTIONS) + len(TRAVEL_ACTIONS):
        return ACTION_NAMES + TRAVEL_ACTION_NAMES
    return tuple(str(i) for i in range(num_actions))

# Actions whose key opens an item prompt that the environment answers itself.
MACRO_ACTIONS = frozenset({EAT, QUAFF, DROP, CAST, ENHANCE})

# Raw keys used by the macros (not agent actions).
ESC = 27
RETURN = 13
SPACE = 32
# At the "What do you want to eat/drink?" prompt the agent's next action answers: the
# north-west key ``y`` picks the first item offered, anything else cancels (the release's rule).
ANSWER_ITEM_PROMPT = ord("y")
ITEM_PROMPTS: tuple[bytes, ...] = (b"What do you want to eat", b"What do you want to drink")
# The rest action waits this many turns (a count prefix typed before '.'), as in the
# authors' release; NetHack stops early when something happens.
REST_TURNS = 25
FIRST_SPELL = ord("a")
CAST_AT_SELF = ord(".")
FIRST_MENU_ENTRY = ord("a")

# Key codes that only mean something in NetHack's wizard (debug) mode.
WIZARD_KEYS: dict[str, int] = {c.name.lower(): int(c) for c in nethack.WizardCommand}


def action_index(name: str) -> int:
    """Index of an action by name (``"north"``, ``"eat"``, ``"more"``, ...)."""
    try:
        return ACTION_INDEX[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown action {name!r}; valid actions: {', '.join(ACTION_NAMES)}"
        ) from None
