"""Shipped reference meta-policies, their unit tests, and the run-time loader."""
from __future__ import annotations

import importlib
import logging
from pathlib import Path

import numpy as np
import pytest

from code_generation.prompts import PROMPT_DIR, harness_text
from code_generation.sandbox import FULL_METHODS, SandboxLimits, check_source, run_in_sandbox
from common.vocabulary import ALL_TASKS, SKILLS
from rl_baseline.skills import meta_policy

REPO = Path(__file__).resolve().parents[1]
HARNESS = harness_text()  # unit_test_harness.py rendered for the skill files
LIMITS = SandboxLimits(wall_seconds=20.0, cpu_seconds=20)


def _source(task: str) -> str:
    return (REPO / "rl_baseline" / "meta_policies" / task / "seed42" / "execution.py").read_text()


@pytest.mark.parametrize("task", ALL_TASKS)
def test_reference_module_passes_validation_and_its_unit_test(task):
    source = _source(task)
    assert check_source(source, FULL_METHODS) == []
    assert "hand-written reference" in source.lower() and "scripts.generate_code" in source
    test = (PROMPT_DIR / task / "reference_check.py").read_text()
    result = run_in_sandbox(source, LIMITS, required_methods=FULL_METHODS, prelude=[HARNESS], extra_sources=[test])
    assert result.ok, result.feedback()[-2000:]
    assert "UNIT TEST PASSED" in result.output and "skill functions: OK" in result.output


def test_unit_test_fails_for_a_policy_that_ignores_the_task():
    lazy = '''
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        return "discoverer"
'''
    for task in ("gnomish", "transactions", "goldenexit"):
        test = (PROMPT_DIR / task / "reference_check.py").read_text()
        result = run_in_sandbox(lazy, LIMITS, prelude=[HARNESS], extra_sources=[test])
        assert not result.ok and "AssertionError" in result.output, task


@pytest.mark.parametrize("task", ALL_TASKS)
def test_reference_module_imports_as_package_and_loads(task):
    module = importlib.import_module(f"rl_baseline.meta_policies.{task}.seed42.execution")
    assert hasattr(module, "NetHackPlayer")
    policy = meta_policy.load(task, 42)
    assert policy.initial_skill in SKILLS
    # the run-time's 7x7 window: the hero at [4][3] with colour 0
    white, gray, green = (meta_policy.COLOR_MAP[c] for c in ("white", "gray", "green"))
    chars = np.full((7, 7), ord("."), dtype=np.uint8)
    colors = np.full((7, 7), gray, dtype=np.uint8)
    chars[4, 3] = ord("@")
    colors[4, 3] = 0
    assert policy.preconditions(chars, colors, 3) == (False, False)
    chars[0, 6], colors[0, 6] = ord("@"), green  # a watchman three cells away
    assert policy.preconditions(chars, colors, 3) == (False, False)
    colors[0, 6] = white  # a shopkeeper three cells away
    assert policy.preconditions(chars, colors, 3) == (False, True)
    assert policy.preconditions(chars, colors, 0) == (False, False)
    chars[0, 6] = ord("_")
    colors[0, 6] = meta_policy.COLOR_MAP["cyan"]  # an iron chain
    assert policy.preconditions(chars, colors, 1) == (False, False)
    colors[0, 6] = gray  # an altar
    assert policy.preconditions(chars, colors, 1) == (True, False)
    assert policy.should_terminate("descender", 3, 2, 1, [False, False]) is True
    assert policy.should_terminate("descender", 3, 1, 1, [False, False]) is False
    policy.update_state({"gold": 5, "kills": 2, "xp_level": 2, "just_eaten": False, "hunger": 1,
                         "depth": 1, "dungeon_number": 0, "branch_depth": 3})
    assert policy.player.branch_depth == 3
    assert policy.next_skill("discoverer", 1, 0, False, False) in SKILLS
    assert policy.num_errors == 0


def test_update_state_maps_info_to_the_hooks():
    golden = meta_policy.load("goldenexit", 42)
    for kills in (0, 3, 3, 7):
        golden.update_state({"gold": 12, "kills": kills})
    assert golden.player.monsters_defeated == 7 and golden.player.gold_pieces == 12
    golden.reset()
    assert golden.player.monsters_defeated == 0
    hunger = meta_policy.load("discoveryhunger", 42)
    hunger.update_state({"just_eaten": True, "dungeon_number": 0})
    assert hunger.player.eaten_food is False
    hunger.update_state({"just_eaten": True, "dungeon_number": 2})
    assert hunger.player.eaten_food is True
    gnomish = meta_policy.load("gnomish", 42)
    for depth, dungeon in ((1, 0), (2, 0), (3, 0), (4, 2)):
        gnomish.update_state({"depth": depth, "dungeon_number": dungeon, "branch_depth": -2})
    assert gnomish.player.branch_depth == -2  # entering the Mines by itself tells nothing (as in the release)
    gnomish.skill_ended("discoverer", 3, 2)
    assert gnomish.player.branch_depth == -2  # only the descender's end tells
    gnomish.skill_ended("descender", 3, 2)
    assert gnomish.player.branch_depth == 3  # a descender that ended in the Mines started on the entrance level
    gnomish.update_state({"depth": 5, "dungeon_number": 2, "branch_depth": 4})
    assert gnomish.player.branch_depth == 3  # once known it stays
    gnomish.reset()
    assert gnomish.player.branch_depth == -2
    gnomish.skill_ended("descender", 2, 0)
    assert gnomish.player.branch_depth == -2  # a descent within the Dungeons of Doom tells nothing
    gnomish.update_state({"depth": 2, "dungeon_number": 0, "branch_depth": 2})
    assert gnomish.player.branch_depth == 2  # the env saw two down staircases on level 2
    level = meta_policy.load("levelupsell", 42)
    level.update_state({"xp_level": 4})
    assert level.player.xp_level == 4


def _write_module(root: Path, task: str, seed: int, text: str) -> None:
    folder = root / task / f"seed{seed}"
    folder.mkdir(parents=True)
    (folder / "execution.py").write_text(text)


BROKEN = '''
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth

    def set_initial_values(self):
        self.skill = "descender"

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        raise RuntimeError("broken precondition")

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        return 1 / 0

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if dungeon_depth == 1:
            return "fly"
        if dungeon_depth == 2:
            while True:
                try:
                    pass
                except Exception:
                    pass
        raise KeyError("no skill")
'''


def test_loader_falls_back_when_generated_code_raises(tmp_path, caplog):
    _write_module(tmp_path, "gnomish", 7, BROKEN)
    policy = meta_policy.load("gnomish", 7, root=tmp_path, config=meta_policy.MetaPolicyConfig(call_timeout_s=0.5))
    assert policy.initial_skill == "descender"
    with caplog.at_level(logging.WARNING, logger="rl_baseline.skills.meta_policy"):
        assert policy.preconditions(np.zeros((3, 3), np.uint8), np.zeros((3, 3), np.uint8), 1) == (False, False)
        assert policy.should_terminate("discoverer", 1, 1, 1, [False, False]) is True
        assert policy.next_skill("discoverer", 1, 0, False, False) == "discoverer"  # "fly" is no skill
        assert policy.next_skill("discoverer", 2, 0, False, False) == "discoverer"  # endless loop, timed out
        assert policy.next_skill("discoverer", 3, 0, False, False) == "discoverer"  # KeyError
    assert policy.num_errors == 5
    assert "gnomish seed 7" in caplog.text and "timed out" in caplog.text


@pytest.mark.slow
def test_watchdog_bounds_every_call_and_never_fires_outside_one(tmp_path):
    """In-process (--trust_generated_code): each call into the module has its own budget: a hanging call is stopped near its deadline, the
    next hanging call too, time spent between calls raises nothing, and no interval timer is used."""
    import signal
    import threading
    import time

    _write_module(tmp_path, "gnomish", 8, BROKEN)
    policy = meta_policy.load("gnomish", 8, root=tmp_path,
                              config=meta_policy.MetaPolicyConfig(call_timeout_s=0.2, trust_generated_code=True))
    assert any(t.name == "generated-code-watchdog" for t in threading.enumerate())
    for _ in range(2):
        start = time.thread_time()  # the budget is CPU time: a loaded machine stretches the wall clock only
        assert policy.next_skill("discoverer", 2, 0, False, False) == "discoverer"  # endless loop: timed out
        assert 0.2 <= time.thread_time() - start < 0.5
    time.sleep(0.4)  # outside any call: nothing goes off
    assert policy.initial_skill == "descender"
    assert policy.should_terminate("discoverer", 1, 1, 1, [False, False]) is True  # ZeroDivisionError
    assert policy.num_errors == 3
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    time.sleep(0.3)


def test_the_budget_is_cpu_time_so_a_call_waiting_for_a_core_is_not_stopped():
    """On a loaded machine a call can wait for a core longer than its budget; with a wall-clock budget the
    generated code's decision was then replaced by the fallback (a few calls per million under a niced
    evaluation beside a training run). A wait (here a sleep, which uses no CPU) runs to its end; a loop is
    stopped."""
    import time

    from code_generation.time_bound import CallTimeout, call_bounded

    def spin():
        while True:
            pass

    start = time.monotonic()
    assert call_bounded(lambda: time.sleep(0.3) or "done", budget_s=0.1) == "done"
    assert time.monotonic() - start >= 0.3
    start = time.thread_time()
    with pytest.raises(CallTimeout):
        call_bounded(spin, budget_s=0.1)
    assert 0.1 <= time.thread_time() - start < 0.4


def test_without_a_per_thread_cpu_clock_both_ends_read_the_wall_clock(monkeypatch):
    """The deadline's writer and the watchdog read one clock: a deadline in CPU seconds compared with the wall
    clock would stop every call at once."""
    import time

    from code_generation import time_bound

    writer, reader = time_bound._clocks()
    assert writer is time.thread_time and abs(reader() - writer()) < 0.05  # the main thread's CPU time, twice

    def unavailable(_ident):
        raise OSError("no per-thread CPU clock")

    monkeypatch.setattr(time, "pthread_getcpuclockid", unavailable)
    assert time_bound._clocks() == (time.monotonic, time.monotonic)


def test_loader_refuses_unsafe_module_and_reports_missing_ones(tmp_path):
    _write_module(tmp_path, "delphi", 1, "import os\n" + BROKEN)
    with pytest.raises(meta_policy.MetaPolicyError, match="import of 'os'"):
        meta_policy.load("delphi", 1, root=tmp_path)
    with pytest.raises(meta_policy.MetaPolicyError, match=r"delphi \(seeds 1\)"):
        meta_policy.load("minetown", 3, root=tmp_path)
    assert meta_policy.available(tmp_path) == {"delphi": [1]}


AUTHORS_STYLE = '''
import random

class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.gold_pieces = 0
        self.monsters_defeated = 0

    def update_gold(self, gold):
        self.gold_pieces = gold

    def defeat_monster(self):
        self.monsters_defeated += 1

    def select_skill(self, current_skill, dungeon_depth, merchant_precondition, worshipper_precondition):
        if merchant_precondition:
            return 'merchant'
        if worshipper_precondition:
            return 'worshipper'
        if self.gold_pieces < 20 or self.monsters_defeated < 25:
            return 'discoverer'
        return 'ascender'

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition, worshipper_precondition):
        return self.select_skill(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        if any(preconditions):
            return True
        if skill == "discoverer":
            if skill_time >= self.discoverer_skill_steps:
                return True
        elif skill == "descender":
            if current_depth > previous_depth:
                return True
        elif skill == "ascender":
            if current_depth < previous_depth:
                return True
        elif skill == "merchant":
            if skill_time >= self.merchant_skill_steps:
                return True
        elif skill == "worshipper":
            if skill_time >= self.worshipper_skill_steps:
                return True
        return False

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        shopkeeper_color = color_map.get("@", None)
        altar_color = color_map.get("_", None)
        worshipper_precondition = False
        merchant_precondition = False
        if shopkeeper_color is not None and num_items > 0:
            shopkeeper_mask = (char_ascii_encodings == 64) & (char_ascii_colors == shopkeeper_color)
            merchant_precondition = shopkeeper_mask.any()
        if altar_color is not None and num_items > 0:
            altar_mask = (char_ascii_encodings == 95) & (char_ascii_colors == altar_color)
            worshipper_precondition = altar_mask.any()
        return worshipper_precondition, merchant_precondition

    def set_initial_values(self,):
        self.skill = 'discoverer'
        self.max_depth = 3
        self.discoverer_skill_steps = 500
        self.merchant_skill_steps = self.discoverer_skill_steps * 20
        self.worshipper_skill_steps = self.discoverer_skill_steps * 20
'''


def test_module_in_the_authors_style_loads_and_runs(tmp_path):
    _write_module(tmp_path, "goldenexit", 123, AUTHORS_STYLE)
    policy = meta_policy.load("goldenexit", 123, root=tmp_path)
    chars = np.full((7, 7), ord("."), dtype=np.uint8)
    colors = np.full((7, 7), 7, dtype=np.uint8)
    chars[4, 3] = chars[6, 0] = ord("@")
    colors[4, 3], colors[6, 0] = 0, meta_policy.COLOR_MAP["white"]
    assert policy.preconditions(chars, colors, 2) == (False, True)
    assert policy.should_terminate("discoverer", 10, 1, 1, [False, True]) is True
    assert policy.next_skill("discoverer", 1, 0, False, False) == "discoverer"
    policy.update_state({"gold": 25, "kills": 30})
    assert policy.next_skill("discoverer", 1, 0, False, False) == "ascender"
    assert policy.num_errors == 0


def test_harness_constants_match_the_run_time():
    namespace: dict = {}
    exec(compile(HARNESS, "unit_test_harness.py", "exec"), namespace)
    assert tuple(namespace["SIM_SKILLS"]) == SKILLS
    assert namespace["SIM_COLOR_MAP"] == meta_policy.COLOR_MAP
