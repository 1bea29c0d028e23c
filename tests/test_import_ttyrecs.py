"""Phase 0 from recordings: status-line parsing and importing ttyrecs the game itself wrote."""
from __future__ import annotations

import re

import numpy as np
import pytest

from common.nethack.messages import MESSAGE_LEN
from rl_baseline.collect.explorer import ExplorerPolicy
from rl_baseline.collect.rollouts import stats_from_blstats
from rl_baseline.collect.ttyrecs import parse_status_line, read_frame
from rlaif.dataset import HUNGER_NAMES, load_dataset
from scripts.import_ttyrecs import main


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _screen(top: str, status: str, row: int = 23, extra: dict | None = None) -> np.ndarray:
    chars = np.full((24, 80), ord(" "), dtype=np.uint8)
    for r, text in {0: top, row: status, **(extra or {})}.items():
        chars[r, : len(text)] = np.frombuffer(text.encode("latin-1"), dtype=np.uint8)
    return chars


def test_status_line_parsing():
    stats, turn = parse_status_line("Dlvl:3 $:42 HP:12(15) Pw:4(6) AC:4 Xp:2/25 T:830 Hungry")
    assert stats.tolist() == [3, 42, 12, 15, 2, HUNGER_NAMES.index("hungry")] and turn == 830
    stats, turn = parse_status_line("Dlvl:12 $:0 HP:3(40) Pw:10(10) AC:-2 Exp:9 Weak Burdened Conf")
    assert stats.tolist() == [12, 0, 3, 40, 9, HUNGER_NAMES.index("weak")] and turn == -1
    stats, _ = parse_status_line("Dlvl:1 $:0 HP:14(14) Pw:4(4) AC:4 Xp:1/0 T:1")
    assert stats[5] == HUNGER_NAMES.index("not hungry")
    stats, _ = parse_status_line("Dlvl:2 $:7 HP:9(9) Pw:1(1) AC:7 Xp:1/3 T:99 Satiated Stressed")
    assert stats[5] == HUNGER_NAMES.index("satiated")
    assert parse_status_line("Agent the Candidate  St:17 Dx:15 Co:13 In:9 Wi:12 Ch:9 Neutral S:0") is None
    assert parse_status_line("You see here 3 gold pieces.") is None


def test_frames_with_windows_or_without_status_are_skipped():
    status = "Dlvl:1 $:5 HP:14(14) Pw:4(4) AC:4 Xp:1/0 T:10"
    text, stats, turn = read_frame(_screen("You kill the newt!--More--", status))
    assert text == "You kill the newt!" and stats.tolist()[:2] == [1, 5] and turn == 10
    assert read_frame(_screen("You kill the newt!", "")) is None
    assert read_frame(_screen("          The Dungeons of Doom:", status)) is None  # a text window
    assert read_frame(_screen("Things that are here:", status, extra={5: " a dagger", 6: " (end)"})) is None


def _record_games(savedir, episodes: int = 3, steps: int = 250):
    """Plays a few seeded games with NLE recording ttyrecs; returns what the game showed."""
    from rl_baseline.envs import make_monk_env

    env = make_monk_env(max_episode_steps=steps, save_ttyrec_every=1, savedir=str(savedir))
    shown_messages: list[str] = []
    shown_stats: set[tuple] = set()
    try:
        for episode in range(episodes):
            env.unwrapped.seed(300 + episode, 400 + episode, False)
            obs, info = env.reset()
            policy = ExplorerPolicy(np.random.default_rng(episode))
            done = False
            while True:
                shown_messages += [info.get("message", "")] + list(info.get("messages", []))
                shown_stats.add(tuple(stats_from_blstats(obs["blstats"]).tolist()))
                if done:
                    break
                obs, _, terminated, truncated, info = env.step(policy.act(obs))
                done = terminated or truncated
    finally:
        env.close()
    return shown_messages, shown_stats


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("recordings")
    messages, stats = _record_games(root / "nle_data" / "run0")
    return root / "nle_data", messages, stats


@pytest.mark.game_calendar
def test_import_recorded_games_yields_what_the_game_showed(recorded, tmp_path, capsys):
    ttyrec_dir, shown_messages, shown_stats = recorded
    args = ["--ttyrec_dir", str(ttyrec_dir), "--skill", "discoverer", "--num_pairs", "60", "--sample_prob", "1",
            "--uninformative_keep_prob", "1", "--max_samples_per_game", "50", "--no_progress", "--log_level", "WARNING",
            "--seed", "4"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    ds = load_dataset(tmp_path / "a" / "discoverer.npz")
    assert ds.messages.shape == (120, 2, MESSAGE_LEN) and ds.stats.shape == (120, 2, 6)
    assert ds.meta["source"] == "ttyrec" and ds.meta["games"] == 3 and ds.meta["games_sampled"] == 3

    corpus = " | ".join(_norm(m) for m in shown_messages if m)
    imported = {ds.message_text(i, j) for i in range(len(ds)) for j in range(2)} - {""}
    assert len(imported) >= 5
    not_shown = [m for m in imported if _norm(m) not in corpus]
    assert not not_shown, f"imported messages the game never showed: {not_shown}"
    # the status line read from the screen matches the game's own blstats
    rows = {tuple(v) for v in ds.stats.reshape(-1, 6).tolist()}
    assert len(rows & shown_stats) >= 0.9 * len(rows), sorted(rows - shown_stats)

    # same input and seed: same bytes; an existing output is refused
    assert main(args + ["--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a" / "discoverer.npz").read_bytes() == (tmp_path / "b" / "discoverer.npz").read_bytes()
    capsys.readouterr()
    assert main(args + ["--out", str(tmp_path / "a")]) == 2
    assert "already exists" in capsys.readouterr().err


def test_import_bad_input(recorded, tmp_path, capsys):
    ttyrec_dir, _, _ = recorded
    base = ["--no_progress", "--log_level", "WARNING", "--out", str(tmp_path / "o")]
    assert main(["--skill", "discoverer", "--num_pairs", "5", *base]) == 2
    assert "--ttyrec_dir" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--ttyrec_dir", str(empty), "--skill", "discoverer", "--num_pairs", "5", *base]) == 2
    assert "no recordings found" in capsys.readouterr().err
    assert main(["--ttyrec_dir", str(ttyrec_dir), "--skill", "bard", "--num_pairs", "5", *base]) == 2
    assert "unknown skill" in capsys.readouterr().err
    assert main(["--ttyrec_dir", str(ttyrec_dir), "--skill", "discoverer", "--num_pairs", "0", *base]) == 2
    assert "num_pairs" in capsys.readouterr().err
    # more pairs than the recordings hold: an error, or what there is with --allow_fewer
    many = ["--ttyrec_dir", str(ttyrec_dir), "--skill", "merchant", "--num_pairs", "100000", *base]
    assert main(many) == 2
    assert "only" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main(many + ["--allow_fewer"]) == 0
    ds = load_dataset(tmp_path / "o" / "merchant.npz")
    assert 0 < ds.num_pairs < 100000 and len(ds) % 2 == 0


def test_kept_database_is_reused(recorded, tmp_path, capsys):
    ttyrec_dir, _, _ = recorded
    db = tmp_path / "nld.db"
    common = ["--skill", "ascender", "--num_pairs", "20", "--sample_prob", "0.5", "--no_progress",
              "--log_level", "WARNING", "--db", str(db), "--dataset_name", "mine"]
    assert main(["--ttyrec_dir", str(ttyrec_dir), *common, "--out", str(tmp_path / "a")]) == 0
    assert db.exists()
    capsys.readouterr()
    assert main(["--ttyrec_dir", str(ttyrec_dir), *common, "--out", str(tmp_path / "b")]) == 2
    assert "already has a dataset named 'mine'" in capsys.readouterr().err
    assert main([*common, "--out", str(tmp_path / "c")]) == 0  # read from the database only
    assert (tmp_path / "a" / "ascender.npz").read_bytes() == (tmp_path / "c" / "ascender.npz").read_bytes()
