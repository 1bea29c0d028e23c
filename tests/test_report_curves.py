"""orchestration.report: training curves from the runtime's episode statistics, the measures table,
meta-policy errors of evaluations and the forced-skill evaluation (skill report) section."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from common.vocabulary import SKILLS
from orchestration.report import (
    LENGTH_PNG,
    MEASURES_PNG,
    NONZERO_PNG,
    RETURN_PNG,
    SHARE_PNG,
    SKILL_REPORT_HEADING,
    build_report,
    find_eval_results,
    find_training_runs,
    results_table,
)

CURVES = (RETURN_PNG, SHARE_PNG, NONZERO_PNG, LENGTH_PNG, MEASURES_PNG)
STEPS = [500 * (i + 1) for i in range(7)]


def write_episode_stats(exp_dir: Path, with_len: bool = True, with_measures: bool = True) -> None:
    """Tags as a training run writes them: sample-factory keeps each episode_extra_stats key as
    the tag (``len/len`` for the episode length); our observer adds ``{key}_mean`` for skills/
    and intrinsic/ (here only for the share, so both spellings are read)."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(exp_dir / ".summary" / "0"))
    for i, step in enumerate(STEPS):
        for k, skill in enumerate(SKILLS):
            active = skill in ("discoverer", "merchant")
            share = (0.7 if skill == "discoverer" else 0.3) if active else 0.0
            writer.add_scalar(f"skills/{skill}_share", share, step)
            writer.add_scalar(f"skills/{skill}_share_mean", share, step)
            writer.add_scalar(f"skills/{skill}_activations", float(active), step)
            writer.add_scalar(f"intrinsic/{skill}_return", (i + k) * 0.1 if active else 0.0, step)
            if active:
                writer.add_scalar(f"intrinsic/{skill}_mean", 0.01 * i, step)
                writer.add_scalar(f"intrinsic/{skill}_nonzero_frac", 0.05 * i, step)
        writer.add_scalar("intrinsic/episode_sum", 1.0, step)
        writer.add_scalar("skills/meta_policy_errors", 0.0, step)
        writer.add_scalar("skills/switches", 2.0, step)
        if with_len:
            writer.add_scalar("len/len", 100.0 + i, step)
            writer.add_scalar("len/len_min", 50.0, step)
            writer.add_scalar("len/len_max", 150.0 + i, step)
        if with_measures:
            # final value = mean of the last 5 points: cells 2..6 * 10 -> 40; items_sold i -> 4
            writer.add_scalar("measures/discoverer/cells_per_1000_steps", 10.0 * i, step)
            writer.add_scalar("measures/discoverer/new_levels", 1.0, step)
            writer.add_scalar("measures/merchant/items_sold", float(i), step)
            writer.add_scalar("measures/merchant/shops_entered", 0.5, step)
        writer.add_scalar("perf/_fps", 100.0, step)
    writer.close()


def test_curves_and_measures_table_from_episode_stats(tmp_path):
    exp = tmp_path / "skill_policy" / "run1"
    write_episode_stats(exp)
    run = find_training_runs(tmp_path)[0]
    assert run.get("len/len")[1] == pytest.approx([100.0 + i for i in range(7)])
    assert run.measure_tags() == [("discoverer", "cells_per_1000_steps"), ("discoverer", "new_levels"),
                                  ("merchant", "shops_entered"), ("merchant", "items_sold")]
    report = build_report([tmp_path], tmp_path / "report")
    out = tmp_path / "report"
    md = (out / "results.md").read_text()
    for name in CURVES:
        assert (out / name).stat().st_size > 1000, name
        assert f"({name})" in md, name
    assert "| run1 | discoverer | cells_per_1000_steps (main) | 40 | 7 | 3500 |" in md
    assert "| run1 | merchant | items_sold (main) | 4 | 7 | 3500 |" in md
    assert "| run1 | merchant | shops_entered | 0.5 |" in md
    # episode statistics: length (final mean of 102..106), intrinsic sum, switches, ..., errors
    assert "| run1 | 104 | 1 | 2 | n/a | n/a | 0 |" in md
    assert "Warning" not in md
    assert all(p.exists() for p in report.files)


def test_figures_without_data_are_left_out(tmp_path):
    write_episode_stats(tmp_path / "skill_policy" / "run1", with_len=False, with_measures=False)
    out = tmp_path / "report"
    build_report([tmp_path], out)
    md = (out / "results.md").read_text()
    for name in (LENGTH_PNG, MEASURES_PNG):
        assert not (out / name).exists() and name not in md
    assert (out / RETURN_PNG).is_file() and "Skill measures during training" not in md


def write_eval_json(root: Path, task: str, errors: int | None, mean: float = 0.5) -> Path:
    data = {"task": task, "measure": "success", "mean": mean, "stderr": 0.1, "episodes": 4,
            "experiment": "exp", "code_seed": 42}
    if errors is not None:
        data["meta_policy_errors"] = errors
    path = root / "exp" / "eval" / f"{task}_seed42.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_meta_policy_errors_column_and_warning(tmp_path, caplog):
    write_eval_json(tmp_path, "gnomish", 3)
    write_eval_json(tmp_path, "delphi", 0)
    write_eval_json(tmp_path, "minetown", None)  # a file from before the errors were counted
    results = {r.task: r for r in find_eval_results(tmp_path)}
    assert results["gnomish"].meta_policy_errors == 3 and results["minetown"].meta_policy_errors is None
    table = results_table(list(results.values()), paper=False)
    assert "| gnomish | success | 50.0% +- 10.0 | n/a | 4 | 3 |" in table
    assert "| delphi | success | 50.0% +- 10.0 | n/a | 4 | 0 |" in table
    assert "| minetown | success | 50.0% +- 10.0 | n/a | 4 |  |" in table
    with caplog.at_level(logging.WARNING, logger="orchestration.report"):
        report = build_report([tmp_path], tmp_path / "report", plots=False)
    warning = [line for line in report.markdown.splitlines() if line.startswith("**Warning:**")]
    assert len(warning) == 1 and "gnomish" in warning[0] and "delphi" not in warning[0]
    assert "meta-policy raised" in caplog.text and "gnomish" in caplog.text


def test_no_meta_policy_warning_when_no_errors(tmp_path):
    write_eval_json(tmp_path, "gnomish", 0)
    write_eval_json(tmp_path, "delphi", None)
    assert "Warning" not in build_report([tmp_path], None).markdown


SKILL_REPORT_MD = """# Skill report

Episodes per skill and policy: 2

| skill | main measure | trained | untrained | random |
|---|---|---|---|---|
| discoverer | cells_per_1000_steps | 120.0 [100.0, 140.0] | 80.0 [70.0, 90.0] | 60.0 [50.0, 70.0] |
| merchant | items_sold | 0.50 [0.00, 1.00] | 0.00 [0.00, 0.00] | 0.00 [0.00, 0.00] |

![skills](skill_report.png)
"""


def write_skill_report_json(exp: Path) -> None:
    def entry(mean: float) -> dict:
        return {"measures": {"items_sold": {"mean": mean, "ci95": [mean - 0.5, mean + 0.5], "values": [mean]}}}

    exp.mkdir(parents=True, exist_ok=True)
    (exp / "skill_report.json").write_text(json.dumps({
        "policy_dir": str(exp), "episodes": 2,
        "skills": {"merchant": {"main_measure": "items_sold",
                                "policies": {"trained": entry(1.5), "untrained": entry(0.5), "random": entry(0.0)}}}}))


def test_skill_report_section_with_table_and_image(tmp_path):
    exp = tmp_path / "skill_policy" / "exp"
    write_eval_json(tmp_path / "skill_policy", "gnomish", 0)
    (exp / "skill_report.md").write_text(SKILL_REPORT_MD)
    write_skill_report_json(exp)
    # the pipeline's record of its skill_report phase has the same name: not a report
    (tmp_path / ".pipeline").mkdir()
    (tmp_path / ".pipeline" / "skill_report.json").write_text('{"phase": "skill_report", "seconds": 1.0}')
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(exp / "skill_report.png")
    plt.close(fig)
    out = tmp_path / "report"
    report = build_report([tmp_path], out)
    md = (out / "results.md").read_text()
    assert f"## {SKILL_REPORT_HEADING}" in md
    assert "| discoverer | cells_per_1000_steps | 120.0 [100.0, 140.0] | 80.0 [70.0, 90.0] |" in md
    assert "| merchant | items_sold | 0.50 [0.00, 1.00] |" in md
    assert "Episodes per skill and policy: 2" in md and "\n### Skill report\n" in md  # moved under ours
    assert "![skills]" not in md  # its link is relative to the experiment folder
    assert (out / "skill_report.png").read_bytes() == (exp / "skill_report.png").read_bytes()
    assert "(skill_report.png)" in md and out / "skill_report.png" in report.files
    assert md.index(SKILL_REPORT_HEADING) > md.index("## Zero-shot evaluation")
    assert ".pipeline" not in md and "no table" not in md


def test_skill_report_table_from_json_and_absent_report(tmp_path):
    write_eval_json(tmp_path, "gnomish", 0)
    assert SKILL_REPORT_HEADING not in build_report([tmp_path], tmp_path / "r0").markdown
    write_skill_report_json(tmp_path / "exp")
    md = build_report([tmp_path], tmp_path / "r1", plots=False).markdown
    assert SKILL_REPORT_HEADING in md
    # the file records no interval method (Student's t) and one value per measure: its bounds, held at 0
    assert "| merchant | items_sold | 1.5 [1, 2] | 0.5 [0, 1] | 0 [0, 0.5] |" in md
    assert not (tmp_path / "r1" / "skill_report.png").exists()


def _write_rising_run(exp_dir: Path, last_step: int) -> None:
    """A run whose descender share is 0 for the first half of its steps and 0.4 after; episode length 100 then 500."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(exp_dir / ".summary" / "0"))
    for step in range(0, last_step + 1, last_step // 10):
        late = step > last_step // 2
        writer.add_scalar("skills/descender_share", 0.4 if late else 0.0, step)
        writer.add_scalar("skills/discoverer_share", 0.6 if late else 1.0, step)
        writer.add_scalar("len/len", 500.0 if late else 100.0, step)
        writer.add_scalar("messages/empty_share", 0.25, step)
    writer.close()


def test_report_compares_the_first_and_last_window_of_each_run(tmp_path):
    _write_rising_run(tmp_path / "long", 2_000_000)
    _write_rising_run(tmp_path / "short", 100_000)
    md = build_report([tmp_path], tmp_path / "out", plots=False, window=500_000).markdown
    section = md.split("### First and last window of training")[1].split("###")[0]
    # the long run: 500k windows cover its first 3 and last 3 points (0, 200k, 400k / 1.6M, 1.8M, 2M)
    assert "| long | 500,000 | descender: share of steps | 0 (3) | 0.4 (3) |" in section
    assert "| long | 500,000 | episode length | 100 (3) | 500 (3) |" in section
    assert "| long | 500,000 | steps with an empty message | 0.25 (3) | 0.25 (3) |" in section
    # the short run is shorter than four windows: a quarter of its length (25k), so the windows do not overlap
    assert "| short | 25,000 | descender: share of steps | 0 (3) | 0.4 (3) |" in section
    # skills never active are left out
    assert "merchant: share" not in section


def test_report_says_where_a_tag_starts_late_and_shows_no_change_across_overlapping_windows(tmp_path):
    """A skill first active at 32,768 env steps of a 40,960-step run: its two points lie in both windows; the
    table says so and where it starts, instead of the same mean twice as if nothing changed."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "smoke" / ".summary" / "0"))
    for step in range(0, 40_961, 4_096):
        writer.add_scalar("len/len", 100.0, step)
        writer.add_scalar("skills/discoverer_share", 1.0, step)
    for step in (32_768, 40_960):
        writer.add_scalar("skills/descender_share", 0.2, step)
        writer.add_scalar("measures/descender/levels_descended_mean", 0.0, step)
    writer.close()
    md = build_report([tmp_path], tmp_path / "out", plots=False).markdown
    section = md.split("### First and last window of training")[1].split("###")[0]
    assert ("| smoke | 10,240 | descender: levels_descended | overlaps the last window (2 of its 2 points), first "
            "logged at 32,768 env steps | 0 (2) |") in section
    assert "| smoke | 10,240 | episode length | 100 (3) | 100 (3) |" in section
    assert "first logged at\" names a tag that starts after the run's first window" in section


def test_report_refuses_a_window_below_one(tmp_path, capsys):
    from scripts.report import main

    _write_rising_run(tmp_path / "run", 100_000)
    assert main(["--train_dir", str(tmp_path), "--window", "0", "--no_plots"]) == 2
    assert "--window" in capsys.readouterr().err
