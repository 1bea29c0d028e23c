"""The per-skill tables read from the skill files (issue "one skill, one file"): the measures and what they pay,
the paper's pair counts, the reward experiments, who may start and the stand-in's choices are the designed five's
values as they were written out before; a sixth skill's message measures are counted on its own steps only; and
the hierarchical LLM policy offers a sixth skill that may always start."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.nethack.message_measures import MESSAGE_MEASURES, RATE_MEASURES, message_measure
from common.skill_files import BUILTIN_MEASURES, DEFAULT_SKILLS_DIR, SKILLS_ENV, load_skill_set
from common.vocabulary import SKILL_SPECS, SKILLS
from rl_baseline.tasks.skill_measures import MAIN_MEASURE, PROGRESS_MEASURE, SKILL_MEASURES, SkillMeasures

REPO = Path(__file__).resolve().parents[1]
LEVEL_1 = {"depth": 1, "dungeon_number": 0, "dungeon_level": 1}


# ----------------------------------------------------------------------------- (a) the designed five, unchanged


def test_the_measure_tables_are_the_designed_fives():
    assert SKILL_MEASURES == {
        "discoverer": ("cells_per_1000_steps", "cells_revealed", "new_levels"),
        "descender": ("levels_descended", "depth_increases", "steps_to_first_descent", "down_stairs_known_share",
                      "down_stairs_reached"),
        "ascender": ("levels_ascended",),
        "merchant": ("shops_entered", "sale_offers", "prices_identified", "items_sold"),
        "worshipper": ("altars_found", "altar_drops", "buc_identified"),
    }
    assert MAIN_MEASURE == {"discoverer": "cells_per_1000_steps", "descender": "levels_descended",
                            "ascender": "levels_ascended", "merchant": "items_sold", "worshipper": "buc_identified"}
    assert PROGRESS_MEASURE == {"discoverer": "cells_revealed", "descender": "levels_descended",
                                "ascender": "levels_ascended", "merchant": "items_sold",
                                "worshipper": "buc_identified"}
    # the designed skills name every measure the tracker computes, each once
    assert sorted(m for ms in SKILL_MEASURES.values() for m in ms) == sorted(BUILTIN_MEASURES)


def test_the_pipelines_tables_are_the_designed_fives():
    from orchestration.phases import PipelineConfig, annotator
    from orchestration.pipeline import PAPER_NUM_PAIRS

    assert PAPER_NUM_PAIRS == {"discoverer": 180_000, "descender": 80_000, "ascender": 80_000,
                               "worshipper": 200_000, "merchant": 121_000}
    assert [annotator(s) for s in SKILLS] == ["llama3_discoverer_default", "llama3_descender_default",
                                              "llama3_ascender_default", "llama3_worshipper_default",
                                              "llama3_merchant_default"]
    assert PipelineConfig(out_dir="o").reward_dirs() == [f"o/skill_rewards/llama3_{s}_default" for s in SKILLS]


def test_who_may_start_and_what_the_stand_in_chooses_are_the_designed_fives():
    from rl_baseline.baselines.llm_policy import stand_in
    from rl_baseline.baselines.llm_policy.meta import startable_skills
    from rl_baseline.skills import meta_policy

    always = ["discoverer", "descender", "ascender"]
    assert startable_skills(False, False) == always
    assert startable_skills(True, False) == always + ["merchant"]
    assert startable_skills(False, True) == always + ["worshipper"]
    assert startable_skills(True, True) == always + ["worshipper", "merchant"]  # index order
    assert meta_policy.FALLBACK_SKILL == "discoverer"
    assert meta_policy._DESCENDING == {"descender"}
    assert (stand_in.EXPLORER, stand_in.SELLER, stand_in.WORSHIPPER, stand_in.DESCENDER, stand_in.ASCENDER) == (
        "discoverer", "merchant", "worshipper", "descender", "ascender")


# ----------------------------------------------------------------------------- (b) a sixth skill's message measures


def _juggler(measures: tuple[str, ...], progress: str) -> dict:
    """The designed specs and a sixth skill, ``juggler``, naming ``measures`` (the ascender's file otherwise)."""
    spec = dataclasses.replace(SKILL_SPECS["ascender"], name="juggler", index=len(SKILLS), measures=measures,
                               main_measure=measures[0], progress_measure=progress)
    return {**SKILL_SPECS, "juggler": spec}


def _blank() -> tuple[np.ndarray, np.ndarray]:
    chars = np.full((21, 79), ord(" "), dtype=np.uint8)
    chars[5, 5:20] = ord(".")
    return chars, np.zeros_like(chars)


def test_a_sixth_skills_message_measure_and_its_rate_count_on_its_active_steps_only():
    chars, colours = _blank()
    specs = _juggler(("juggles", "juggles_per_1000_steps", "levels_ascended"), progress="juggles")
    m = SkillMeasures(("discoverer", "ascender", "juggler"), specs=specs,
                      message_measures={"juggles": lambda msg: float(msg.count("juggle"))},
                      rate_measures={"juggles_per_1000_steps": "juggles"})
    m.reset(LEVEL_1, chars, colours)

    def step(skill: str, *messages: str, depth: int = 1) -> None:
        info = {"depth": depth, "dungeon_number": 0, "dungeon_level": max(depth, 1), "messages": list(messages)}
        m.update(info, chars, colours, skill)

    step("discoverer", "You juggle three daggers.")  # not the juggler's step: not counted
    step("juggler", "You juggle three daggers.", "The juggle goes wrong; you juggle again.")  # 1 + 2
    step("juggler", "You see here a dagger.")
    step("ascender", "You juggle.")
    step("discoverer", depth=2)  # another skill took the hero down
    step("juggler", depth=2)
    step("juggler", depth=1)  # the juggler went up in its turn: the ascender's measure, for the skill that names it
    step("juggler", "You juggle while dying.", depth=0)  # the last step of a game counts its messages too
    values = m.values
    assert values["juggler"] == {"juggles": 4.0, "juggles_per_1000_steps": 1000.0 * 4 / 5, "levels_ascended": 1.0}
    assert m.progress("juggler") == 4.0
    assert values["ascender"] == {"levels_ascended": 0.0}
    assert "juggles" not in values["discoverer"]
    summary = m.summary()
    assert summary["measures/juggler/juggles_per_1000_steps"] == 800.0
    assert not any("juggles" in key for key in summary if not key.startswith("measures/juggler/"))


def test_a_rate_alone_counts_its_message_measure_and_an_unknown_or_doubled_measure_is_refused():
    chars, colours = _blank()
    specs = _juggler(("juggles_per_1000_steps",), progress="juggles_per_1000_steps")
    m = SkillMeasures(("juggler",), specs=specs, message_measures={"juggles": lambda msg: 1.0},
                      rate_measures={"juggles_per_1000_steps": "juggles"})
    m.reset(LEVEL_1, chars, colours)
    for messages in (["a", "b"], [], ["c"], []):
        m.update({**LEVEL_1, "messages": messages}, chars, colours, "juggler")
    assert m.values == {"juggler": {"juggles_per_1000_steps": 750.0}} and m.progress("juggler") == 750.0
    with pytest.raises(ValueError, match="skill 'juggler': no measure 'juggles_per_1000_steps'"):
        SkillMeasures(("juggler",), specs=specs, message_measures={}, rate_measures={})
    with pytest.raises(ValueError, match="'items_sold' is computed by SkillMeasures and also registered"):
        SkillMeasures(("juggler",), specs=_juggler(("items_sold",), progress="items_sold"),
                      message_measures={"items_sold": lambda msg: 1.0}, rate_measures={})


def test_a_registered_measure_named_in_a_sixth_skill_file_is_counted_from_the_registry(tmp_path: Path):
    chars, colours = _blank()
    skill_file = tmp_path / "juggler.toml"
    text = (DEFAULT_SKILLS_DIR / "ascender.toml").read_text()
    text = text.replace('name = "ascender"', 'name = "juggler"').replace("index = 2", "index = 5")
    text = text.replace("llama3_ascender_default", "llama3_juggler_default")
    skill_file.write_text(text.replace('names = ["levels_ascended"]', 'names = ["levels_ascended", "test_juggles", '
                                       '"test_juggles_per_1000_steps"]'))
    message_measure("test_juggles", rate="test_juggles_per_1000_steps")(lambda msg: float("juggle" in msg))
    try:
        spec = load_skill_set([DEFAULT_SKILLS_DIR, skill_file])["juggler"]  # the file's check reads the registry
        m = SkillMeasures(("discoverer", "juggler"), specs={**SKILL_SPECS, "juggler": spec})
        m.reset(LEVEL_1, chars, colours)
        for skill in ("discoverer", "juggler", "juggler"):
            m.update({**LEVEL_1, "message": "You juggle."}, chars, colours, skill)
        assert m.values["juggler"] == {"levels_ascended": 0.0, "test_juggles": 2.0,
                                       "test_juggles_per_1000_steps": 1000.0}
    finally:
        MESSAGE_MEASURES.pop("test_juggles", None)
        RATE_MEASURES.pop("test_juggles_per_1000_steps", None)


# ----------------------------------------------------------------------------- (c) a sixth skill in a skill set

_SIXTH_SKILL = '''
name = "juggler"
index = 5

[text]
description = """juggle whatever the hero holds"""
preference = """Prefer the moment where the player juggles."""
can_start = """always."""
ends = """after a fixed number of game turns."""

[rules]
start = "always"
end = "time_budget"
budget_default = 300

[reward]
quantile = 0.9
experiment = "juggler_v2"
paper_pairs = 1234

[measures]
names = ["cells_revealed", "new_levels"]
main = "new_levels"
progress = "cells_revealed"

[stand_in]
stats = { level_change = -1.0 }
message = [{ phrases = ["juggle"], score = 1.0 }]
'''

# run in a process whose skill set is the folder the test writes (common.vocabulary reads it at import)
_PROBE = r'''
import json
from common.llm import Backend
from orchestration.phases import annotator
from orchestration.pipeline import PAPER_NUM_PAIRS
from rl_baseline.baselines.llm_policy.client import LLMClient, LLMSettings
from rl_baseline.baselines.llm_policy.meta import LLMMetaPolicy
from rl_baseline.tasks.skill_measures import PROGRESS_MEASURE, SKILL_MEASURES

class Replies(Backend):
    name = "scripted"
    def __init__(self):
        self.prompts = []
    def generate(self, conversations):
        self.prompts += [[m["content"] for m in c] for c in conversations]
        return ["Skill: juggler" for _ in conversations]

class Inner:
    num_errors = 0
    def reset(self): pass
    def update_state(self, info): pass

backend = Replies()
policy = LLMMetaPolicy(Inner(), LLMClient(LLMSettings(backend="openai", model="m", base_url="x"), backend=backend),
                       "buc")
policy.reset()
chosen = [policy.next_skill("discoverer", 1, 0, False, False), policy.next_skill("juggler", 1, 0, True, True)]
print(json.dumps({"prompts": backend.prompts, "chosen": chosen, "invalid": policy.invalid_choices,
                  "pairs": PAPER_NUM_PAIRS.get("juggler"), "experiment": annotator("juggler"),
                  "measures": SKILL_MEASURES.get("juggler"), "progress": PROGRESS_MEASURE.get("juggler")}))
'''


def test_the_llm_policy_offers_a_sixth_skill_that_may_always_start(tmp_path: Path):
    folder = tmp_path / "skills"
    folder.mkdir()
    for f in DEFAULT_SKILLS_DIR.glob("*.toml"):
        shutil.copy(f, folder / f.name)
    (folder / "juggler.toml").write_text(_SIXTH_SKILL)
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **{SKILLS_ENV: str(folder)})
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    (system, first), (_, second) = got["prompts"]
    assert "has six trained skills" in system
    assert "Skills that can start now: discoverer, descender, ascender, juggler.\n" in first
    assert "Skills that can start now: discoverer, descender, ascender, worshipper, merchant, juggler.\n" in second
    assert got["chosen"] == ["juggler", "juggler"] and got["invalid"] == 0
    assert got["pairs"] == 1234 and got["experiment"] == "juggler_v2"
    assert got["measures"] == ["cells_revealed", "new_levels"] and got["progress"] == "cells_revealed"
