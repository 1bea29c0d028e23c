"""NetHack 3.6 base prices and shopkeeper sell offers, for price identification.

Only object types whose appearance is shuffled at the start of a game can be identified by
price: a shopkeeper's offer tells which price group the unidentified item belongs to. The
tables list, per class, every shuffled type with its base price (``oc_cost`` in
``objects.c``; the test suite checks them against NLE's own object table). Types with a fixed
appearance (potion of water = "clear", blank paper = "unlabeled", the plain boots, ...) are
left out: their appearance already names them.

Sell offers (``set_cost`` in NetHack 3.6 ``shk.c``), for an object of base price ``p`` and
quantity ``q`` whose type the hero has not identified:

* normally the shopkeeper offers ``p*q / 2``;
* ``p*q / 3`` instead if the hero wears a dunce cap, or is a Tourist below experience
  level 15, or shows a shirt (no body armour and no cloak over it);
* for items whose type is not known, a shopkeeper with ``m_id % 4 == 0`` (one shopkeeper in
  four, fixed per shopkeeper, not per object) pays only 3/4 of that: ``3/8`` or ``1/4``.

Rounding: ``((p*q*mult*10) // div + 5) // 10`` with a minimum of 1 gold. Charisma changes
only what the hero *pays* when buying (``get_cost``), not sell offers, so it plays no part
here.

Defaults follow the agent of this project: a Monk, never a Tourist, who starts in a robe (a
cloak) without a shirt and whose action set has no wear/take-off command, so it can neither
put on a dunce cap nor bare a shirt: ``dunce=False``. Whether the shopkeeper is one of the
stingy ones is not visible in the offer, so both the 1/2 and the 3/8 ratio are always
considered; an offer identifies an item only if it does so under every ratio that could
apply. Pass ``dunce=None`` to consider the dunce ratios as well (any character).
"""
from __future__ import annotations

from typing import Iterable

# class name -> {type name: base price}; shuffled-appearance types only.
POTION_PRICES: dict[str, int] = {
    "gain ability": 300, "restore ability": 100, "confusion": 100, "blindness": 150,
    "paralysis": 300, "speed": 200, "levitation": 200, "hallucination": 100,
    "invisibility": 150, "see invisible": 50, "healing": 100, "extra healing": 100,
    "gain level": 300, "enlightenment": 200, "monster detection": 150,
    "object detection": 150, "gain energy": 150, "sleeping": 100, "full healing": 200,
    "polymorph": 200, "booze": 50, "sickness": 50, "fruit juice": 50, "acid": 250,
    "oil": 250,
}
SCROLL_PRICES: dict[str, int] = {
    "enchant armor": 80, "destroy armor": 100, "confuse monster": 100, "scare monster": 100,
    "remove curse": 80, "enchant weapon": 60, "create monster": 200, "taming": 200,
    "genocide": 300, "light": 50, "teleportation": 100, "gold detection": 100,
    "food detection": 100, "identify": 20, "magic mapping": 100, "amnesia": 200, "fire": 100,
    "earth": 200, "punishment": 300, "charging": 300, "stinking cloud": 300,
}
RING_PRICES: dict[str, int] = {
    "adornment": 100, "gain strength": 150, "gain constitution": 150,
    "increase accuracy": 150, "increase damage": 150, "protection": 100,
    "regeneration": 200, "searching": 200, "stealth": 100, "sustain ability": 100,
    "levitation": 200, "hunger": 100, "aggravate monster": 150, "conflict": 300,
    "warning": 100, "poison resistance": 150, "fire resistance": 200,
    "cold resistance": 150, "shock resistance": 150, "free action": 200,
    "slow digestion": 200, "teleportation": 200, "teleport control": 300, "polymorph": 300,
    "polymorph control": 300, "invisibility": 150, "see invisible": 150,
    "protection from shape changers": 100,
}
WAND_PRICES: dict[str, int] = {
    "light": 100, "secret door detection": 150, "enlightenment": 150, "create monster": 200,
    "wishing": 500, "nothing": 100, "striking": 150, "make invisible": 150,
    "slow monster": 150, "speed monster": 150, "undead turning": 150, "polymorph": 200,
    "cancellation": 200, "teleportation": 200, "opening": 150, "locking": 150,
    "probing": 150, "digging": 150, "magic missile": 150, "fire": 175, "cold": 175,
    "sleep": 175, "death": 500, "lightning": 175,
}
CLOAK_PRICES: dict[str, int] = {
    "cloak of protection": 50, "cloak of invisibility": 60,
    "cloak of magic resistance": 60, "cloak of displacement": 50,
}
BOOTS_PRICES: dict[str, int] = {
    "speed boots": 50, "water walking boots": 50, "jumping boots": 50, "elven boots": 8,
    "kicking boots": 8, "fumble boots": 30, "levitation boots": 30,
}
HELMET_PRICES: dict[str, int] = {
    "helmet": 10, "helm of brilliance": 50, "helm of opposite alignment": 50,
    "helm of telepathy": 50,
}

PRICE_TABLES: dict[str, dict[str, int]] = {
    "potion": POTION_PRICES,
    "scroll": SCROLL_PRICES,
    "ring": RING_PRICES,
    "wand": WAND_PRICES,
    "cloak": CLOAK_PRICES,
    "boots": BOOTS_PRICES,
    "helmet": HELMET_PRICES,
}

# The shuffled appearances of the armour groups (which appearance goes with which type
# changes every game; the set does not).
CLOAK_APPEARANCES = frozenset({"tattered cape", "opera cloak", "ornamental cope", "piece of cloth"})
BOOTS_APPEARANCES = frozenset(
    {"combat boots", "jungle boots", "hiking boots", "mud boots", "buckled boots",
     "riding boots", "snow boots"}
)
HELMET_APPEARANCES = frozenset({"plumed helmet", "etched helmet", "crested helmet", "visored helmet"})

# (multiplier, divisor) applied on top of base price * quantity; see the module docstring.
NORMAL_RATIOS: tuple[tuple[int, int], ...] = ((1, 2), (3, 8))
DUNCE_RATIOS: tuple[tuple[int, int], ...] = ((1, 3), (1, 4))


def sell_offer(base_price: int, quantity: int = 1, dunce: bool = False, stingy: bool = False) -> int:
    """The gold a shopkeeper offers for ``quantity`` unidentified items of ``base_price``.

    ``dunce``: dunce cap / low-level Tourist / visible shirt; ``stingy``: the shopkeeper is
    one of those (``m_id % 4 == 0``) who pay 3/4 for unidentified items. Returns 0 for
    worthless items (the shopkeeper then makes no offer).
    """
    tmp = base_price * quantity
    mult, div = 1, (3 if dunce else 2)
    if stingy and tmp > 1:
        mult, div = 3, div * 4
    if tmp < 1:
        return 0
    tmp = ((tmp * mult * 10) // div + 5) // 10
    return max(tmp, 1)


def _ratio_flags(dunce: bool | None) -> Iterable[tuple[bool, bool]]:
    dunces = (False, True) if dunce is None else (dunce,)
    for d in dunces:
        for stingy in (False, True):
            yield d, stingy


def possible_offers(base_price: int, quantity: int = 1, dunce: bool | None = False) -> set[int]:
    """Every offer a shopkeeper could make for this base price (over the possible ratios)."""
    return {sell_offer(base_price, quantity, d, s) for d, s in _ratio_flags(dunce)}


def price_candidates(
    offer_price: int, item_class: str, quantity: int = 1, dunce: bool | None = False
) -> list[str]:
    """Types of ``item_class`` whose sell offer can be ``offer_price``.

    ``dunce``: whether the seller gets the dunce/tourist/shirt ratios (see the module
    docstring); None allows both.
    """
    table = PRICE_TABLES.get(item_class)
    if table is None:
        raise ValueError(f"no price table for class {item_class!r}; known: {', '.join(PRICE_TABLES)}")
    return sorted(
        name for name, base in table.items() if offer_price in possible_offers(base, quantity, dunce)
    )


def price_identifies(
    offer_price: int, item_class: str, quantity: int = 1, dunce: bool | None = False
) -> bool:
    """True when exactly one shuffled type of ``item_class`` could get this offer.

    A price shared by several types of the class (most potion, ring and wand prices) narrows
    the item down but does not identify it, and returns False.
    """
    return len(price_candidates(offer_price, item_class, quantity, dunce)) == 1
