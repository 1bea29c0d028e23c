"""The nine shipped policies over skills decide as the authors' released ones do, in every state of a grid.

The release's rules are written down below as facts (read from its
``rl_baseline/meta_policies/{task}/seed42/execution.py``), independently of the shipped modules, and each
shipped module is driven through the run-time's guarded wrapper (:mod:`rl_baseline.skills.meta_policy`) on
a grid of states: the Mines entrance unknown or on level 2, 3 or 4; depths 1-12 of the Dungeons of Doom
and the Mines levels below a known entrance; each current skill; skill times around every budget; a depth
change of -1, 0 or +1 since the skill started; a shopkeeper and/or an altar in view; both directions of
the explore/descend loop; and each task's own state (gold and kills, experience level and the sale,
eating and the Mines visit). A state's decision is: does the running skill end, which skill comes next,
and what the policy remembers afterwards (its direction and its task flags).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import pytest

from common.vocabulary import EVAL_TASKS, SKILLS
from rl_baseline.skills import meta_policy

#: the release's settings per task: (max_depth, the discoverer's budget in turns)
RELEASE_SETTINGS = {
    "gnomish": (5, 50), "delphi": (10, 50), "minetown": (5, 50),
    "transactions": (5, 500), "price": (5, 500), "buc": (5, 500),
    "goldenexit": (3, 500), "levelupsell": (5, 500), "discoveryhunger": (10, 500),
}
SKILL_TIMES = (0, 49, 50, 499, 500, 999, 1000, 9999, 10000)


@dataclass(frozen=True)
class State:
    skill: str
    skill_time: int
    depth: int
    branch: int  # NetHack's dungeon number: 0 Dungeons of Doom, 2 Gnomish Mines
    branch_depth: int  # -2 while the Mines entrance is unknown
    change: int  # depth now minus depth when the skill started
    worshipper: bool  # an altar in view (with new items held)
    merchant: bool  # a shopkeeper in view (with new items held)
    direction: str
    # the tasks' own state
    gold: int = 0
    kills: int = 0
    xp_level: int = 1
    sold: bool = False
    eaten: bool = False
    explored_mines: bool = False


@dataclass
class Memory:
    """What a policy remembers between calls."""

    direction: str
    sold: bool = False
    explored_mines: bool = False


# --------------------------------------------------------------------------- the release, as facts


def release_ends(task: str, s: State) -> bool:
    """Every task ends skills alike: any shopkeeper or altar in view ends whatever runs (the merchant and the
    worshipper too); the discoverer ends on its budget, the merchant and worshipper on 20 times it; the
    descender only once deeper than where it started, the ascender only once shallower."""
    budget = RELEASE_SETTINGS[task][1]
    if s.worshipper or s.merchant:
        return True
    return {
        "discoverer": s.skill_time >= budget,
        "descender": s.change > 0,
        "ascender": s.change < 0,
        "merchant": s.skill_time >= 20 * budget,
        "worshipper": s.skill_time >= 20 * budget,
    }[s.skill]


def _loop(task: str, s: State, m: Memory) -> str:
    """The release's select_skill: shopkeeper, then altar; after any other skill explore; after exploring go
    on down to max_depth, then up to level 1 (discoveryhunger: once it ate, down or up straight away)."""
    if s.merchant:
        return "merchant"
    if s.worshipper:
        return "worshipper"
    if task == "discoveryhunger" and s.eaten:
        return "descender" if m.direction == "down" else "ascender"
    if s.skill != "discoverer":
        return "discoverer"
    max_depth = RELEASE_SETTINGS[task][0]
    if m.direction == "down":
        if s.depth < max_depth:
            return "descender"
        m.direction = "up"
        return "ascender"
    if s.depth > 1:
        return "ascender"
    m.direction = "down"
    return "descender"


def _to_mines(task: str, s: State, m: Memory) -> str:
    """The release's reach_gnomish_mines: down on the entrance level, up from the main level below it."""
    if s.branch == 0 and s.depth == s.branch_depth:
        return "descender"
    if s.branch == 0 and s.depth == s.branch_depth + 1:
        return "ascender"
    return _loop(task, s, m)


def _to_dungeons(task: str, s: State, m: Memory) -> str:
    """The release's reach_dungeons_of_doom: out of the first Mines level; down on the entrance level."""
    if s.depth == s.branch_depth:
        return "ascender" if s.branch == 2 else "descender"
    if s.branch == 2 and s.depth == s.branch_depth + 1:
        return "ascender"
    return _loop(task, s, m)


def release_next(task: str, s: State, m: Memory) -> str:
    """The release's perform_task of each task."""
    if task == "gnomish":
        return _to_mines(task, s, m)
    if task == "delphi":
        if s.branch != 0:
            return _to_dungeons(task, s, m)
        return "descender" if s.depth < 9 else _loop(task, s, m)
    if task == "minetown":
        if s.branch == 2:
            return "descender" if s.depth < 8 else "discoverer"
        return _to_mines(task, s, m)
    if task in ("transactions", "price"):
        return "merchant" if s.merchant else _to_dungeons(task, s, m)
    if task == "buc":
        return "worshipper" if s.worshipper else _loop(task, s, m)
    if task == "goldenexit":
        if s.gold >= 20 and s.kills >= 25:
            return "ascender"  # whatever the depth
        return _to_dungeons(task, s, m) if s.branch == 2 else _loop(task, s, m)
    if task == "levelupsell":
        if s.xp_level < 4:
            return "discoverer"  # at any depth
        if m.sold:
            return _loop(task, s, m)
        if s.merchant:
            m.sold = True
            return "merchant"
        return _to_dungeons(task, s, m)
    if task == "discoveryhunger":
        if not m.explored_mines:
            if s.branch == 2:
                m.explored_mines = True
                return "discoverer"
            return _to_mines(task, s, m)
        if not s.eaten:
            return "discoverer"
        if s.branch != 0:
            return _to_dungeons(task, s, m)
        return "descender" if s.depth < 9 else "discoverer"
    raise AssertionError(task)


# --------------------------------------------------------------------------- the grid


def _places():
    """(branch_depth, branch, depth): the main dungeon 1-12, the Mines below a known entrance."""
    for branch_depth in (-2, 2, 3, 4):
        for depth in range(1, 13):
            yield branch_depth, 0, depth
        if branch_depth > 0:
            for depth in range(branch_depth + 1, 14):
                yield branch_depth, 2, depth


def _task_states(task: str):
    if task == "goldenexit":
        return [dict(gold=g, kills=k) for g, k in itertools.product((19, 20), (24, 25))]
    if task == "levelupsell":
        return [dict(xp_level=x, sold=s) for x, s in itertools.product((3, 4), (False, True))]
    if task == "discoveryhunger":
        return [dict(eaten=e, explored_mines=x) for e, x in itertools.product((False, True), (False, True))]
    return [{}]


def grid(task: str):
    for (branch_depth, branch, depth), skill, skill_time, change, worshipper, merchant, direction, own in (
            itertools.product(_places(), SKILLS, SKILL_TIMES, (-1, 0, 1), (False, True), (False, True),
                              ("down", "up"), _task_states(task))):
        yield State(skill, skill_time, depth, branch, branch_depth, change, worshipper, merchant, direction, **own)


def _set_up(policy: meta_policy.MetaPolicy, task: str, s: State) -> None:
    """The shipped module in state ``s``: a fresh episode, then the state handed over as the run-time does."""
    policy.reset()
    player = policy.player
    player.direction = s.direction
    info = {"branch_depth": s.branch_depth, "depth": s.depth, "dungeon_number": s.branch}
    if task == "goldenexit":
        info.update(gold=s.gold, kills=s.kills)
    if task == "levelupsell":
        info.update(xp_level=s.xp_level)
        player.items_sold = s.sold
    if task == "discoveryhunger":
        info.update(just_eaten=s.eaten, dungeon_number=2 if s.eaten else s.branch)
        player.explored_gnomish_mines = s.explored_mines
    policy.update_state(info)


def _remembered(task: str, direction: str, sold: bool, explored_mines: bool) -> tuple:
    """What a policy remembers that its decisions change: the direction, and the task's flags."""
    return (direction,) + ((sold,) if task == "levelupsell" else ()) + (
        (explored_mines,) if task == "discoveryhunger" else ())


@pytest.mark.parametrize("task", EVAL_TASKS)
def test_shipped_policy_decides_as_the_release_in_every_state_of_the_grid(task):
    """E.g. gnomish takes the merchant whenever a shopkeeper is in view and undoes a descent that took the main
    staircase on the entrance level; delphi goes straight down to level 9; minetown goes down in the Mines to
    depth 8; goldenexit heads up at 20 gold and 25 kills whatever the depth; levelupsell explores at any depth
    until experience level 4; every task ends every skill when a shopkeeper or an altar is in view."""
    # through the isolated child, as training calls it; no time bound per call: the grid makes about a million calls
    policy = meta_policy.load(task, 42, config=meta_policy.MetaPolicyConfig(call_timeout_s=0))
    assert policy.host.isolated
    max_depth, budget = RELEASE_SETTINGS[task]
    assert (policy.player.max_depth, policy.player.discoverer_skill_steps) == (max_depth, budget)
    assert policy.player.merchant_skill_steps == policy.player.worshipper_skill_steps == 20 * budget
    differ, checked = [], 0
    for s in grid(task):
        _set_up(policy, task, s)
        previous_depth = s.depth - s.change
        ends = policy.should_terminate(s.skill, s.skill_time, s.depth, previous_depth, [s.worshipper, s.merchant])
        memory = Memory(s.direction, s.sold, s.explored_mines)
        expected = (release_ends(task, s), release_next(task, s, memory),
                    _remembered(task, memory.direction, memory.sold, memory.explored_mines))
        got_next = policy.next_skill(s.skill, s.depth, s.branch, s.merchant, s.worshipper)
        player = policy.player
        got = (ends, got_next, _remembered(task, player.direction, getattr(player, "items_sold", False),
                                           getattr(player, "explored_gnomish_mines", False)))
        checked += 1
        if got != expected:
            differ.append((s, got, expected))
    assert policy.num_errors == 0
    assert checked == 84_240 * len(_task_states(task))
    assert not differ, f"{len(differ)} of {checked} states differ, e.g. {differ[:3]}"


def test_the_facts_tell_the_tasks_apart():
    """The grid can fail: the facts give different decisions for tasks the shipped modules must tell apart."""
    s = State("descender", 0, 4, 0, 3, 1, False, False, "down")
    assert release_next("gnomish", s, Memory("down")) == "ascender"  # took the main staircase: back up
    assert release_next("delphi", s, Memory("down")) == "descender"
    assert release_next("transactions", replace(s, depth=3, change=0), Memory("down")) == "descender"
    assert release_next("levelupsell", s, Memory("down")) == "discoverer"
    assert release_next("goldenexit", replace(s, gold=20, kills=25, depth=1), Memory("down")) == "ascender"
    shop = replace(s, merchant=True, skill="merchant", skill_time=1)
    assert release_ends("buc", shop) and release_next("buc", shop, Memory("down")) == "merchant"
