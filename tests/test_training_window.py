"""scripts.training_window: the "over training" figures of docs/results.md from a run's tensorboard files."""
from __future__ import annotations

from orchestration.report import window_means
from scripts.training_window import main


def test_window_means_split_the_run_into_its_first_and_last_steps():
    steps = [0, 100, 200, 300, 400, 500]
    values = [1.0, 2.0, float("nan"), 4.0, 5.0, 6.0]
    assert window_means((steps, values), 150) == (1.5, 2, 5.5, 2)


def test_reads_a_runs_tensorboard_files_and_refuses_unknown_tags(tmp_path, capsys, caplog):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(0, 1_000_001, 100_000):
        writer.add_scalar("messages/empty_share", step / 2_000_000, step)
        writer.add_scalar("intrinsic/descender_return", 1.0 if step > 600_000 else 0.0, step)
    writer.close()
    assert main(["--policy_dir", str(tmp_path / "run"), "--window", "200000",
                 "--tags", "messages/empty_share,intrinsic/descender_return"]) == 0
    out = capsys.readouterr().out
    assert "| messages/empty_share | 0.05 (3) | 0.45 (3) |" in out
    assert "| intrinsic/descender_return | 0 (3) | 1 (3) |" in out
    assert main(["--policy_dir", str(tmp_path / "run"), "--tags", "messages/nothing"]) == 2
    assert "messages/nothing" in caplog.text
    assert main(["--policy_dir", str(tmp_path / "empty")]) == 2


def test_falls_back_to_the_observers_mean_tag(tmp_path, capsys):
    """Per-skill measures are logged only as `{tag}_mean` (our observer); the tag as written reads them."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(0, 1_000_001, 100_000):
        writer.add_scalar("measures/descender/levels_descended_mean", 0.5 if step > 500_000 else 0.0, step)
    writer.close()
    assert main(["--policy_dir", str(tmp_path / "run"), "--window", "200000",
                 "--tags", "measures/descender/levels_descended"]) == 0
    assert "| measures/descender/levels_descended | 0 (3) | 0.5 (3) |" in capsys.readouterr().out
