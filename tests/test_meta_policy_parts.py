"""The shipped meta-policies are exactly what ``scripts.combine --reference`` builds from their parts.

Parts: ``code_generation/{task}/reference_policy.py`` (the hand-written policy), the skill
functions (one shared copy in ``code_generation/parts/skill_functions.py``), the navigation
methods (one shared copy in ``code_generation/parts/navigation.py``) and
``code_generation/{task}/initial_values.txt``. Editing a shipped module by hand, or a part
without rebuilding the modules, fails here; rebuild with
``python -m scripts.combine --task TASK --seed 42 --reference --force``.
"""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from code_generation import loader
from code_generation.combine import (
    JOINED_METHODS,
    NAVIGATION_METHODS,
    REFERENCE_PART,
    CombineError,
    build_module,
    combine,
)
from code_generation.prompts import PROMPT_DIR
from common.vocabulary import ALL_TASKS, TRAINING_TASK
from rl_baseline.skills import meta_policy
from scripts import combine as combine_cli

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "rl_baseline" / "meta_policies"


def _shipped(task: str) -> str:
    return (SHIPPED / task / "seed42" / "execution.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("task", ALL_TASKS)
def test_shipped_module_is_combine_of_its_parts(task):
    assert _shipped(task) == build_module(task, 42, reference=True), (
        f"rl_baseline/meta_policies/{task}/seed42/execution.py differs from its parts; edit the parts and run "
        f"`python -m scripts.combine --task {task} --seed 42 --reference --force`")


def test_shipped_modules_say_they_are_hand_written():
    for task in ALL_TASKS:
        head = _shipped(task).split("class NetHackPlayer")[0]
        assert "HAND-WRITTEN REFERENCE, not written by a language model" in head, task
        assert f"code_generation/{task}/{REFERENCE_PART}" in head and "Written by a language model" not in head
        assert f"--task {task} --seed 42 --reference --force" in head


def _definitions(text: str) -> list[str]:
    return re.findall(r"^[ \t]*def (\w+)\(", text, flags=re.M)


def test_skill_functions_live_once_in_the_parts():
    where: dict[str, list[str]] = {name: [] for name in JOINED_METHODS + NAVIGATION_METHODS}
    for path in sorted(PROMPT_DIR.rglob("*")):
        rel = path.relative_to(PROMPT_DIR)
        if path.suffix not in (".py", ".txt") or any(p.startswith("_seed") or p == "__pycache__" for p in rel.parts):
            continue
        for name in _definitions(path.read_text(encoding="utf-8")):
            if name in where:
                where[name].append(rel.as_posix())
    assert where["skill_precondition"] == ["parts/skill_functions.py"]
    # every task, the training policy included, ends skills as the release's modules do
    assert where["skill_termination"] == ["parts/skill_functions.py"]
    assert sorted(where["set_initial_values"]) == sorted(f"{t}/initial_values.txt" for t in ALL_TASKS)
    # the release's ways through the dungeon live once; discoveryhunger's select_skill differs on purpose
    for name in NAVIGATION_METHODS:
        expected = ["parts/navigation.py"] + (["discoveryhunger/reference_policy.py"] if name == "select_skill" else [])
        assert sorted(where[name]) == sorted(expected), name
    for task in ALL_TASKS:
        part = ast.parse((PROMPT_DIR / task / REFERENCE_PART).read_text(encoding="utf-8"))
        defined = {n.name for n in ast.walk(part) if isinstance(n, ast.FunctionDef)}
        assert not defined & set(JOINED_METHODS), task
        shipped = _definitions(_shipped(task))
        assert all(shipped.count(name) == 1 for name in JOINED_METHODS + NAVIGATION_METHODS), task


def test_every_shipped_module_names_its_parts_and_ends_skills_as_the_release():
    for task in ALL_TASKS:
        text = _shipped(task)
        assert "#   skill functions     code_generation/parts/skill_functions.py" in text, task
        assert "if any(preconditions):" in text, task
        navigation = ("#   navigation          code_generation/parts/navigation.py" if task != "discoveryhunger" else
                      "#   explore_then_move, reach_gnomish_mines, reach_dungeons_of_doom  code_generation/parts/"
                      "navigation.py")
        assert navigation in text, task


@pytest.fixture
def parts(tmp_path) -> Path:
    """A copy of the prompt folder (the parts) to edit."""
    folder = tmp_path / "parts"
    shutil.copytree(PROMPT_DIR, folder, ignore=shutil.ignore_patterns("_seed*", "__pycache__"))
    return folder


def test_an_edited_part_no_longer_matches_the_shipped_module(parts):
    assert build_module("gnomish", 42, reference=True, prompt_dir=parts) == _shipped("gnomish")
    shared = parts / "parts" / "skill_functions.py"
    shared.write_text(shared.read_text().replace("if num_items <= 0:", "if num_items < 0:"))
    assert build_module("gnomish", 42, reference=True, prompt_dir=parts) != _shipped("gnomish")
    values = parts / "delphi" / "initial_values.txt"
    values.write_text(values.read_text().replace("self.max_depth = 10", "self.max_depth = 9"))
    assert build_module("delphi", 42, reference=True, prompt_dir=parts) != _shipped("delphi")


def test_reference_part_may_not_carry_its_own_skill_functions(parts):
    policy = parts / "gnomish" / REFERENCE_PART
    policy.write_text(policy.read_text() + "\n    def skill_termination(self, *args):\n        return True\n")
    with pytest.raises(CombineError, match="skill_termination, which the parts provide"):
        build_module("gnomish", 42, reference=True, prompt_dir=parts)
    with pytest.raises(CombineError, match="no hand-written reference policy"):
        build_module("gnomish", 42, reference=True, prompt_dir=parts / "nowhere")


def test_cli_reference_writes_the_shipped_module(tmp_path, capsys):
    root = tmp_path / "meta"
    assert combine_cli.main(["--task", "discoveryhunger", "--seed", "42", "--reference", "--out_root", str(root)]) == 0
    assert (root / "discoveryhunger" / "seed42" / "execution.py").read_text() == _shipped("discoveryhunger")
    policy = meta_policy.load("discoveryhunger", 42, root=root)
    assert policy.next_skill("discoverer", 1, 0, False, False) == "descender" and policy.num_errors == 0
    # the same parts under another seed: the header names that seed
    result = combine("minetown", 7, out_root=root, reference=True, run_test=False)
    assert "--task minetown --seed 7 --reference" in result.path.read_text()


def test_generated_policy_gets_the_shared_skill_functions(tmp_path):
    # a generated policy (without skill functions of its own) ends skills as the references do
    run = tmp_path / "gen" / TRAINING_TASK / "_seed3"
    run.mkdir(parents=True)
    (run / "execution.py").write_text(_shipped(TRAINING_TASK) + "\n# === UNIT TEST ===\nprint('hi')\n")
    text = build_module(TRAINING_TASK, 3, gen_dir=tmp_path / "gen")
    assert text.startswith("# Policy over skills for the \"exploration\" task, seed 3.\n# Written by a language model")
    assert "reference skill functions of code_generation/parts/skill_functions.py" in text
    namespace: dict = {}
    exec(compile(text, "combined", "exec"), namespace)
    player = namespace["NetHackPlayer"](-1, -2)
    assert player.skill_termination("merchant", 1, 1, 1, [True, False]) is True
    assert player.skill_termination("descender", 1, 1, 2, [False, False]) is False


# A module laid out as the authors' released ones are (written for this test): methods in any order,
# docstrings inside methods, helper methods with no arguments besides self, set_initial_values(self,),
# numpy masks in skill_precondition, no state hooks, no header, the skill set only by set_initial_values.
RELEASE_LAYOUT = '''import random

class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.visited = set()
        self.heading = 'down'

    def merchant_precondition(self):
        # a stub the release's modules carry
        return False

    def choose(self, current_skill, dungeon_depth, merchant_precondition, worshipper_precondition):
        if merchant_precondition:
            return 'merchant'
        if worshipper_precondition:
            return 'worshipper'
        if current_skill != 'discoverer':
            self.visited.add(dungeon_depth)
            return 'discoverer'
        if dungeon_depth < self.max_depth:
            return 'descender'
        return 'ascender'

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition, worshipper_precondition):
        if branch_number == 2 and dungeon_depth == self.branch_depth + 1:
            return 'ascender'
        return self.choose(current_skill, dungeon_depth, merchant_precondition, worshipper_precondition)


    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        """
        Whether the running skill ends now.

        Args:
        - skill (str): the running skill.
        - preconditions (list): [worshipper, merchant].
        """
        if any(preconditions):
            return True
        if skill == "descender":
            return current_depth > previous_depth
        if skill == "ascender":
            return current_depth < previous_depth
        limit = {"discoverer": self.discoverer_skill_steps, "merchant": self.merchant_skill_steps,
                 "worshipper": self.worshipper_skill_steps}.get(skill, 0)
        return skill_time >= limit

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        """
        (worshipper_ok, merchant_ok) from the window around the hero.
        """
        keeper = (char_ascii_encodings == ord('@')) & (char_ascii_colors == color_map.get('@'))
        altar = (char_ascii_encodings == ord('_')) & (char_ascii_colors == color_map.get('_'))
        return num_items > 0 and altar.any(), num_items > 0 and keeper.any()

    def set_initial_values(self,):
        # values of the release's modules
        self.skill = 'discoverer'
        self.max_depth = random.choice([4, 5])
        self.discoverer_skill_steps = 50
        self.merchant_skill_steps = self.discoverer_skill_steps * 20
        self.worshipper_skill_steps = self.discoverer_skill_steps * 20
'''


def test_module_in_the_release_layout_loads_through_the_same_loader(tmp_path):
    folder = tmp_path / "gnomish" / "seed42"
    folder.mkdir(parents=True)
    (folder / "execution.py").write_text(RELEASE_LAYOUT)
    assert isinstance(loader.load_class("gnomish", 42, root=tmp_path), type)
    policy = meta_policy.load("gnomish", 42, root=tmp_path)
    assert policy.initial_skill == "discoverer" and policy.player.max_depth in (4, 5)
    chars = np.full((7, 7), ord("."), dtype=np.uint8)
    colors = np.full((7, 7), meta_policy.COLOR_MAP["gray"], dtype=np.uint8)
    chars[4, 3], colors[4, 3] = ord("@"), 0
    chars[1, 1], colors[1, 1] = ord("_"), meta_policy.COLOR_MAP["_"]
    assert policy.preconditions(chars, colors, 1) == (True, False)
    assert policy.preconditions(chars, colors, 0) == (False, False)
    assert policy.should_terminate("discoverer", 49, 1, 1, [False, False]) is False
    assert policy.should_terminate("discoverer", 50, 1, 1, [False, False]) is True
    assert policy.should_terminate("ascender", 3, 2, 1, [False, False]) is False
    policy.update_state({"depth": 3, "dungeon_number": 0, "branch_depth": 3, "gold": 4, "kills": 1})
    assert policy.next_skill("descender", 4, 2, False, False) == "ascender"
    assert policy.next_skill("ascender", 3, 0, False, True) == "worshipper"
    assert policy.num_errors == 0
