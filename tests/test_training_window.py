"""scripts.training_window: the "over training" figures of docs/results.md from a run's tensorboard files."""
from __future__ import annotations

from orchestration.report import window_means
from scripts.training_window import main


def test_window_means_split_the_run_into_its_first_and_last_steps():
    steps = [0, 100, 200, 300, 400, 500]
    values = [1.0, 2.0, float("nan"), 4.0, 5.0, 6.0]
    assert window_means((steps, values), 150) == (1.5, 2, 5.5, 2)


def test_reads_a_runs_tensorboard_files_and_refuses_unknown_tags(tmp_path, capsys):
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
    # the error names the missing tag and lists the ones the run has
    assert capsys.readouterr().err.startswith(
        "error: --tags: not in " + str(tmp_path / "run") + ": messages/nothing; its tags: intrinsic/descender_return, "
        "messages/empty_share")
    (tmp_path / "empty").mkdir()
    assert main(["--policy_dir", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --policy_dir {tmp_path / 'empty'}: no tensorboard summaries")


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


def _smoke_like_run(folder) -> None:
    """The tags a short smoke or ci run writes: the descender never ran, so it has no descender tags."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(0, 40_001, 4_000):
        writer.add_scalar("len/len", 100 + step / 400, step)
        writer.add_scalar("skills/switches", 1.0, step)
        writer.add_scalar("skills/discoverer_share", 1.0, step)
        writer.add_scalar("intrinsic/discoverer_return", step / 40_000, step)
        writer.add_scalar("measures/discoverer/cells_per_1000_steps_mean", 50 + step / 1000, step)
        writer.add_scalar("messages/empty_share", 0.5, step)
    writer.close()


def test_a_window_longer_than_the_run_shrinks_to_a_quarter_with_a_note(tmp_path, capsys):
    """The default 500,000-step window on a 40,000-step run printed identical first and last means without a word."""
    _smoke_like_run(tmp_path / "run")
    assert main(["--policy_dir", str(tmp_path / "run"), "--tags", "intrinsic/discoverer_return"]) == 0
    out = capsys.readouterr().out
    assert "note: the run spans 40,000 env steps, fewer than four --window 500,000" in out
    assert "each is a quarter of the run, 10,000 env steps" in out
    assert "| intrinsic/discoverer_return | 0.1 (3) | 0.9 (3) |" in out


def test_the_default_tags_work_on_a_smoke_run(tmp_path, capsys):
    """The default tags named the descender's statistics, so any smoke or ci run (where the descender never ran)
    exited 2 printing nothing useful; the defaults the run lacks are now left out with a note."""
    _smoke_like_run(tmp_path / "run")
    assert main(["--policy_dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "| intrinsic/discoverer_return | 0.1 (3) | 0.9 (3) |" in out
    assert "| measures/discoverer/cells_per_1000_steps | 54 (3) | 86 (3) |" in out
    assert "| messages/empty_share | 0.5 (3) | 0.5 (3) |" in out
    assert "note: not in this run, left out: measures/descender/levels_descended," in out
    assert "| measures/descender" not in out
    (tmp_path / "bare").mkdir()
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "bare"))
    writer.add_scalar("len/len", 1.0, 0)
    writer.close()
    assert main(["--policy_dir", str(tmp_path / "bare")]) == 2
    assert "none of the default tags is there; pass --tags (its tags: len/len)" in capsys.readouterr().err


def test_compares_runs_side_by_side_and_plots_their_tags(tmp_path, capsys):
    """Two runs' tags over training: each run's own first and last windows, and one PNG panel per tag with a curve
    per run (the progress run beside the stand-in-rewarded one)."""
    from PIL import Image
    from torch.utils.tensorboard import SummaryWriter

    _smoke_like_run(tmp_path / "a")
    writer = SummaryWriter(str(tmp_path / "b"))
    for step in range(0, 80_001, 8_000):
        writer.add_scalar("intrinsic/discoverer_return", 2.0, step)
    writer.close()
    png = tmp_path / "curves.png"
    assert main(["--policy_dir", str(tmp_path / "a"), "--compare", str(tmp_path / "b"), "--plot", str(png),
                 "--tags", "intrinsic/discoverer_return,len/len"]) == 0
    out = capsys.readouterr().out
    run_a, run_b = out.split(f"Run `{tmp_path / 'b'}`")
    assert "| intrinsic/discoverer_return | 0.1 (3) | 0.9 (3) |" in run_a
    assert "| intrinsic/discoverer_return | 2 (3) | 2 (3) |" in run_b and "| len/len | not logged |" in run_b
    with Image.open(png) as image:
        assert image.width > 800 and image.height > 200  # two panels side by side
    assert main(["--policy_dir", str(tmp_path / "a"), "--plot", str(tmp_path / "curves.txt")]) == 2
    assert main(["--policy_dir", str(tmp_path / "a"), "--compare", str(tmp_path / "none")]) == 2
    # a missing folder is named as missing (it was "no tensorboard summaries")
    assert f"--compare {tmp_path / 'none'}: no such folder" in capsys.readouterr().err


def test_until_reads_runs_of_different_lengths_at_one_budget(tmp_path, capsys):
    """--until: a 10M-step run and a 2M-step run compared at 2M, as if the longer one had stopped there."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(0, 1_000_001, 100_000):
        writer.add_scalar("len/len", step / 1000, step)
    writer.close()
    assert main(["--policy_dir", str(tmp_path / "run"), "--window", "200000", "--tags", "len/len",
                 "--until", "800000"]) == 0
    out = capsys.readouterr().out
    assert "800,000 env steps (read up to --until 800,000)" in out
    assert "| len/len | 100 (3) | 700 (3) |" in out  # the last window ends at 800k, not at 1M (900)
    assert main(["--policy_dir", str(tmp_path / "run"), "--until", "0"]) == 2
    assert "--until must be at least 1" in capsys.readouterr().err


def _late_descender_run(folder) -> None:
    """A smoke-sized run whose descender first ran at 32,768 env steps: its measure has two summaries, both late."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(0, 40_961, 4_096):
        writer.add_scalar("len/len", 100 + step / 400, step)
        writer.add_scalar("intrinsic/discoverer_return", step / 40_960, step)
    for step, value in ((32_768, 0.0), (40_960, 0.0)):
        writer.add_scalar("measures/descender/levels_descended_mean", value, step)
    writer.close()


def test_a_tag_that_starts_late_says_so_and_its_overlapping_windows_show_no_change(tmp_path, capsys):
    """A tag logged only in the run's last window has one set of points: its first window is not an earlier
    measurement, so no first mean is shown beside the last one, and where it starts is said."""
    _late_descender_run(tmp_path / "run")
    assert main(["--policy_dir", str(tmp_path / "run"),
                 "--tags", "intrinsic/discoverer_return,measures/descender/levels_descended"]) == 0
    out = capsys.readouterr().out
    assert ("| measures/descender/levels_descended | overlaps the last window (2 of its 2 points), first logged at "
            "32,768 env steps | 0 (2) |") in out
    assert "| intrinsic/discoverer_return | 0.1 (3) | 0.9 (3) |" in out  # a tag logged from the start: unchanged
    assert "note: Each tag's first window starts at its own first record" in out
    # shown alone, the late tag is still measured against the whole run, not against its own span
    assert main(["--policy_dir", str(tmp_path / "run"), "--tags", "measures/descender/levels_descended"]) == 0
    assert "overlaps the last window (2 of its 2 points), first logged at 32,768" in capsys.readouterr().out


def test_a_late_tag_with_separate_windows_gives_both_means_and_its_start(tmp_path, capsys):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(0, 1_000_001, 100_000):
        writer.add_scalar("len/len", 1.0, step)
        if step >= 500_000:
            writer.add_scalar("intrinsic/descender_return", step / 1_000_000, step)
    writer.close()
    assert main(["--policy_dir", str(tmp_path / "run"), "--window", "200000",
                 "--tags", "len/len,intrinsic/descender_return"]) == 0
    out = capsys.readouterr().out
    # its first window is its own first 200k env steps (500k to 700k), not the run's (where it has nothing)
    assert "| intrinsic/descender_return | 0.6 (3), first logged at 500,000 env steps | 0.9 (3) |" in out
    assert "| len/len | 1 (3) | 1 (3) |" in out


def test_tag_windows_count_the_points_the_two_windows_share():
    from orchestration.report import tag_windows

    w = tag_windows(([0, 100, 200, 300], [1.0, 2.0, 3.0, 4.0]), 150, run_start=0)
    assert (w.n_first, w.n_last, w.shared, w.late) == (2, 2, 0, False)
    w = tag_windows(([0, 100, 200, 300, 400], [1.0, 2.0, 3.0, 4.0, 5.0]), 200, run_start=0)
    assert w.shared == 1 and w.first_cell() == "overlaps the last window (1 of its 3 points)"
    w = tag_windows(([900, 1000], [0.0, 1.0]), 150, run_start=0)
    assert w.late and w.start == 900 and w.shared == 2
