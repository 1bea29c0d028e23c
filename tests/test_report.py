"""scripts.report: evaluation JSONs, training summaries and reward metrics into Markdown and plots;
the paper's numbers in one place."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from common.estimates import MIN_VALIDATION_PAIRS
from common.vocabulary import EVAL_TASKS, SKILLS, TASK_MEASURE
from orchestration.paper_results import PAPER_RESULTS, format_value
from orchestration.report import (
    ReportError,
    build_report,
    find_eval_results,
    find_training_runs,
    load_eval_result,
    results_table,
)
from rl_baseline.evaluation import EpisodeResult, summarize, write_results
from rlaif.train_reward import METRICS_HEADER
from scripts import report as report_cli


def write_eval(root: Path, experiment: str, task: str, successes: list[bool], counts: list[float]) -> Path:
    episodes = [EpisodeResult(success=s, count=c, value=c, length=100 + i,
                              skill_share={k: (1.0 if k == "discoverer" else 0.0) for k in SKILLS})
                for i, (s, c) in enumerate(zip(successes, counts))]
    summary = summarize(task, TASK_MEASURE[task], episodes, SKILLS)
    summary.update(code_seed=42, experiment=experiment, checkpoint="x.pth", env_steps=5000, deterministic=False)
    stem = root / experiment / "eval" / f"{task}_seed42"
    write_results(stem, summary, SKILLS)
    return stem.with_suffix(".json")


def write_reward_metrics(root: Path, skill: str, val_accs: list[float], val_pairs: int | None = 120) -> Path:
    """A reward run's metrics.csv; ``val_pairs=None`` writes it without the column (a file of an earlier run)."""
    path = root / f"llama3_{skill}_default" / "reward_metrics" / "metrics.csv"
    path.parent.mkdir(parents=True)
    header = [k for k in METRICS_HEADER if val_pairs is not None or k != "val_pairs"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i, acc in enumerate(val_accs):
            row = {"epoch": i + 1, "iteration": 10 * (i + 1), "train_loss": 0.6, "train_acc": 0.7,
                   "val_loss": 0.65, "val_acc": acc, "val_pairs": val_pairs}
            w.writerow([row[k] for k in header])
    return path


def test_reward_table_gives_each_accuracy_its_pair_count_and_flags_too_few(tmp_path):
    """A validation accuracy of 100% on 2 pairs read as a finished reward model: the count and a flag say what
    it rests on; an earlier file without the count is still read, its count unknown."""
    write_reward_metrics(tmp_path, "descender", [0.5, 1.0], val_pairs=2)
    write_reward_metrics(tmp_path, "merchant", [0.5, 0.8], val_pairs=120)
    write_reward_metrics(tmp_path, "worshipper", [0.5, 0.75], val_pairs=None)
    write_reward_metrics(tmp_path, "ascender", [float("nan")] * 2, val_pairs=0)  # no decided validation pair
    md = build_report([tmp_path], None, plots=False).markdown
    assert "| llama3_descender_default | descender | 20 | 70.0% | 100.0% (n=2, too few) |" in md
    assert "| llama3_merchant_default | merchant | 20 | 70.0% | 80.0% (n=120) |" in md
    assert "| llama3_worshipper_default | worshipper | 20 | 70.0% | 75.0% (n=?) |" in md
    assert "| llama3_ascender_default | ascender | 20 | 70.0% | n/a (n=0, too few) |" in md
    assert f"marks fewer than {MIN_VALIDATION_PAIRS}, too few to read as the model's accuracy" in md


def write_tensorboard(exp_dir: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(exp_dir / ".summary" / "0"))
    for step, share in ((1000, 0.9), (2000, 0.6), (3000, 0.5)):
        writer.add_scalar("skills/discoverer_share_mean", share, step)
        writer.add_scalar("skills/descender_share_mean", 1.0 - share, step)
        writer.add_scalar("intrinsic/discoverer_mean_mean", share / 10, step)
        writer.add_scalar("perf/_fps", 100.0, step)  # not a skill statistic: ignored
    writer.close()


def test_paper_numbers_cover_every_eval_task_and_format_by_measure():
    assert tuple(PAPER_RESULTS) == EVAL_TASKS
    assert PAPER_RESULTS["gnomish"].formatted() == "46.0% +- 1.7"
    assert PAPER_RESULTS["buc"].formatted() == "1.60 +- 0.01"
    assert PAPER_RESULTS["minetown"].formatted() == "7.2% +- 0.5"
    assert format_value("success", float("nan")) == "n/a"
    assert format_value("count", 0.5) == "0.50"


def test_results_table_from_evaluation_files(tmp_path):
    path = write_eval(tmp_path, "e1", "gnomish", [True, False, True, True], [0, 0, 0, 0])
    write_eval(tmp_path, "e1", "transactions", [False, False], [1.0, 2.0])
    (tmp_path / "e1" / "eval" / "delphi_seed42.json").write_text("{not json")
    results = find_eval_results(tmp_path)
    assert [r.task for r in results] == ["gnomish", "transactions"]  # the broken file is skipped
    g = load_eval_result(path)
    assert g.mean == pytest.approx(0.75) and g.episodes == 4 and g.experiment == "e1" and g.code_seed == 42
    table = results_table(results)
    lines = table.splitlines()
    assert lines[0].startswith("| task | measure | value +- s.e. | 95% interval | episodes | meta-policy errors | MaestroMotif")
    assert "| gnomish | success | 75.0% +- 25.0 | [30.1%, 95.4%] | 4 |  | 46.0% +- 1.7 |" in lines
    assert "| transactions | count | 1.50 +- 0.50 | [1.00, 2.00] | 2 |  | 0.66 +- 0.01 |" in lines
    assert "NOT comparable" in table
    assert "MaestroMotif" not in results_table(results, paper=False)


def test_several_experiments_get_their_own_column(tmp_path):
    write_eval(tmp_path, "a", "gnomish", [True], [0])
    write_eval(tmp_path, "b", "gnomish", [False], [0])
    table = results_table(find_eval_results(tmp_path))
    assert table.splitlines()[0] == ("| task | measure | MaestroMotif (a) | MaestroMotif (b) | MaestroMotif (paper) "
                                     "| best baseline (paper) |")
    assert "| gnomish | success | 100.0% +- 0.0 (1) | 0.0% +- 0.0 (1) | 46.0% +- 1.7 | Motif 9% |" in table
    assert "- **MaestroMotif (a)**: policy trained 5,000 env steps; 1 evaluation episodes per task" in table


def test_reference_evaluations_get_their_own_columns_never_the_methods(tmp_path):
    """scripts.main --eval_policy untrained/random writes beside eval/: the report shows each as a
    reference column, so a random policy's score is never read as MaestroMotif's."""
    runs = tmp_path / "runs"
    write_eval(runs, "a", "gnomish", [True, True], [0, 0])
    for kind, wins in (("random", [False, False]), ("untrained", [True, False])):
        src = write_eval(tmp_path / kind, "a", "gnomish", wins, [0, 0])
        dest = runs / "a" / f"eval_{kind}" / src.name
        dest.parent.mkdir(parents=True)
        dest.write_text(src.read_text())
    results = find_eval_results(runs)
    assert sorted(r.method for r in results) == ["MaestroMotif", "random actions (reference)",
                                                "untrained network (reference)"]
    table = results_table(results, paper=False)
    head = table.splitlines()[0]
    assert "MaestroMotif (a)" in head and "random actions (reference)" in head and "untrained network (reference)" in head
    assert "| gnomish | success | 100.0% +- 0.0 (2) |" in table and "0.0% +- 0.0 (2)" in table


def test_a_progress_trained_experiment_is_labelled_the_diagnostic_not_the_method(tmp_path):
    """--skill_reward progress pays each skill its own measure: its column must not read as MaestroMotif's."""
    write_eval(tmp_path, "bound", "gnomish", [False], [0])
    write_eval(tmp_path, "method", "gnomish", [False], [0])
    (tmp_path / "bound" / "config.json").write_text(json.dumps({"skill_reward": "progress"}))
    (tmp_path / "method" / "config.json").write_text(json.dumps({"skill_reward": "model"}))
    head = results_table(find_eval_results(tmp_path), paper=False).splitlines()[0]
    assert "progress diagnostic (bound; not the method)" in head and "MaestroMotif (method)" in head
    assert "MaestroMotif (bound)" not in head


def write_cost(folder: Path, label: str, **figures) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cost.json").write_text(json.dumps({"method": folder.name, "label": label, **figures}))


def test_each_baseline_run_gets_a_labelled_column_and_a_cost_row(tmp_path):
    from orchestration.report import build_report

    run = tmp_path / "run"
    write_eval(run / "skill_policy", "smoke", "gnomish", [True, False], [0, 0])
    write_eval(run / "skill_policy", "smoke", "buc", [False, False], [1.0, 3.0])
    motif = run / "baselines" / "motif_task"
    for task in ("gnomish", "buc"):  # one RL run per task, each named after its task
        write_eval(motif / "policy", task, task, [False, False], [0.0, 2.0])
    write_cost(motif, "Motif task-specific, heuristic stand-in annotator (no LLM)", llm_tokens=None,
               cpu_hours=0.05, gpu_hours=0.0, env_steps=8000, measured="wall-clock hours of the phases")
    scale = run / "baselines" / "ablation_annotator_scale"
    for size in ("8b", "70b"):  # one baseline, several runs: a column each
        write_eval(scale / size / "skill_policy", "scale", "gnomish", [True, True], [0, 0])
    write_cost(scale, "annotator scale, stand-in at every size", llm_tokens=None, cpu_hours=0.2, gpu_hours=0.0,
               env_steps=16000)
    llm = run / "baselines" / "llm_policy"
    write_eval(llm.parent, "llm_policy", "gnomish", [False], [0])
    data = json.loads((llm / "eval" / "gnomish_seed42.json").read_text())
    data.update(method="llm_policy", label="LLM policy, rule-based stand-in (no LLM)")
    (llm / "eval" / "gnomish_seed42.json").write_text(json.dumps(data))
    write_cost(llm, "LLM policy, rule-based stand-in (no LLM)", llm_tokens=1234, cpu_hours=0.01, gpu_hours=0.0,
               env_steps=300, measured="CPU time of the evaluating processes")
    (run / "baselines" / "broken").mkdir()
    (run / "baselines" / "broken" / "cost.json").write_text("{cut")

    md = build_report([run], tmp_path / "report", plots=False).markdown
    head = next(line for line in md.splitlines() if line.startswith("| task | measure |"))
    # short names from the baselines' registry, the run when a baseline has several, "stand-in" when its
    # label says so; the full label in the legend
    assert head == ("| task | measure | MaestroMotif (smoke) | Annotator scale [70b] (stand-in) "
                    "| Annotator scale [8b] (stand-in) | LLM policy (stand-in) "
                    "| Motif task-specific (stand-in) | MaestroMotif (paper) | best baseline (paper) |")
    assert "| gnomish | success | 50.0% +- 50.0 (2) | 100.0% +- 0.0 (2) | 100.0% +- 0.0 (2) | 0.0% +- 0.0 (1) | 0.0% +- 0.0 (2) |" in md
    assert "| buc | count | 2.00 +- 1.00 (2) |  |  |  | 1.00 +- 1.00 (2) | 1.60 +- 0.01 | Motif 0.05 |" in md
    assert "policies trained" not in md  # each column's runs share one size
    assert ("- **Motif task-specific (stand-in)**: Motif task-specific, heuristic stand-in annotator (no LLM); "
            "policy trained 5,000 env steps; 2 evaluation episodes per task") in md
    assert "- **Annotator scale [8b] (stand-in)**: annotator scale, stand-in at every size; policy trained" in md
    # the cost of each method, as its cost.json measured it
    assert "## Cost per method" in md
    assert ("| motif_task | Motif task-specific, heuristic stand-in annotator (no LLM) | not measured (stand-in) | "
            "0.05 | 0 | 8,000 | wall-clock hours of the phases |") in md
    assert "| llm_policy | LLM policy, rule-based stand-in (no LLM) | 1,234 | 0.01 | 0 | 300 |" in md
    assert "broken/cost.json" in md.split("## Files skipped")[1]


def test_a_runs_column_names_who_labelled_its_reward_models_when_they_live_elsewhere(tmp_path):
    """An experiment trained on another folder's reward models (--reward_dir): the report follows each model's
    checkpoint to the annotation metadata of its labels, so a stand-in's run is never headed as the method's."""
    import torch

    def reward_model(name: str, meta: dict) -> str:
        prefs = tmp_path / "pipeline" / "preference"
        prefs.mkdir(parents=True, exist_ok=True)
        (prefs / f"{name}.meta.json").write_text(json.dumps(meta))
        ckpt = tmp_path / "pipeline" / "skill_rewards" / name / "checkpoint_p0"
        ckpt.mkdir(parents=True)
        torch.save({"model": {}, "reward_mean": 0.0, "reward_var": 1.0, "preferences": str(prefs / f"{name}.npy"),
                    "layout": "observations"},
                   ckpt / "checkpoint_000000010.pth")
        return str(ckpt.parent)

    stand_in = reward_model("llama3_descender_default", {"backend": "heuristic", "stand_in": True, "model": "m"})
    llm = reward_model("llama3_discoverer_default", {"backend": "vllm", "stand_in": False, "model": "llama-70b"})
    runs = tmp_path / "runs"
    for experiment, dirs in (("standin", [llm, stand_in]), ("llm", [llm]), ("moved", [str(tmp_path / "gone")])):
        write_eval(runs, experiment, "gnomish", [False], [0])
        (runs / experiment / "config.json").write_text(json.dumps({"skill_reward": "llm", "reward_dir": str(dirs)}))
    head = results_table(find_eval_results(runs), paper=False).splitlines()[0]
    assert "MaestroMotif (standin, stand-in)" in head and "MaestroMotif (llm, llama-70b)" in head
    assert "MaestroMotif (moved)" in head  # nothing to tell from: no claim either way


def test_maestromotif_column_says_when_the_stand_in_annotated_and_baseline_runs_keep_their_names(tmp_path):
    """A pipeline run whose annotation markers name the heuristic backend: MaestroMotif's column says
    stand-in; training runs of the same experiment name in different baselines stay apart."""
    from orchestration.report import build_report

    run = tmp_path / "run"
    write_eval(run / "skill_policy", "smoke", "gnomish", [True, False], [0, 0])
    write_eval(run / "baselines" / "motif_task" / "policy", "gnomish", "gnomish", [False], [0])
    (run / ".pipeline").mkdir(parents=True)
    (run / ".pipeline" / "annotate__discoverer.json").write_text(json.dumps(
        {"seconds": 3.0, "command": "python -m scripts.annotate_pairs --backend heuristic --skill discoverer"}))
    for folder in (run / "skill_policy" / "smoke", run / "baselines" / "ablation_annotator_scale" / "8b" /
                   "skill_policy" / "smoke"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "skill_stats.json").write_text(json.dumps({"env_steps": 5, "means": {"skills/merchant_share": 0.5}}))
    md = build_report([run], tmp_path / "report", plots=False).markdown
    assert "| task | measure | MaestroMotif (smoke, stand-in) | Motif task-specific |" in md
    assert "heuristic stand-in annotator (rules, not an LLM)" in md
    assert {r.experiment for r in find_training_runs(run)} == {"smoke", "ablation_annotator_scale/8b/smoke"}

    (run / ".pipeline" / "annotate__discoverer.json").write_text(json.dumps(
        {"seconds": 3.0, "command": "python -m scripts.annotate_pairs --backend vllm --skill discoverer"}))
    md = build_report([run], tmp_path / "report2", plots=False).markdown
    assert "| task | measure | MaestroMotif (smoke) | Motif task-specific |" in md

    # a run annotated by a real model (scripts.pipeline --annotator smollm2): its heading and legend name it
    (run / ".pipeline" / "annotate__discoverer.json").write_text(json.dumps(
        {"seconds": 3.0, "command": "python -m scripts.annotate_pairs --goal_key discoverer --backend llamacpp "
                                    "--no_progress --model smollm2-135m --max_unusable_share 1"}))
    md = build_report([run], tmp_path / "report3", plots=False).markdown
    assert "| task | measure | MaestroMotif (smoke, smollm2-135m) | Motif task-specific |" in md
    assert "skill rewards from labels by the language model smollm2-135m" in md
    # ... asked for constrained answers: the heading says so too
    (run / ".pipeline" / "annotate__discoverer.json").write_text(json.dumps(
        {"seconds": 3.0, "command": "python -m scripts.annotate_pairs --goal_key discoverer --backend llamacpp "
                                    "--no_progress --model smollm2-135m --max_unusable_share 1 --answer_mode "
                                    "constrained --max_tokens 8"}))
    md = build_report([run], tmp_path / "report4", plots=False).markdown
    assert "| MaestroMotif (smoke, smollm2-135m, constrained answers) |" in md


def test_training_series_from_tensorboard_and_skill_stats(tmp_path):
    exp = tmp_path / "skill_policy" / "run1"
    write_tensorboard(exp)
    only_json = tmp_path / "skill_policy" / "run2"
    only_json.mkdir(parents=True)
    (only_json / "skill_stats.json").write_text(json.dumps(
        {"env_steps": 777, "means": {"skills/merchant_share": 0.25, "intrinsic/merchant_mean": 0.01}}))
    runs = {r.experiment: r for r in find_training_runs(tmp_path)}
    steps, shares = runs["run1"].skill_series("share", "discoverer")
    assert steps == [1000, 2000, 3000] and shares == pytest.approx([0.9, 0.6, 0.5])
    assert runs["run1"].skill_series("intrinsic", "discoverer")[1] == pytest.approx([0.09, 0.06, 0.05])
    assert not any(tag.startswith("perf/") for tag in runs["run1"].series)
    assert runs["run2"].skill_series("share", "merchant") == ([777], [0.25])
    assert runs["run2"].skill_series("share", "discoverer") == ([], [])


@pytest.mark.slow
def test_report_cli_writes_markdown_and_plots(tmp_path, capsys):
    root = tmp_path / "run"
    for task in ("gnomish", "buc"):
        write_eval(root / "skill_policy", "smoke", task, [True, False], [1.0, 3.0])
    write_tensorboard(root / "skill_policy" / "smoke")
    for i, skill in enumerate(SKILLS):
        write_reward_metrics(root / "skill_rewards", skill, [0.5, 0.6 + 0.05 * i])
    out = tmp_path / "report"
    assert report_cli.main(["--train_dir", str(root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    md = (out / "results.md").read_text()
    assert "| gnomish | success | 50.0% +- 50.0 | [9.5%, 90.5%] | 2 |  | 46.0% +- 1.7 |" in md
    assert "| buc | count | 2.00 +- 1.00 | [1.00, 3.00] | 2 |  | 1.60 +- 0.01 |" in md
    assert "| llama3_merchant_default | merchant | 20 | 70.0% | 80.0% (n=120) |" in md
    assert "| smoke | discoverer | 50.0% | 0.0500 |" in md
    for name in ("success.png", "skill_training.png", "reward_accuracy.png"):
        assert (out / name).stat().st_size > 1000 and f"({name})" in md
    assert "| gnomish | success |" in printed


def test_report_of_nothing_fails_clearly(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert report_cli.main(["--train_dir", str(tmp_path / "empty")]) == 2
    assert "found nothing to report" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report").exists()
    assert report_cli.main(["--train_dir", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    with pytest.raises(ReportError, match="not an evaluation result"):
        bad = tmp_path / "x.json"
        bad.write_text(json.dumps({"hello": 1}))
        load_eval_result(bad)


def test_only_markdown_without_plots(tmp_path):
    write_eval(tmp_path / "p", "e", "price", [False], [2.0])
    report = build_report([tmp_path / "p"], tmp_path / "out", plots=False)
    assert [p.name for p in report.files] == ["results.md"]
    assert "| price | count | 2.00 +- 0.00 | n/a | 1 |  | 0.47 +- 0.01 |" in report.markdown
