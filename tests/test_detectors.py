"""Task success detectors: messages recorded from a live wizard-mode game, price tables
checked against NLE's object data, and the per-task trackers on info sequences."""
from __future__ import annotations

import pytest
from nle import nethack  # noqa: E402

from common.nethack.prices import (
    BOOTS_APPEARANCES,
    CLOAK_APPEARANCES,
    HELMET_APPEARANCES,
    PRICE_TABLES,
    possible_offers,
    price_candidates,
    price_identifies,
    sell_offer,
)
from common.vocabulary import EVAL_TASKS, TASK_MEASURE
from rl_baseline.tasks.detectors import (
    buc_from_altar_message,
    is_delphi_greeting,
    is_leave_dungeon_prompt,
    is_minetown_message,
    is_sale_message,
    item_class_of,
    item_type_known,
    make_task_tracker,
    parse_sale_offer,
    sale_offer,
)
from tests.test_overview import (  # noqa: E402
    CTRL_F,
    CTRL_W,
    dismiss_more,
    find_chars,
    keys,
    level_teleport,
    make_wizard_env,
    message,
    teleport_to,
)

# ---------------------------------------------------------------- live recording


def _act(nh, seq) -> list[str]:
    keys(nh, seq)
    return [message(nh)] + dismiss_more(nh)


def _wish(nh, text: str) -> str:
    keys(nh, [CTRL_W])
    out = _act(nh, text + "\r")
    letter_line = next(m for m in out if len(m) > 3 and m[1:4] == " - ")
    return letter_line[0]


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[str]]:
    """Play one short wizard-mode game in Minetown and record the messages of interest."""
    env = make_wizard_env(seed=1)
    nh = env.nethack
    rec: dict[str, list[str]] = {}
    try:
        rec["climb"] = _act(nh, "<")  # hero starts on level 1's up stairs
        keys(nh, "n")
        detect = _wish(nh, "uncursed potion of monster detection")
        light = _wish(nh, "uncursed scroll of light")
        adorn = _wish(nh, "uncursed ring of adornment")
        cursed = _wish(nh, "cursed scroll of teleportation")
        blessed = _wish(nh, "blessed potion of see invisible")
        plain = _wish(nh, "uncursed ring of hunger")
        level_teleport(nh, ">w")
        keys(nh, [CTRL_F])
        dismiss_more(nh)
        altars = find_chars(nh, "_")
        keys(nh, "q" + detect)  # shows every monster; shopkeepers stand in their doorways
        glyphs = nh._obs_buffers["glyphs"].copy()
        keys(nh, [27])
        dismiss_more(nh)
        shk = next(i for i in range(nethack.NUMMONS) if nethack.permonst(i).mname == "shopkeeper")
        ys, xs = (glyphs == nethack.GLYPH_MON_OFF + shk).nonzero()
        chars = nh._obs_buffers["chars"]
        store = False
        for sx, sy in zip(xs.tolist(), ys.tolist()):
            for dx in (-1, 0, 1):
                for dy in (-1, 0, 1):
                    if store or (dx == dy == 0) or chr(chars[sy + dy, sx + dx]) != ".":
                        continue
                    teleport_to(nh, sx + dx, sy + dy)
                    greet = [message(nh)] + dismiss_more(nh)
                    store = any("general store" in m for m in greet)
        if not store:
            pytest.fail("test setup: no general store found in this Minetown (seed changed?)")
        rec["offer_light"] = _act(nh, "d" + light)
        gold_before = int(nh._obs_buffers["blstats"][nethack.NLE_BL_GOLD])
        rec["decline"] = _act(nh, "n")
        rec["offer_ring"] = _act(nh, "d" + adorn)
        rec["accept"] = _act(nh, "y")
        rec["gold_gain"] = [str(int(nh._obs_buffers["blstats"][nethack.NLE_BL_GOLD]) - gold_before)]
        if not altars:
            pytest.fail("test setup: no altar in this Minetown (seed changed?)")
        teleport_to(nh, *altars[0])
        dismiss_more(nh)
        rec["altar_cursed"] = _act(nh, "d" + cursed)
        rec["altar_blessed"] = _act(nh, "d" + blessed)
        rec["altar_plain"] = _act(nh, "d" + plain)
        rec["altar_known"] = _act(nh, "dd")  # the starting scroll: its status is known
    finally:
        env.close()
    return rec


def _first(msgs: list[str], pred) -> str:
    return next(m for m in msgs if pred(m))


def test_recorded_altar_messages(recorded):
    assert buc_from_altar_message(_first(recorded["altar_cursed"], lambda m: "altar" in m)) == "cursed"
    assert buc_from_altar_message(_first(recorded["altar_blessed"], lambda m: "altar" in m)) == "blessed"
    assert buc_from_altar_message(_first(recorded["altar_plain"], lambda m: "altar" in m)) == "uncursed"
    known = _first(recorded["altar_known"], lambda m: "altar" in m)
    assert "uncursed" in known  # the status shows in the item's name ...
    assert buc_from_altar_message(known) is None  # ... so nothing new was learned
    assert buc_from_altar_message(known, require_unknown=False) == "uncursed"


def test_recorded_sales(recorded):
    light = parse_sale_offer(_first(recorded["offer_light"], lambda m: "offers" in m))
    assert light is not None and not light.plural and not light.short_funds
    assert item_class_of(light.item) == "scroll" and not item_type_known(light.item)
    assert light.price == 25  # scroll of light, base 50, a fair shopkeeper
    assert price_identifies(light.price, "scroll")
    ring = sale_offer(_first(recorded["offer_ring"], lambda m: "offers" in m))
    assert ring is not None and item_class_of(ring[1]) == "ring"
    assert not price_identifies(ring[0], "ring")  # 100 zm is shared by seven ring types
    # declining leaves no sale; accepting brings the offered gold
    assert all(is_sale_message(m) == 0 for m in recorded["offer_light"] + recorded["decline"])
    sold = [is_sale_message(m) for m in recorded["accept"]]
    assert max(sold) == ring[0] == int(recorded["gold_gain"][0])
    # the offer question itself is not a sale
    assert all(is_sale_message(m) == 0 for m in recorded["offer_ring"])


def test_recorded_trackers(recorded):
    buc = make_task_tracker("buc")
    sales = make_task_tracker("transactions")
    price = make_task_tracker("price")
    for t in (buc, sales, price):
        t.reset({"message": ""})
    for key in ("offer_light", "decline", "offer_ring", "accept", "altar_cursed",
                "altar_blessed", "altar_plain", "altar_known"):
        for msg in recorded[key]:
            for t in (buc, sales, price):
                t.update({"message": msg})
    assert buc.count == 3 and buc.value == 3.0 and not buc.done
    assert sorted(buc.statuses) == ["blessed", "cursed", "uncursed"]
    assert sales.count == 1
    assert price.count == 1 and list(price.identified.values()) == ["scroll"]


def test_recorded_leave_prompt(recorded):
    assert any(is_leave_dungeon_prompt(m) for m in recorded["climb"])


# ---------------------------------------------------------------- look-alikes


def test_message_look_alikes():
    # mentions an altar without a drop
    assert buc_from_altar_message("There is an altar to Huan Ti (neutral) here.") is None
    assert buc_from_altar_message("You kneel at the altar.") is None
    assert buc_from_altar_message("5 gold pieces land on the altar.") is None
    # hallucination: other colours teach nothing
    assert buc_from_altar_message("There is a puce flash as a jade ring hits the altar.") is None
    assert buc_from_altar_message("There is an amber flash as 2 fizzy potions hit the altar.") == "blessed"
    assert buc_from_altar_message("There is a black flash as a potion of holy water hits the altar.") is None
    # refused / not a sale
    assert is_sale_message("Asidonhopo seems uninterested.") == 0
    assert is_sale_message("You relinquish a sack and acquire 40 zorkmids in credit.") == 0
    assert is_sale_message("Asidonhopo offers 5 gold pieces for your dagger.  Sell it? [ynaq] (y)") == 0
    assert is_sale_message("Scroll labeled FOO; you sold it for 10 gold pieces.") == 10
    assert is_sale_message("You relinquish a boulder and receive 2 gold pieces in compensation.") == 2
    short = parse_sale_offer("Asidonhopo offers only 3 gold pieces for your bubbly potion.  Sell it? [ynaq] (y)")
    assert short is not None and short.short_funds and short.price == 3
    many = parse_sale_offer("Izchak offers 20 gold pieces for your jade rings.  Sell them? [ynaq] (y)")
    assert many is not None and many.plural
    assert parse_sale_offer("You see here 3 gold pieces.") is None
    assert not is_leave_dungeon_prompt("You climb up the stairs.")
    assert is_delphi_greeting("Hello, Agent, welcome to Delphi!")
    assert is_minetown_message('"Hello, Agent!  Welcome to Asidonhopo\'s general store!"')
    assert is_minetown_message('"Pilgrim, you enter a sacred place!"  You have a forbidding feeling...')
    assert not is_minetown_message("You enter an opulent throne room!")


def test_item_classes():
    assert item_class_of("scroll labeled KIRJE") == "scroll"
    assert item_class_of("tattered capes") == "cloak"
    assert item_class_of("pair of combat boots") == "boots"
    assert item_class_of("visored helmet") == "helmet"
    assert item_class_of("crude ring mail") is None
    assert item_class_of("oak wand") == "wand"
    assert item_type_known("potion of healing") and not item_type_known("bubbly potion")
    assert item_type_known("scroll called fire?") and item_type_known("unlabeled scroll")
    assert item_type_known("pair of speed boots") and not item_type_known("pair of mud boots")


# ---------------------------------------------------------------- prices


def _nle_objects():
    for i in range(nethack.NUM_OBJECTS):
        o = nethack.objclass(i)
        yield ord(o.oc_class), nethack.OBJ_NAME(o), nethack.OBJ_DESCR(o), o.oc_cost


def test_price_tables_match_nle_objects():
    classes = {8: "potion", 9: "scroll", 4: "ring", 11: "wand"}
    shuffled: dict[str, dict[str, int]] = {k: {} for k in PRICE_TABLES}
    armor_groups = {"cloak": CLOAK_APPEARANCES, "boots": BOOTS_APPEARANCES, "helmet": HELMET_APPEARANCES}
    for oclass, name, descr, cost in _nle_objects():
        if oclass in classes and name and descr not in ("clear", "unlabeled"):
            shuffled[classes[oclass]][name] = cost
        if oclass == 3:
            for group, apps in armor_groups.items():
                if descr in apps:
                    shuffled[group][name] = cost
    assert shuffled == PRICE_TABLES


def test_sell_offers_and_identification():
    assert [sell_offer(50), sell_offer(50, stingy=True), sell_offer(50, dunce=True),
            sell_offer(50, dunce=True, stingy=True)] == [25, 19, 17, 13]
    assert sell_offer(1) == 1 and sell_offer(0) == 0
    assert sell_offer(20, quantity=2) == 20
    assert possible_offers(20) == {10, 8}
    assert possible_offers(20, dunce=None) == {10, 8, 7, 5}
    assert price_identifies(10, "scroll") and price_candidates(10, "scroll") == ["identify"]
    # with the dunce ratios 25 also fits a 100 zm scroll at 1/4
    assert price_identifies(25, "scroll") and not price_identifies(25, "scroll", dunce=None)
    assert price_identifies(5, "helmet")  # plain helmet (base 10)
    # 30 fits enchant weapon (60/2) and enchant armor / remove curse (80 * 3/8)
    assert sell_offer(80, stingy=True) == 30
    assert len(price_candidates(30, "scroll")) == 3 and not price_identifies(30, "scroll")
    assert not price_identifies(25, "potion")  # four potions cost 50
    assert not price_identifies(4, "boots")  # elven and kicking boots share 8
    assert price_candidates(999, "wand") == []
    with pytest.raises(ValueError, match="potion"):
        price_candidates(10, "amulet")


# ---------------------------------------------------------------- trackers on info sequences


def _info(**kw) -> dict:
    base = {"depth": 1, "dungeon_number": 0, "dungeon_level": 1, "gold": 0, "xp_level": 1,
            "time": 1, "hp": 14, "hpmax": 14, "hunger": 1, "kill": 0, "kills": 0,
            "just_eaten": False, "message": "", "branch_depth": -2, "overview": "",
            "end_status": 0}
    base.update(kw)
    return base


def test_make_task_tracker_api():
    for task in EVAL_TASKS:
        t = make_task_tracker(task)
        t.reset(_info())
        t.update(_info(), "north")
        assert t.value == 0.0 and not t.done and t.measure == TASK_MEASURE[task]
    with pytest.raises(ValueError, match="gnomish.*discoveryhunger"):
        make_task_tracker("oracle")


MINES_OVERVIEW = "The Dungeons of Doom: levels 1 to 3\n   Level 3:\n      Stairs down to The Gnomish Mines.\nThe Gnomish Mines:\n   Level 4: <- You are here."


def test_navigation_trackers():
    g = make_task_tracker("gnomish")
    g.reset(_info())
    g.update(_info(depth=3, dungeon_level=3, overview="The Dungeons of Doom: levels 1 to 3\n   Level 3:\n      Stairs down to The Gnomish Mines."))
    assert not g.success  # seeing the branch is not entering it
    g.update(_info(depth=4, dungeon_number=2, dungeon_level=1))
    assert g.success and g.done and g.value == 1.0

    d = make_task_tracker("delphi")
    d.reset(_info())
    d.update(_info(depth=7, message="You descend the stairs."))
    assert not d.success
    d.update(_info(depth=7, message="Hello, Agent, welcome to Delphi!"))
    assert d.success

    m = make_task_tracker("minetown")
    m.reset(_info())
    # a temple in the main dungeon is not Minetown
    m.update(_info(depth=3, message='"Pilgrim, you enter a sacred place!"'))
    assert not m.success
    m.update(_info(depth=5, dungeon_number=2, overview=MINES_OVERVIEW))
    assert not m.success
    m.update(_info(depth=5, dungeon_number=2, overview=MINES_OVERVIEW + "\n      Some fountains, a temple."))
    assert m.success and m.done


def test_goldenexit_tracker():
    t = make_task_tracker("goldenexit")
    t.reset(_info())
    prompt = "Beware, there will be no return!  Still climb? [yn] (n)"
    t.update(_info(message=prompt))
    assert not t.success  # prerequisites not met yet
    for depth in (2, 3, 2, 1):
        t.update(_info(depth=depth, gold=25, kills=25))
    assert t.prerequisites_met and not t.success
    t.update(_info(depth=1, gold=25, kills=25, message="You climb up the stairs."))
    assert not t.success
    t.update(_info(depth=1, gold=25, kills=25, messages=["You see here a dagger.", prompt]))
    assert t.success and t.done and t.value == 1.0


def test_levelupsell_tracker():
    sale = "You sold a jade ring for 50 gold pieces."
    early = make_task_tracker("levelupsell")
    early.reset(_info())
    early.update(_info(depth=2, xp_level=2))
    assert early.failed and early.done and early.value == 0.0

    t = make_task_tracker("levelupsell")
    t.reset(_info())
    t.update(_info(message=sale))  # a sale before XP level 4 does not count
    t.update(_info(xp_level=4))
    assert t.levelled and not t.sold
    t.update(_info(xp_level=4, depth=2))  # leaving level 1 afterwards is allowed
    t.update(_info(xp_level=4, depth=2, message=sale))
    assert t.sold
    for _ in range(299):
        t.update(_info(xp_level=4, depth=2))
    assert not t.success
    t.update(_info(xp_level=4, depth=2))
    assert t.success and t.done


def test_discoveryhunger_tracker():
    t = make_task_tracker("discoveryhunger")
    t.reset(_info())
    t.update(_info(depth=4, dungeon_number=2, just_eaten=True))  # not hungry yet
    assert not t.ate_in_mines
    t.update(_info(depth=3, hunger=2))  # hungry in the main dungeon
    t.update(_info(depth=3, just_eaten=True))  # eating outside the Mines does not count
    assert not t.ate_in_mines
    t.update(_info(depth=4, dungeon_number=2, hunger=2, just_eaten=True))
    assert t.ate_in_mines and not t.success
    t.update(_info(depth=7, message="Hello, Agent, welcome to Delphi!"))
    assert t.success and t.done
