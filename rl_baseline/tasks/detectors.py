"""Success detectors for the evaluation targets.

Pure functions over what the environment exposes (messages, the ``info`` dict, the dungeon
overview text), and one small stateful tracker per task built on them:

    tracker = make_task_tracker("buc")
    tracker.reset(info)                  # info from env.reset()
    tracker.update(info, action_name)    # after every env.step()
    tracker.value                        # 0/1 for success tasks, the count for count tasks

Message formats are NetHack 3.6's (NLE 1.0.0), checked in wizard-mode games:

* altar drop: "There is a black flash as X hits the altar." (cursed), "There is an amber
  flash as X hits the altar." (blessed), "X lands on the altar." (uncursed). The item name
  is printed *before* the hero learns its status, so a name that already carries
  "blessed"/"uncursed"/"cursed" (or holy/unholy water) was known before: no new identification.
  A hallucinating hero sees other colours and learns nothing.
* sale offer (a question): "Asidonhopo offers 10 gold pieces for your scroll labeled FOO.
  Sell it? [ynaq] (y)"; "offers only N" when the shopkeeper is short of gold.
* completed sale: "You sold X for N gold pieces." or, when the shopkeeper names an item you
  had not seen closely, "X; you sold it for N gold pieces."; an item that rolled into a shop:
  "You relinquish X and receive N gold pieces in compensation." Declining the offer prints
  nothing more; selling for credit ("... zorkmids in credit") brings no gold and is not a sale.
* leaving the dungeon from level 1: "Beware, there will be no return!  Still climb? [yn] (n)".
* the Oracle greets a visitor of her centre room: "Hello, Agent, welcome to Delphi!".

The environment may pass every message seen during a step as ``info["messages"]`` (a list of
str; messages dismissed with --More-- inside one step are otherwise lost); without it
``info["message"]`` is used.

One module on purpose: one home for reading NetHack's messages for all nine
tasks; the per-task trackers share the message parsers.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from common.nethack.prices import (
    BOOTS_APPEARANCES,
    CLOAK_APPEARANCES,
    HELMET_APPEARANCES,
    PRICE_TABLES,
    price_identifies,
)
from common.vocabulary import EVAL_TASKS, TASK_MEASURE
from rl_baseline.envs.overview import (
    DUNGEONS_OF_DOOM,
    GNOMISH_MINES,
    Overview,
    overview_mentions,
    parse_overview,
)

log = logging.getLogger(__name__)

__all__ = [
    "GNOMISH_MINES_DNUM",
    "HUNGRY",
    "TaskTracker",
    "SaleOffer",
    "make_task_tracker",
    "has_detector",
    "is_sale_message",
    "sale_offer",
    "parse_sale_offer",
    "item_class_of",
    "item_type_known",
    "buc_from_altar_message",
    "is_leave_dungeon_prompt",
    "is_delphi_greeting",
    "is_minetown_message",
    "overview_mentions",
    "price_identifies",
    "identified_appearance",
    "step_messages",
    "ending_of",
]

GNOMISH_MINES_DNUM = 2  # NetHack dnum of the Gnomish Mines
DUNGEONS_OF_DOOM_DNUM = 0
HUNGRY = 2  # NetHack hunger states: 0 satiated, 1 not hungry, 2 hungry, 3 weak, 4 fainting

# ----------------------------------------------------------------- message parsing

_SOLD = re.compile(
    r"(?:\byou sold .+? for|\byou sold (?:it|them) for|"
    r"\byou relinquish .+? and receive) (?P<gold>\d+) gold pieces?",
    re.IGNORECASE,
)
_OFFER = re.compile(
    r"(?P<shk>[A-Z][\w' -]*?) offers(?P<only> only)? (?P<price>\d+) gold pieces? for"
    r"(?P<contents> the contents of| your items in)? (?:your|the) (?P<item>.+?)\.\s+Sell (?P<pron>it|them)\?"
)
_ALTAR_FLASH = re.compile(
    r"There is an? (?P<colour>[\w -]+?) flash as (?P<item>.+?) hits? the altar\."
)
_ALTAR_LAND = re.compile(r"(?:^|\s)(?P<item>[A-Z0-9][^.!?]*?) lands? on the altar\.")
_KNOWN_BUC = re.compile(r"\b(?:blessed|uncursed|cursed|holy water|unholy water)\b", re.IGNORECASE)
_LEAVE_PROMPT = re.compile(r"Beware, there will be no return!|Still climb\?")
_DELPHI = re.compile(r"welcome to Delphi!")
# Shop greetings ("Hello, Agent!  Welcome to Asidonhopo's general store!") and temple
# entry ("Pilgrim, you enter a sacred place!", "You have a forbidding feeling...",
# "You experience a strange sense of peace."): inside the Mines only Minetown has them.
_TOWN_MESSAGE = re.compile(
    r"Welcome to \w[\w' -]*'s? |Welcome(?: again)? to (?:our|my) |you enter a sacred place|"
    r"You have a (?:strange )?forbidding feeling|strange sense of peace",
)


def step_messages(info: dict) -> list[str]:
    """All messages of a step: ``info["messages"]`` if given, else ``[info["message"]]``."""
    msgs = info.get("messages")
    if msgs:
        return [m for m in msgs if m]
    msg = info.get("message")
    return [msg] if msg else []


def is_sale_message(msg: str) -> int:
    """Gold received for a completed sale in ``msg``, or 0 (no sale, or sold for credit)."""
    m = _SOLD.search(msg or "")
    return int(m.group("gold")) if m else 0


@dataclass(frozen=True)
class SaleOffer:
    shopkeeper: str
    price: int
    item: str  # as named in the offer, without "your"/"the"
    plural: bool  # "Sell them?": several items, their number is not in the text
    short_funds: bool  # "offers only": the shopkeeper cannot pay the full price
    contents: bool  # the offer is for the contents of a container


def parse_sale_offer(msg: str) -> SaleOffer | None:
    """The shopkeeper's sell offer in ``msg``, with all details, or None."""
    m = _OFFER.search(msg or "")
    if not m:
        return None
    return SaleOffer(
        shopkeeper=m.group("shk").strip(),
        price=int(m.group("price")),
        item=m.group("item").strip(),
        plural=m.group("pron") == "them",
        short_funds=m.group("only") is not None,
        contents=m.group("contents") is not None,
    )


def sale_offer(msg: str) -> tuple[int, str] | None:
    """(price, item text) of a shopkeeper's sell offer in ``msg``, or None."""
    offer = parse_sale_offer(msg)
    return None if offer is None else (offer.price, offer.item)


_POTION = re.compile(r"\bpotions?\b")
_SCROLL = re.compile(r"\bscrolls? labeled\b")
_RING = re.compile(r"\brings?\b")
_WAND = re.compile(r"\bwands?\b")
_ARTICLE = re.compile(r"^(?:an?|the|your|\d+)\s+")


def _strip_article(text: str) -> str:
    text = text.strip()
    while True:
        new = _ARTICLE.sub("", text)
        if new == text:
            return text
        text = new


def _singular_appearance(text: str) -> str:
    t = _strip_article(text.lower())
    for prefix in ("pair of ", "pairs of "):
        if t.startswith(prefix):
            t = t[len(prefix):]
    for buc in ("uncursed ", "blessed ", "cursed "):
        if t.startswith(buc):
            t = t[len(buc):]
    t = re.sub(r"^[+-]\d+\s+", "", t)
    t = t.split(" named ")[0].split(" called ")[0]
    t = re.sub(r"\s*\(.*\)$", "", t)
    if t.endswith("capes"):
        t = t[:-1]
    elif t.endswith("cloaks") or t.endswith("copes") or t.endswith("helmets"):
        t = t[:-1]
    elif t.endswith("pieces of cloth"):
        t = "piece of cloth"
    return t


def item_class_of(item_text: str) -> str | None:
    """Price-table class ("potion", "scroll", "ring", "wand", "cloak", "boots", "helmet") of
    an item named in a message, or None when it is none of those."""
    t = item_text.lower()
    app = _singular_appearance(item_text)
    if app in CLOAK_APPEARANCES or app.startswith("cloak of "):
        return "cloak"
    if app in BOOTS_APPEARANCES or app.endswith(" boots"):
        return "boots"
    if app in HELMET_APPEARANCES or app.startswith("helm of ") or app == "helmet":
        return "helmet"
    if _SCROLL.search(t) or t.startswith("scroll") or " scroll" in t:
        return "scroll"
    if _POTION.search(t):
        return "potion"
    if _WAND.search(t):
        return "wand"
    if _RING.search(t) and "ring mail" not in t:
        return "ring"
    return None


def item_type_known(item_text: str) -> bool:
    """Whether the item's name shows that its type is already known (or named by the
    player), so a price offer cannot identify it."""
    t = item_text.lower()
    if " called " in t:
        return True
    cls = item_class_of(item_text)
    if cls in ("potion", "scroll", "ring", "wand"):
        # unidentified: "bubbly potion", "scroll labeled FOO", "jade ring", "oak wand"
        return bool(re.search(r"\b(?:potions?|scrolls?|rings?|wands?) of\b", t)) or "unlabeled" in t
    app = _singular_appearance(item_text)
    if cls == "cloak":
        return app not in CLOAK_APPEARANCES
    if cls == "boots":
        return app not in BOOTS_APPEARANCES
    if cls == "helmet":
        return app not in HELMET_APPEARANCES
    return True


def identified_appearance(offer: SaleOffer, dunce: bool | None = False) -> str | None:
    """The item appearance a sell offer identifies (its type follows from the price), or None.

    An offer identifies when the item's type is not yet known, its class has a price table,
    the offer is for one item at full funds, and the price fits exactly one type of the class
    (see :mod:`common.nethack.prices`)."""
    if offer.short_funds or offer.plural or offer.contents:
        return None
    cls = item_class_of(offer.item)
    if cls is None or cls not in PRICE_TABLES or item_type_known(offer.item):
        return None
    return _singular_appearance(offer.item) if price_identifies(offer.price, cls, 1, dunce) else None


def buc_from_altar_message(msg: str, require_unknown: bool = True) -> str | None:
    """"blessed", "cursed" or "uncursed" when ``msg`` shows an item dropped on an altar
    revealing its status, else None.

    With ``require_unknown`` (default) an item whose status was already known (its name in
    the message says blessed/uncursed/cursed, or holy/unholy water) gives None, as do gold
    and the other colours a hallucinating hero sees (she learns nothing then).
    """
    msg = msg or ""
    m = _ALTAR_FLASH.search(msg)
    if m:
        colour = m.group("colour").strip().lower()
        status = {"amber": "blessed", "black": "cursed"}.get(colour)
        item = m.group("item")
    else:
        m = _ALTAR_LAND.search(msg)
        if not m:
            return None
        status, item = "uncursed", m.group("item")
    if status is None or re.search(r"\bgold pieces?\b", item):
        return None
    if require_unknown and _KNOWN_BUC.search(item):
        return None
    return status


def is_leave_dungeon_prompt(msg: str) -> bool:
    """NetHack's question on the up stairs of level 1 (an attempt to leave the dungeon)."""
    return bool(_LEAVE_PROMPT.search(msg or ""))


def is_delphi_greeting(msg: str) -> bool:
    """The Oracle's greeting when the hero enters her centre room."""
    return bool(_DELPHI.search(msg or ""))


def is_minetown_message(msg: str) -> bool:
    """A shop greeting or temple-entry message; inside the Gnomish Mines only Minetown
    produces one (combine with ``info["dungeon_number"] == GNOMISH_MINES_DNUM``)."""
    return bool(_TOWN_MESSAGE.search(msg or ""))


def is_hungry(hunger: int | None) -> bool:
    """NLE/NetHack hunger state at or past "Hungry"."""
    return hunger is not None and int(hunger) >= HUNGRY


# ----------------------------------------------------------------- trackers


class _OverviewCache:
    """Parses ``info["overview"]`` only when the text changes."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._parsed = Overview()

    def get(self, info: dict) -> Overview:
        text = info.get("overview") or ""
        if text != self._text:
            self._text = text
            self._parsed = parse_overview(text) if text else Overview()
        return self._parsed


class TaskTracker:
    """Base tracker. ``value`` is what evaluation averages over episodes."""

    task: str = ""

    def __init__(self) -> None:
        self.measure = TASK_MEASURE[self.task]
        self.success = False
        self.count = 0
        self.failed = False  # composite tasks: a prerequisite can no longer be met
        self.steps = 0
        self._overview = _OverviewCache()

    @property
    def value(self) -> float:
        return float(self.count) if self.measure == "count" else float(self.success)

    @property
    def done(self) -> bool:
        """The episode can stop: success reached (or, for composite tasks, out of reach)."""
        return self.success or self.failed

    def reset(self, info: dict | None = None) -> None:
        self.success = False
        self.count = 0
        self.failed = False
        self.steps = 0
        self._overview = _OverviewCache()
        self._on_reset()
        if info:
            self._observe(info, None)

    def update(self, info: dict, action_name: str | None = None) -> None:
        self.steps += 1
        self._observe(info, action_name)

    # subclasses
    def _on_reset(self) -> None:
        pass

    def _observe(self, info: dict, action_name: str | None) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(value={self.value}, done={self.done})"


def _in_mines(info: dict, ov: Overview) -> bool:
    if info.get("dungeon_number") is not None:
        return int(info["dungeon_number"]) == GNOMISH_MINES_DNUM
    return ov.current_dungeon == GNOMISH_MINES


def _at_oracle(info: dict, ov: Overview) -> bool:
    if any(is_delphi_greeting(m) for m in step_messages(info)):
        return True
    if ov.current_dungeon == DUNGEONS_OF_DOOM and ov.current_depth is not None:
        for lv in ov.levels:
            if lv.current and (lv.tag == "oracle" or any("Oracle of Delphi" in n for n in lv.notes)):
                return True
    return False


class GnomishTracker(TaskTracker):
    """Reach the Gnomish Mines."""

    task = "gnomish"

    def _observe(self, info: dict, action_name: str | None) -> None:
        ov = self._overview.get(info)
        if _in_mines(info, ov) or ov.mines_visited:
            self.success = True


class DelphiTracker(TaskTracker):
    """Reach the Oracle: the overview's "Oracle of Delphi" or the Oracle's greeting."""

    task = "delphi"

    def _observe(self, info: dict, action_name: str | None) -> None:
        ov = self._overview.get(info)
        if ov.oracle_seen or any(is_delphi_greeting(m) for m in step_messages(info)):
            self.success = True


class MinetownTracker(TaskTracker):
    """Reach Minetown: a town feature in the Mines' overview, or a shop/temple message
    while in the Mines."""

    task = "minetown"

    def _observe(self, info: dict, action_name: str | None) -> None:
        ov = self._overview.get(info)
        if ov.minetown_seen:
            self.success = True
        elif _in_mines(info, ov) and any(is_minetown_message(m) for m in step_messages(info)):
            self.success = True


class TransactionsTracker(TaskTracker):
    """Count completed sales (gold received from a shopkeeper)."""

    task = "transactions"

    def _on_reset(self) -> None:
        self.gold_received = 0

    def _observe(self, info: dict, action_name: str | None) -> None:
        for msg in step_messages(info):
            gold = is_sale_message(msg)
            if gold > 0:
                self.count += 1
                self.gold_received += gold


class PriceTracker(TaskTracker):
    """Count items identified by a shopkeeper's sell offer.

    An offer counts when the item's type is not yet known, its class has a price table, the
    offer is for one item at full funds, and the offered price fits exactly one type of the
    class (see :mod:`common.nethack.prices`). Each appearance counts once per episode.
    """

    task = "price"

    def __init__(self, dunce: bool | None = False) -> None:
        self.dunce = dunce
        super().__init__()

    def _on_reset(self) -> None:
        self.identified: dict[str, str] = {}  # appearance -> class

    def _observe(self, info: dict, action_name: str | None) -> None:
        for msg in step_messages(info):
            offer = parse_sale_offer(msg)
            key = identified_appearance(offer, self.dunce) if offer is not None else None
            if key is not None and key not in self.identified:
                self.identified[key] = item_class_of(offer.item) or ""
                self.count += 1


class BucTracker(TaskTracker):
    """Count items whose blessed/uncursed/cursed status an altar revealed."""

    task = "buc"

    def _on_reset(self) -> None:
        self.statuses: list[str] = []

    def _observe(self, info: dict, action_name: str | None) -> None:
        for msg in step_messages(info):
            status = buc_from_altar_message(msg)
            if status is not None:
                self.statuses.append(status)
                self.count += 1


class GoldenExitTracker(TaskTracker):
    """Visit levels 1-3, hold >= 20 gold, kill 25 monsters, then try to leave the dungeon
    by the up stairs of level 1 (NetHack's "Still climb?" question, or escaping)."""

    task = "goldenexit"
    LEVELS = (1, 2, 3)
    GOLD = 20
    KILLS = 25

    def _on_reset(self) -> None:
        self.visited: set[int] = set()
        self.max_gold = 0
        self.kills = 0

    @property
    def prerequisites_met(self) -> bool:
        return (
            set(self.LEVELS) <= self.visited and self.max_gold >= self.GOLD and self.kills >= self.KILLS
        )

    def _observe(self, info: dict, action_name: str | None) -> None:
        depth = info.get("depth")
        if depth is not None:
            self.visited.add(int(depth))
        self.max_gold = max(self.max_gold, int(info.get("gold") or 0))
        if info.get("kills") is not None:
            self.kills = max(self.kills, int(info["kills"]))
        else:
            self.kills += int(info.get("kill") or 0)
        if self.success or not self.prerequisites_met:
            return
        attempt = any(is_leave_dungeon_prompt(m) for m in step_messages(info))
        escaped = str(info.get("end_status", "")).upper().endswith("ESCAPED")
        if attempt or escaped:
            self.success = True


class LevelUpSellTracker(TaskTracker):
    """Reach experience level 4 without leaving dungeon level 1, then sell an item, then
    stay alive for 300 more steps."""

    task = "levelupsell"
    XP_LEVEL = 4
    SURVIVE_STEPS = 300

    def _on_reset(self) -> None:
        self.levelled = False
        self.sold = False
        self.steps_since_sale = 0

    def _observe(self, info: dict, action_name: str | None) -> None:
        if self.success or self.failed:
            return
        if not self.levelled:
            if int(info.get("xp_level") or 0) >= self.XP_LEVEL and int(info.get("depth") or 1) == 1:
                self.levelled = True
            elif info.get("depth") is not None and int(info["depth"]) != 1:
                self.failed = True  # left level 1 before reaching the experience level
                return
            if not self.levelled:
                return
        dead = is_death(info)
        if not self.sold:
            if any(is_sale_message(m) > 0 for m in step_messages(info)):
                self.sold = True
            return
        if dead:
            self.failed = True
            return
        self.steps_since_sale += 1
        if self.steps_since_sale >= self.SURVIVE_STEPS:
            self.success = True


class DiscoveryHungerTracker(TaskTracker):
    """Get hungry, eat inside the Gnomish Mines, then reach the Oracle."""

    task = "discoveryhunger"

    def _on_reset(self) -> None:
        self.was_hungry = False
        self.ate_in_mines = False

    def _observe(self, info: dict, action_name: str | None) -> None:
        if self.success:
            return
        ov = self._overview.get(info)
        if not self.ate_in_mines:
            ate = bool(info.get("just_eaten"))
            if ate and self.was_hungry and _in_mines(info, ov):
                self.ate_in_mines = True
            # hungry-state of this step counts for later meals
            if is_hungry(info.get("hunger")):
                self.was_hungry = True
            return
        if _at_oracle(info, ov):
            self.success = True


def is_death(info: dict) -> bool:
    """The game ended by the hero's death on this step (NLE's DEATH end status)."""
    status = info.get("end_status")
    if status is None:
        return False
    name = getattr(status, "name", str(status)).upper()
    return "DEATH" in name or (isinstance(status, int) and int(status) == 1)


#: how a game ended, read from its last messages (first match wins); a coarse summary for the evaluations
_ENDINGS = (
    ("angered its god (prayer)", re.compile(r"Thou hast angered me|Thou durst|bolt of lightning|"
                                            r"wide-angle disintegration|elemental of ")),
    ("starved", re.compile(r"starvation|faint from lack of food")),
    ("killed by a monster", re.compile(r"You die|You fry|You are killed")),
)


def ending_of(messages: Sequence[str], ended_by: str) -> str:
    """How an episode ended in a few words: ``ended_by`` when the game did not end (the step limit, a task's
    rule), else a death's cause read from the episode's last messages (``other`` when none matches)."""
    if ended_by != "game":
        return ended_by.replace("_", " ")
    text = "  ".join(messages)
    for name, pattern in _ENDINGS:
        if pattern.search(text):
            return name
    return "other"


_TRACKERS: dict[str, Callable[[], TaskTracker]] = {
    "gnomish": GnomishTracker,
    "delphi": DelphiTracker,
    "minetown": MinetownTracker,
    "transactions": TransactionsTracker,
    "price": PriceTracker,
    "buc": BucTracker,
    "goldenexit": GoldenExitTracker,
    "levelupsell": LevelUpSellTracker,
    "discoveryhunger": DiscoveryHungerTracker,
}
assert set(_TRACKERS) == set(EVAL_TASKS), "every eval target needs a tracker"


def has_detector(task: str) -> bool:
    """Whether ``task`` has a success detector here (the nine evaluation tasks; not the training task)."""
    return task in _TRACKERS


def make_task_tracker(task: str, **kwargs: Any) -> TaskTracker:
    """A fresh tracker for eval target ``task`` (call ``reset(info)`` at episode start)."""
    if task not in _TRACKERS:
        raise ValueError(f"unknown eval task {task!r}; valid tasks: {', '.join(EVAL_TASKS)}")
    return _TRACKERS[task](**kwargs)
