"""Skills as data in code generation: the prompts, the reference skill functions, the unit-test harness and the
shipped modules are rendered from the skill files (``skills/*.toml``); for the designed five they are byte for
byte what they were before the skills were files (commit 3f94365); a sixth skill file reaches every one of them;
and a module or a policy that does not know a skill of the active set is refused with the skill's name.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from code_generation.combine import CombineError, build_module, combine, shared_skill_functions
from code_generation.isolation import InProcessPlayerHost
from code_generation.loader import MetaPolicyError, player_class, refuse_instant_endings
from code_generation.prompts import PROMPT_DIR, TaskPrompts, existing_class_source, harness_text
from code_generation.sandbox import SandboxLimits, run_in_sandbox
from code_generation.skill_rules import TemplateError, render_harness
from code_generation.verify import check_meta_policy
from common.skill_files import DEFAULT_SKILLS_DIR, SKILLS_ENV, SkillSet
from common.vocabulary import ALL_TASKS, SKILL_SET, SKILLS

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "rl_baseline" / "meta_policies"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- the designed five, unchanged
#: sha256 of the prompt texts every task shares (``TaskPrompts.load(task, existing_class_source(task, 42))``) and
#: of the rendered harness (quoted in the prompts) at commit 3f94365, before the skill files
SHARED_PROMPT_SHA256 = {
    "system": "4ff4c4a6ab9100d177b9eac6342929ac6f4b90519a7835472f6a40cfe5af3095",
    "skill_functions": "1cac67f45c8d4306c97f79139093c8af2a952cdb2ae987d6597f27657cc49087",
    "harness": "7bd92cf0a2646aaeb757cd4f522783ab8c96ecb769720e505ebd2cd4ccbdf7cd",
}
#: sha256 of each task's own prompts at commit 3f94365 (attributes: composite tasks only)
TASK_PROMPT_SHA256: dict[str, dict[str, str | None]] = {
    "exploration": {
        "initial": "96094d2306e11aab8617bcbe446a925de82f99235f3a7d0eb9798b4b09d61a1a",
        "check": "dc5c6a6813f069f507e3ebe9fbeed419b30ed0b75828ae06957ef09ef93a5a00",
        "rewrite": "0c29e8c286032a5dbf623c0fb78a7c65bfdfff2466d9c42c4ca10d33391333a1",
        "attributes": None},
    "gnomish": {
        "initial": "4a969c10ae9f2a4f97fa0a0f1d48477d70d147047914f476f5fac80533a7ecb9",
        "check": "414e70d3150c151bcf068ea89a9e0a9ef31ef04368a50319d61a0da331de9ffb",
        "rewrite": "2e600e9832c28eaf7a7f9c6c70c4f98629f9942e84bd3e658b0a9dcc112d54e1",
        "attributes": None},
    "delphi": {
        "initial": "6eca6a0fdf53f8bf66c1742d56f839df624d7931c46b9b02c1e4ced2008caab0",
        "check": "b4e62a4ae532beccc72c36ed5e717ef09d4d9aed2802c21032ac3ce92b229444",
        "rewrite": "44513201cd67d9a0a8daeeb08b393d718d2ac175beaf674bad2d57f6eca375a4",
        "attributes": None},
    "minetown": {
        "initial": "bcead35208f8693c73aa13cec5a2d127dae8b952d504362482548eb24e900e03",
        "check": "0689237e0861f3b89f85104fe4a419c304c9a62854a1b333f8d6f5629dafaff8",
        "rewrite": "c78d8a9c394bd020661c5aa9df834dc0f2526edb6919d2f9a1fe0588af625adb",
        "attributes": None},
    "transactions": {
        "initial": "b6f37959ce4eab33713898ac5f4ed07b16a004f4676dd1d31f896bca52a28a5f",
        "check": "187a0377b23dae040a2a5239ebfb8e970c2a64254b215298d891837cd17abd5a",
        "rewrite": "01de6f23aa27d0991600dda1c155598e14697748b07606c0fa01fb5d0acef12d",
        "attributes": None},
    "price": {
        "initial": "619c23401b5d376805909809262116cfad77a16119e14a73c2029e3751dff437",
        "check": "1094bc8bc58140dadaf5ed0d97fd83a7d31558ae6f349f594bf6fa4313f481e0",
        "rewrite": "8226d49f552381e3c2eac3fec6329ab7ae8e3d6ec29988695021e9a50fc6dbe5",
        "attributes": None},
    "buc": {
        "initial": "7f8b1ddbe56a90389176ef48eaf69bb64fa72a3b1f4e837587f7528856117af8",
        "check": "3d7dd87264a078f1ddd7183c6ed1acd39c0ed3c974f3914e52991bee2da440cf",
        "rewrite": "b46d307310258c311883d87551ebe407532809023af4fde0d0dec808f969f290",
        "attributes": None},
    "goldenexit": {
        "initial": "3b67b36f3babeb200901fc76812d6b65641c3806f5a346a4cbeb7d2f093440da",
        "check": "63595e2149a76668cc655b9368aaf1a1a0cad75c37eaf990babb5d6fbb52d5e6",
        "rewrite": "d65c1f784e2c11d9c3b25685c6004721e81409be68595c3bc29edd268ea696f1",
        "attributes": "0e54db114091adf35ec43ed9b2809aca358cad379d1d6823b26f6ea38728ca73"},
    "levelupsell": {
        "initial": "7309abcde9566ddc44fb5a28a0b202e1462fa79e4926caefcea70140ed6291b0",
        "check": "77488e0f6e6df4ebe249b33c2c1ccca6d0824a1e3ef52fb28d29efc30ef5e279",
        "rewrite": "8fa806040519d50c39179f0f31bcc9c89e74467ea0307a8fbb2bf140f24c9742",
        "attributes": "f99b2b8672609ea7347e2dfafbe3600caa331bc8a860a3ddee31c72aeb6d52ae"},
    "discoveryhunger": {
        "initial": "5ca319422b118268670cf4f7170ad750df23e2e8df6a034b939131d3bd3dd383",
        "check": "66dbad37f810fa595c7125939ef77059f7c314eca4104617e5e82a6a1cb35584",
        "rewrite": "e1e327d121fc2e58963b7fcf61f27f4bd5d57f558bf385fc9a055f3eb7b55861",
        "attributes": "7347d15c72c882e364314d1a722c96c36e05c1edb63ca1f24922e400b837aee4"},
}
#: ``git show 3f94365:code_generation/parts/skill_functions.py``: the part before its branches were rendered
SKILL_FUNCTIONS_SHA256 = "45f0057af75b779f0c9ee0d1bb3fad8075393112ec68f4413b292e3d13e90a5f"
#: ``rl_baseline/meta_policies/{task}/seed42/execution.py`` at commit 3f94365
SHIPPED_SHA256 = {
    "exploration": "3c6082a288f410d71e69151975fa8576a518f02a4e0406582524f762ce9b3843",
    "gnomish": "32992383cf379526f996faa7bf70d346bc4050e0163884ddcc84c5183dbb9372",
    "delphi": "cd78571142efff1e0b152887e6e38ef6a517e2f74358d7f407a0db433b991bec",
    "minetown": "3330db8564131a2bfdd15ddf451d42ecde9b19db44beef931cebd5c9875c88fe",
    "transactions": "73ed1dad02ab413a426f3503fcc013a7f2b07747da2e9f7725780edb1981de35",
    "price": "76c9b4158c9140f581643c3a688a58010d8fdcf47d6db8a8a090fbc2e67d799d",
    "buc": "cada776abb02297203a8d53e80037bf8d237f335a64913b83da64ae1ccb04796",
    "goldenexit": "aff59b149e0b348b3333b256c17d34664cf1a3e9affe1c004f650bb0062efaa6",
    "levelupsell": "ced611914f9c286b386cd8afe3bbb5292959aee52fbcbe41ebfba2c2af138013",
    "discoveryhunger": "17c088e63594a8ae5f69ff56e81716c5a8771db7d80bd6c679f2a4527cf87730",
}


def test_the_designed_five_are_the_active_set():
    """The hashes here hold for the designed five (the default skill set of a test run)."""
    assert SKILLS == ("discoverer", "descender", "ascender", "worshipper", "merchant")


@pytest.mark.parametrize("task", ALL_TASKS)
def test_the_prompts_of_the_five_skills_are_byte_identical(task):
    prompts = TaskPrompts.load(task, existing_class_source(task, 42))
    assert {name: _sha(getattr(prompts, name)) for name in SHARED_PROMPT_SHA256} == SHARED_PROMPT_SHA256
    own = {name: None if getattr(prompts, name) is None else _sha(getattr(prompts, name))
           for name in TASK_PROMPT_SHA256[task]}
    assert own == TASK_PROMPT_SHA256[task]


def test_no_prompt_file_states_the_number_of_skills():
    """The number comes from the skill files (``SkillSet.number_word``, filled into ``{{number_of_skills}}``), and
    the start and end texts from ``skills/*.toml`` only."""
    stated = [str(p.relative_to(PROMPT_DIR)) for p in sorted(PROMPT_DIR.rglob("*.txt"))
              if re.search(r"\b(five|5) skills\b", p.read_text(encoding="utf-8"), flags=re.IGNORECASE)]
    assert not stated
    assert not (PROMPT_DIR / "skills").exists()


def test_the_rendered_skill_functions_and_harness_are_the_files_as_they_were():
    assert _sha(shared_skill_functions()) == SKILL_FUNCTIONS_SHA256
    assert _sha(harness_text()) == SHARED_PROMPT_SHA256["harness"]
    # the files on disk are templates: no skill's branch is written there
    template = (PROMPT_DIR / "parts" / "skill_functions.py").read_text(encoding="utf-8")
    assert "# {{skill_termination_branches}}" in template and "_skill_steps\n" not in template
    assert '"merchant"' not in (PROMPT_DIR / "unit_test_harness.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("task", ALL_TASKS)
def test_combine_builds_the_shipped_module_byte_for_byte(task):
    built = build_module(task, 42, reference=True)
    assert _sha(built) == SHIPPED_SHA256[task]
    assert (SHIPPED / task / "seed42" / "execution.py").read_bytes() == built.encode("utf-8")


@pytest.mark.parametrize("task", ALL_TASKS)
def test_no_shipped_module_ends_a_skill_at_once(task):
    """Every skill of the five survives its first turn (the budgets set_initial_values sets are > 0)."""
    path = SHIPPED / task / "seed42" / "execution.py"
    host = InProcessPlayerHost(player_class(path, path.read_text(encoding="utf-8")), {}, 0.0)
    refuse_instant_endings(host, path)  # raises MetaPolicyError otherwise


# ----------------------------------------------------------------------------- a skill a module does not know
_MERCHANT_BRANCH = re.compile(r'( *)if skill == "merchant":\n\1    return skill_time >= self.merchant_skill_steps\n')


def _without_the_merchant(text: str) -> str:
    cut, n = _MERCHANT_BRANCH.subn("", text)
    assert n == 1
    return cut


class _KnowsThree:
    def __init__(self, max_depth: int, branch_depth: int) -> None:
        pass

    def set_initial_values(self) -> None:
        self.discoverer_skill_steps = 500

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        if skill == "discoverer":
            return skill_time >= self.discoverer_skill_steps
        if skill == "merchant":
            return skill_time >= self.merchant_skill_steps  # never set: raises
        if skill in ("descender", "ascender"):
            return current_depth != previous_depth
        return True  # what a generated skill_termination does for a skill it does not know


def test_a_module_that_ends_a_skill_at_once_is_refused_naming_it():
    with pytest.raises(MetaPolicyError) as caught:
        refuse_instant_endings(InProcessPlayerHost(_KnowsThree, {}, 0.0), "m.py")
    said = str(caught.value)
    assert said.startswith("m.py: refused: skill_termination ends the skills worshipper, merchant on their "
                           "first turn"), said
    assert "merchant_skill_steps" in said  # the merchant's call raised: the runtime's fallback ends it too


def test_combine_refuses_skill_functions_that_miss_a_skill(tmp_path):
    run = tmp_path / "gen" / "gnomish" / "_seed5"
    run.mkdir(parents=True)
    (run / "execution.py").write_text((SHIPPED / "gnomish" / "seed42" / "execution.py").read_text())
    (run / "skill_functions.py").write_text(_without_the_merchant(shared_skill_functions()))
    with pytest.raises(CombineError, match="ends the skill merchant on its first turn"):
        combine("gnomish", 5, gen_dir=tmp_path / "gen", out_root=tmp_path / "meta", run_test=False)


def test_verify_refuses_a_module_that_misses_a_skill(tmp_path):
    folder = tmp_path / "gnomish" / "seed42"
    folder.mkdir(parents=True)
    (folder / "execution.py").write_text(_without_the_merchant((SHIPPED / "gnomish" / "seed42" / "execution.py")
                                                               .read_text()))
    check = check_meta_policy("gnomish", 42, root=tmp_path)
    assert not check.ok and "ends the skill merchant on its first turn" in check.detail, check.detail


# ----------------------------------------------------------------------------- a skill the harness does not know
def test_the_harness_refuses_a_skill_it_cannot_simulate():
    template = (PROMPT_DIR / "unit_test_harness.py").read_text(encoding="utf-8")
    odd = SkillSet(tuple(dataclasses.replace(s, start="on_a_throne") if s.name == "merchant" else s
                         for s in SKILL_SET.specs))
    with pytest.raises(TemplateError, match="no simulation for the skill 'merchant'"):
        render_harness(template, odd)


def test_the_simulated_dungeon_refuses_a_skill_outside_the_set():
    policy = ("class NetHackPlayer:\n"
              "    def __init__(self, max_depth, branch_depth):\n"
              "        self.max_depth = max_depth\n"
              "        self.branch_depth = branch_depth\n\n"
              "    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,\n"
              "                     worshipper_precondition):\n"
              "        return 'lookout'\n")
    result = run_in_sandbox(policy, SandboxLimits(wall_seconds=20.0, cpu_seconds=20), prelude=[harness_text()],
                            extra_sources=["run_episode(NetHackPlayer, 0, max_steps=3)\n"])
    assert not result.ok and "perform_task returned an unknown skill: 'lookout'" in result.output, result.output


# ----------------------------------------------------------------------------- a sixth skill
SIXTH = """name = "lookout"
index = 5

[text]
description = "watch the surroundings for a while without moving"
preference = "Prefer the moment where the player stays put and watches."
can_start = "always."
ends = "after a fixed number of game turns."

[rules]
start = "always"
end = "time_budget"
budget_default = 200

[reward]
quantile = 0.85
experiment = "llama3_lookout_default"
paper_pairs = 80000

[measures]
names = ["cells_revealed"]
main = "cells_revealed"
progress = "cells_revealed"

[stand_in]
stats = { level_change = -5.0 }
"""

#: run with the six skills active, in a process of its own (the vocabulary reads the skill set at import)
SIX_SKILLS_PROGRAM = r"""
import json, sys, textwrap
from code_generation.combine import combine, shared_skill_functions
from code_generation.prompts import PROMPT_DIR, TaskPrompts, existing_class_source, harness_text
from code_generation.skill_rules import render_skill_functions
from code_generation.verify import check_meta_policy
from common.skill_files import DEFAULT_SKILLS_DIR, load_skill_set
from common.vocabulary import ALL_TASKS, SKILLS

out = {"skills": list(SKILLS), "prompts": {}}
for task in ALL_TASKS:
    prompts = TaskPrompts.load(task, existing_class_source(task, 42))
    out["prompts"][task] = [prompts.initial, prompts.skill_functions]
out["functions"] = shared_skill_functions()
out["harness"] = harness_text()
harness = {}
exec(compile(out["harness"], "harness", "exec"), harness)
out["sim_skills"] = list(harness["SIM_SKILLS"])
sim = harness["SimDungeon"](0)
sim.step("lookout")
out["lookout_turns"] = sim.turn
budgets = ("    def __init__(self, max_depth, branch_depth):\n        pass\n\n    def set_initial_values(self):\n"
           "        self.discoverer_skill_steps = 500\n        self.merchant_skill_steps = 10000\n"
           "        self.worshipper_skill_steps = 10000\n")
five = render_skill_functions((PROMPT_DIR / "parts" / "skill_functions.py").read_text(),
                              load_skill_set([DEFAULT_SKILLS_DIR]))
out["checked"] = {}
for name, functions in (("six", out["functions"]), ("five", five)):
    namespace = {}
    exec("class NetHackPlayer:\n" + textwrap.indent(functions, "    ") + "\n" + budgets, namespace)
    try:
        harness["check_skill_functions"](namespace["NetHackPlayer"])
        out["checked"][name] = "ok"
    except AssertionError as exc:
        out["checked"][name] = str(exc)
out["combined"] = combine("exploration", 42, out_root=sys.argv[1], reference=True).path.read_text()
shipped = check_meta_policy("gnomish", 42)
out["verify_shipped"] = [shipped.ok, shipped.detail]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def six_skills(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("six_skills")
    for path in DEFAULT_SKILLS_DIR.glob("*.toml"):
        shutil.copy(path, folder / path.name)
    (folder / "lookout.toml").write_text(SIXTH)
    env = dict(os.environ, **{SKILLS_ENV: str(folder)})
    proc = subprocess.run([sys.executable, "-c", SIX_SKILLS_PROGRAM, str(folder / "meta")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: the sixth skill's branch, in start-rule order: after the always-startable designed three, before the merchant
LOOKOUT_BRANCH = ('    if skill == "ascender":\n        return current_depth < previous_depth  # only going up ends it\n'
                  '    if skill == "lookout":\n        return skill_time >= (self.lookout_skill_steps if '
                  'hasattr(self, "lookout_skill_steps") else 200)\n    if skill == "merchant":\n')


def test_a_sixth_skill_is_in_every_prompt(six_skills):
    assert six_skills["skills"] == list(SKILLS) + ["lookout"]
    listed = ("5. lookout: watch the surroundings for a while without moving.\n   Can start: always.\n"
              "   Ends: after a fixed number of game turns.")
    for task, (initial, skill_functions) in six_skills["prompts"].items():
        assert "The agent knows six skills:" in initial.splitlines()[0] and listed in initial, task
        assert skill_functions.startswith("A NetHack agent has six skills.") and listed in skill_functions, task
        assert "may leave self.lookout_skill_steps unset (then use 200 turns)" in skill_functions, task
        assert 'SIM_SKILLS = ("discoverer", "descender", "ascender", "worshipper", "merchant", "lookout")' in initial


def test_the_training_policys_skeleton_names_a_sixth_skill(six_skills):
    skeleton = six_skills["prompts"]["exploration"][0].replace("\n        # ", " ")
    assert 'ended ("discoverer", "descender", "ascender", "worshipper", "merchant" or "lookout")' in skeleton


def test_a_sixth_skill_has_its_branch_of_skill_termination(six_skills):
    assert LOOKOUT_BRANCH in six_skills["functions"]
    # combine joined it, ran the reference test in the six-skill harness and found no skill ending at once
    assert textwrap.indent(LOOKOUT_BRANCH, "    ") in six_skills["combined"]  # a method of the class there


def test_the_harness_knows_a_sixth_skill(six_skills):
    assert six_skills["sim_skills"][-1] == "lookout"
    assert six_skills["lookout_turns"] == 100  # an always-startable time-budget skill explores, as the discoverer
    assert 'if skill in ("discoverer", "lookout"):' in six_skills["harness"]
    assert 'assert not term("lookout", 0, 1, 1, none), "lookout must not end at once"' in six_skills["harness"]
    assert six_skills["checked"] == {"six": "ok", "five": "lookout must not end at once"}


def test_a_module_written_for_five_skills_is_refused_with_six(six_skills):
    ok, detail = six_skills["verify_shipped"]
    assert not ok and "ends the skill lookout on its first turn" in detail, detail
