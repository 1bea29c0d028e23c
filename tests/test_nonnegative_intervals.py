"""No interval of a non-negative quantity is printed below zero (issue #65, point 4).

The pages quoted the progress bound's buc at 10M env steps as "0.50 [-0.07, 1.07] on 4 episodes": mean +- 1.96
s.e., the method of the tools of then, as the held-skill reports' Student's t was. The tools now compute a bootstrap
percentile interval for a count and Wilson's for a success rate; these tests pin that every path that computes or
prints one stays within [0, ...] on the case that went below zero, a count of 4 episodes (0, 0, 1, 1: the values that give the page's
[-0.07, 1.07] with the sample standard deviation; the per-episode values themselves were not kept), including
intervals read back from files the older tools wrote.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from common.estimates import (
    BOOTSTRAP_METHOD,
    RECOMPUTED_METHOD,
    bootstrap_interval,
    held_in_range,
    mean_interval95,
    recorded_interval,
)

#: the buc count of the page: 4 episodes that met an altar, two of which identified an item
FOUR_EPISODES = [0.0, 0.0, 1.0, 1.0]
#: what the older tools recorded for it: mean +- 1.96 s.e. (the evaluations) and Student's t (the skill reports)
NORMAL_OLD = (0.5 - 1.96 * 0.5 / 3 ** 0.5, 0.5 + 1.96 * 0.5 / 3 ** 0.5)  # [-0.07, 1.07]
STUDENT_OLD = (0.5 - 3.182 * 0.5 / 3 ** 0.5, 0.5 + 3.182 * 0.5 / 3 ** 0.5)  # t(0.975, 3 df): [-0.42, 1.42]


def test_the_old_intervals_of_four_episodes_went_below_zero():
    """The case itself: both older methods put the lower bound of this count below zero."""
    x = np.asarray(FOUR_EPISODES)
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert se == pytest.approx(0.5 / math.sqrt(3))
    assert (round(NORMAL_OLD[0], 2), round(NORMAL_OLD[1], 2)) == (-0.07, 1.07)  # the page's figure
    assert NORMAL_OLD[0] < 0.0 and STUDENT_OLD[0] < 0.0


def test_the_interval_computed_for_a_count_of_four_episodes_is_not_below_zero():
    mean, lo, hi = mean_interval95(FOUR_EPISODES)
    assert mean == 0.5 and 0.0 <= lo <= mean <= hi <= 2.0
    assert (lo, hi) == bootstrap_interval(FOUR_EPISODES)


def test_held_in_range_keeps_a_count_from_zero_up_and_a_rate_within_0_1():
    assert held_in_range(-0.07, 1.07) == (0.0, 1.07)
    assert held_in_range(-0.2, 1.3, 0.0, 1.0) == (0.0, 1.0)
    assert held_in_range(0.1, 0.4) == (0.1, 0.4)
    lo, hi = held_in_range(math.nan, math.nan)
    assert math.isnan(lo) and math.isnan(hi)


def test_an_interval_read_back_from_an_old_file_is_recomputed_from_its_values():
    """An entry without ``ci_method`` was written with Student's t: with its per-episode values kept, the printed
    interval is the bootstrap one; without them (or with one value) its own, held at 0."""
    old = {"mean": 0.5, "ci95": list(STUDENT_OLD), "values": FOUR_EPISODES}
    assert recorded_interval(old) == bootstrap_interval(FOUR_EPISODES)
    assert recorded_interval(old)[0] >= 0.0
    assert recorded_interval({"mean": 0.5, "ci95": list(NORMAL_OLD)}) == (0.0, NORMAL_OLD[1])
    assert recorded_interval({"mean": 0.0, "ci95": [-0.5, 0.5], "values": [0.0]}) == (0.0, 0.5)
    # a file of the current tools: its bounds as recorded
    new = {"mean": 0.5, "ci95": [0.0, 1.5], "ci_method": BOOTSTRAP_METHOD, "values": FOUR_EPISODES}
    assert recorded_interval(new) == (0.0, 1.5)
    # a success rate stays within [0, 1]
    assert recorded_interval({"mean": 0.25, "ci95": [-0.2, 1.1]}, binary=True) == (0.0, 1.0)
    assert all(math.isnan(b) for b in recorded_interval({"mean": 0.5}))


def test_the_evaluation_summary_of_the_buc_count_on_four_altar_episodes_is_not_below_zero():
    """The release's protocol, as the page's figure: the count over the episodes that met an altar."""
    from rl_baseline.evaluation import EpisodeResult, summarize

    def episode(count: float, altar: bool) -> EpisodeResult:
        return EpisodeResult(success=False, count=count, value=count, length=10,
                             release={"reached": True, "counts": {"num_buc": count}, "altar_seen": altar})

    episodes = [episode(c, True) for c in FOUR_EPISODES] + [episode(0.0, False) for _ in range(6)]
    s = summarize("buc", "count", episodes, (), protocol="release")
    assert s["episodes"] == 4 and s["mean"] == 0.5
    assert s["ci_method"] == BOOTSTRAP_METHOD and 0.0 <= s["ci95"][0] <= 0.5 <= s["ci95"][1] <= 2.0
    project = summarize("buc", "count", episodes[:4], (), protocol="project")
    assert 0.0 <= project["ci95"][0]


def test_the_reports_results_table_prints_no_count_interval_below_zero(tmp_path):
    """orchestration.report: a file that recorded bounds below zero prints them from 0 (a count) and within
    [0, 1] (a success rate)."""
    from orchestration.report import results_table
    from orchestration.report.evaluation import format_interval, load_eval_result

    assert format_interval("count", NORMAL_OLD) == f"[0.00, {NORMAL_OLD[1]:.2f}]"
    assert format_interval("count", (-0.07, 1.07)) == "[0.00, 1.07]"
    assert format_interval("success", (-0.01, 1.2)) == "[0.0%, 100.0%]"
    assert format_interval("count", (0.0, 1.5)) == "[0.00, 1.50]"
    path = tmp_path / "exp" / "eval" / "buc_seed42.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task": "buc", "measure": "count", "mean": 0.5, "stderr": 0.5, "episodes": 4,
                                "experiment": "exp", "code_seed": 42, "ci95": [-0.07, 1.07]}))
    table = results_table([load_eval_result(path)], paper=False)
    row = next(line for line in table.splitlines() if line.startswith("| buc"))
    assert "[0.00, 1.07]" in row and "-0.07" not in row


def _old_skill_report(folder: Path, with_md: bool) -> None:
    """A skill report as the tools of the Student's t intervals wrote it (no ``interval_method``)."""
    def entry(values: list[float], ci: tuple[float, float]) -> dict:
        return {"measures": {"levels_descended": {"mean": float(np.mean(values)), "ci95": list(ci),
                                                  "values": values}}}

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "skill_report.json").write_text(json.dumps({
        "policy_dir": str(folder), "episodes": 4,
        "skills": {"descender": {"main_measure": "levels_descended", "policies": {
            "trained": entry(FOUR_EPISODES, STUDENT_OLD), "untrained": entry([0.0] * 4, (0.0, 0.0)),
            "random": entry([0.0] * 4, (0.0, 0.0))}}}}))
    if with_md:
        (folder / "skill_report.md").write_text(
            "Policy `p`; each skill held for 4 episodes per policy; mean [95% CI] per episode.\n\n"
            "| skill | measure | trained | untrained | random | trained > random |\n|---|---|---|---|---|---|\n"
            f"| descender | **levels_descended** | 0.5 [{STUDENT_OLD[0]:.3g}, {STUDENT_OLD[1]:.3g}] | 0 [0, 0] | "
            "0 [0, 0] | no |\n")


def test_the_reports_skill_table_from_an_old_json_recomputes_the_interval(tmp_path):
    from orchestration.report.skill_section import SkillReport, skill_report_section

    _old_skill_report(tmp_path / "exp", with_md=False)
    text = "\n".join(skill_report_section(SkillReport("exp", tmp_path / "exp")))
    lo, hi = bootstrap_interval(FOUR_EPISODES)
    row = next(line for line in text.splitlines() if line.startswith("| descender"))
    assert f"0.5 [{lo:.4g}, {hi:.4g}]" in row and "-" not in row.replace("|---", "")
    assert RECOMPUTED_METHOD in text


def test_the_reports_copy_of_an_old_skill_report_md_prints_no_bound_below_zero(tmp_path):
    from orchestration.report.skill_section import HELD_NOTE, SkillReport, skill_report_section

    _old_skill_report(tmp_path / "exp", with_md=True)
    text = "\n".join(skill_report_section(SkillReport("exp", tmp_path / "exp")))
    row = next(line for line in text.splitlines() if line.startswith("| descender"))
    assert f"0.5 [0, {STUDENT_OLD[1]:.3g}]" in row and "[-" not in row
    assert HELD_NOTE in text
    # a report of the current tools is copied as it is, without the note
    (tmp_path / "exp" / "skill_report.md").write_text(
        "| skill | measure | trained |\n|---|---|---|\n| descender | **levels_descended** | 0.5 [0, 1.5] |\n")
    text = "\n".join(skill_report_section(SkillReport("exp", tmp_path / "exp")))
    assert "0.5 [0, 1.5]" in text and HELD_NOTE not in text


def test_the_held_skill_evaluation_prints_no_bound_below_zero():
    """rl_baseline.sf.skill_eval: the summary of 4 held episodes (0, 0, 0, 2 levels) and its log line; an entry of
    an older file printed through format_measure is held at 0 too."""
    from rl_baseline.sf.skill_eval import SkillEpisode, SkillEvalResult, format_measure

    def episode(levels: float) -> SkillEpisode:
        measures = {"levels_descended": levels, "depth_increases": levels, "steps_to_first_descent": 0.0,
                    "down_stairs_known_share": 0.0, "down_stairs_reached": 0.0}
        return SkillEpisode(measures=measures, length=100, ended_by="game", start_depth=1, max_depth=1,
                            intrinsic_return=0.0, nonzero_fraction=0.0)

    stat = SkillEvalResult("descender", "trained", [episode(v) for v in FOUR_EPISODES]).summary()[
        "measures"]["levels_descended"]
    assert 0.0 <= stat["ci95"][0] <= 0.5 <= stat["ci95"][1] <= 2.0
    assert "[-" not in format_measure(stat)
    assert format_measure({"mean": 0.5, "ci95": list(STUDENT_OLD)}) == f"0.5 [0, {STUDENT_OLD[1]:.3g}]"


def test_no_page_prints_an_interval_below_zero() -> None:
    """Every figure with an interval on the pages is a count, a share or a rate: none has a bound below zero (the
    record of the runs printed 42 such bounds from the Student's t and normal intervals of then)."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    below = re.compile(r"[0-9%]\**\s\[-[0-9]")
    found = [f"{page.relative_to(repo)}:{n}: {line.strip()[:120]}"
             for page in [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1) if below.search(line)]
    assert not found, "\n".join(found)
