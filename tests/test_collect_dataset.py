"""Phase 0 collection: file format, determinism, the explorer's decisions, bad input."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from common.nethack.glyphs import S_ALTAR, S_CORR, S_DNSTAIR, S_HWALL, S_ROOM, S_VODOOR, S_VWALL, game_tables
from common.nethack.messages import MESSAGE_LEN
from rl_baseline.collect.config import CollectConfig, CollectError, ExplorerConfig, parse_policy_mix
from rl_baseline.collect.explorer import ExplorerPolicy, _LevelMemory
from rl_baseline.collect.pathing import read_map, shortest_path
from rl_baseline.collect.policies import RandomPolicy
from rl_baseline.collect.rollouts import collect_dataset, make_env, stats_from_blstats
from rlaif.dataset import HUNGER_NAMES, STAT_FIELDS, load_dataset
from scripts.collect_dataset import main

# small, fast settings: short episodes, many samples per step
SMALL = ["--max_episode_steps", "300", "--sample_prob", "0.3", "--uninformative_keep_prob", "1.0",
         "--max_samples_per_episode", "10", "--no_progress", "--log_level", "WARNING"]


def _run(tmp_path, name: str, *extra: str) -> int:
    return main(["--skill", "descender", "--out", str(tmp_path / name), *SMALL, *extra])


def test_file_format_and_byte_identical_reruns(tmp_path):
    args = ("--num_pairs", "25", "--policy_mix", "explorer:0.6,random:0.4", "--seed", "5")
    assert _run(tmp_path, "a", *args) == 0
    assert _run(tmp_path, "b", *args) == 0
    first, second = tmp_path / "a" / "descender.npz", tmp_path / "b" / "descender.npz"
    assert first.read_bytes() == second.read_bytes()

    ds = load_dataset(first)
    assert ds.messages.shape == (50, 2, MESSAGE_LEN) and ds.messages.dtype == np.uint8
    assert ds.stats.shape == (50, 2, len(STAT_FIELDS)) and ds.stats.dtype == np.int32
    assert ds.num_pairs == 25
    depth, gold, hp, hpmax, xp, hunger = (ds.stats[..., i] for i in range(6))
    assert (depth >= 1).all() and (gold >= 0).all() and (hpmax >= 1).all() and (hp <= hpmax).all()
    assert (xp >= 1).all() and ((hunger >= 0) & (hunger < len(HUNGER_NAMES))).all()
    texts = {ds.message_text(i, j) for i in range(len(ds)) for j in range(2)}
    assert any(texts - {""}), "no messages were collected"
    meta = ds.meta
    assert meta["source"] == "rollouts" and meta["skill"] == "descender" and meta["seed"] == 5
    assert meta["character"] == "mon-hum-neu-mal" and meta["env"] == "NetHackScoreMonk-v1"
    assert sum(meta["policy_samples"].values()) == 50
    assert meta["episodes"] >= 5  # at most 10 samples per episode

    assert _run(tmp_path, "c", "--num_pairs", "25", "--policy_mix", "explorer:0.6,random:0.4", "--seed", "6") == 0
    assert (tmp_path / "c" / "descender.npz").read_bytes() != first.read_bytes()


def test_two_workers_are_deterministic(tmp_path):
    args = ("--num_pairs", "12", "--policy", "random", "--seed", "3", "--num_workers", "2")
    assert _run(tmp_path, "a", *args) == 0
    assert _run(tmp_path, "b", *args) == 0
    first = (tmp_path / "a" / "descender.npz").read_bytes()
    assert first == (tmp_path / "b" / "descender.npz").read_bytes()
    ds = load_dataset(tmp_path / "a" / "descender.npz")
    assert len(ds) == 24 and ds.meta["num_workers"] == 2 and ds.meta["policy_samples"] == {"random": 24}


def test_bad_input_is_refused_without_touching_existing_output(tmp_path, capsys):
    assert _run(tmp_path, "x", "--num_pairs", "5") == 0
    capsys.readouterr()
    out = tmp_path / "x" / "descender.npz"
    good = out.read_bytes()

    assert _run(tmp_path, "x", "--num_pairs", "5", "--seed", "9") == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_bytes() == good

    assert main(["--skill", "wizard", "--num_pairs", "5", "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert "unknown skill" in err and "discoverer" in err

    for bad in ("0", "-3"):
        assert _run(tmp_path, "y", "--num_pairs", bad) == 2
        assert "num_pairs" in capsys.readouterr().err

    assert _run(tmp_path, "y", "--num_pairs", "5", "--policy", "checkpoint") == 2
    assert "--checkpoint" in capsys.readouterr().err
    assert _run(tmp_path, "y", "--num_pairs", "5", "--policy", "checkpoint", "--checkpoint", str(tmp_path / "nope")) == 2
    assert "no such directory" in capsys.readouterr().err
    assert _run(tmp_path, "y", "--num_pairs", "5", "--policy_mix", "explorer:1,lazy:2") == 2
    assert "unknown policy 'lazy'" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()

    assert _run(tmp_path, "x", "--num_pairs", "5", "--seed", "9", "--force") == 0
    assert out.read_bytes() != good
    assert not [p for p in out.parent.iterdir() if p.name != out.name], "temporary files left behind"


def test_policy_mix_parsing():
    assert parse_policy_mix("explorer:0.8,random:0.2") == {"explorer": 0.8, "random": 0.2}
    assert parse_policy_mix("explorer:3, random:1") == {"explorer": 0.75, "random": 0.25}
    assert parse_policy_mix("random") == {"random": 1.0}
    for bad in ("", "explorer:-1", "explorer:abc", "random:0", "robot:1"):
        with pytest.raises(CollectError):
            parse_policy_mix(bad)
    with pytest.raises(ValueError):
        CollectConfig(skill="ascender", num_pairs=1, sample_prob=1.5).validate()


# ----------------------------------------------------------------------------- the explorer on hand-made maps


def _room_map() -> np.ndarray:
    """A walled room (rows 3-7, cols 10-20) with an open door east at (5, 21) and one corridor
    square beyond it (5, 22); everything else unexplored."""
    t = game_tables()
    g = np.full((21, 79), t.cmap_off, dtype=np.int32)  # blank stone
    g[2, 9:22] = g[8, 9:22] = t.cmap_off + S_HWALL
    g[2:9, 9] = g[2:9, 21] = t.cmap_off + S_VWALL
    g[3:8, 10:21] = t.cmap_off + S_ROOM
    g[5, 21] = t.cmap_off + S_VODOOR
    g[5, 22] = t.cmap_off + S_CORR
    return g


def _explorer() -> ExplorerPolicy:
    return ExplorerPolicy(np.random.default_rng(0), ExplorerConfig(epsilon=0.0))


def test_explorer_walks_to_the_frontier_through_the_door_straight():
    t = game_tables()
    view = read_map(_room_map())
    policy = _explorer()
    mem = _LevelMemory(budget=100)
    reason, action = policy.choose(view, (5, 12), mem, leaving=False)
    assert reason == "explore" and action == t.move_index[(0, 1)]
    assert policy.path[-1] == (5, 21)  # the door touches unexplored space (diagonally)
    mem.visited.add((5, 21))
    assert policy.choose(view, (5, 12), mem, leaving=False)[0] == "explore"
    assert policy.path[-1] == (5, 22)  # then the corridor square beyond it
    # from the room's corner square next to the door, no diagonal step into the door
    path = shortest_path(view.passable, view.nodiag, (4, 20), view.passable & (np.arange(79) == 22)[None, :])
    assert path == [(5, 20), (5, 21), (5, 22)]
    # once the corridor square is visited and nothing else is new, the explorer searches
    mem.visited.add((5, 22))
    assert policy.choose(view, (5, 12), mem, leaving=False)[0] == "search"


def test_explorer_takes_known_stairs_when_leaving_and_attacks_neighbours():
    t = game_tables()
    g = _room_map()
    g[3, 18] = t.cmap_off + S_DNSTAIR
    view = read_map(g)
    policy = _explorer()
    mem = _LevelMemory(budget=0, down={(3, 18)})
    reason, action = policy.choose(view, (5, 12), mem, leaving=True, top_level=True)
    assert reason == "to_stairs" and policy.path[-1] == (3, 18) and len(policy.path) == 6  # a shortest path
    assert action == t.move_index[(policy.path[0][0] - 5, policy.path[0][1] - 12)]
    assert policy.choose(view, (3, 18), mem, leaving=True, top_level=True) == ("down", t.down)
    # wanting to go up on level 1 would leave the dungeon: the explorer goes down instead
    mem.go_up, mem.up = True, {(7, 10)}
    assert policy.choose(view, (3, 18), mem, leaving=True, top_level=True) == ("down", t.down)
    assert policy.choose(view, (7, 10), mem, leaving=True, top_level=False) == ("up", t.up)

    g[4, 13] = t.mon_off + 10  # some monster north-east of the hero
    view = read_map(g)
    assert policy.choose(view, (5, 12), mem, leaving=True) == ("attack", t.move_index[(-1, 1)])


def _fake_obs(glyphs: np.ndarray, pos: tuple[int, int], message: str = "") -> dict:
    from common.nethack import blstats as B

    blstats = np.zeros(B.NUM_BLSTATS, dtype=np.int64)
    blstats[B.BL_Y], blstats[B.BL_X] = pos
    blstats[B.BL_DEPTH] = blstats[B.BL_DUNGEON_LEVEL] = 1
    blstats[B.BL_HP] = blstats[B.BL_HPMAX] = 15
    blstats[B.BL_HUNGER] = 1
    msg = np.zeros(MESSAGE_LEN, dtype=np.uint8)
    msg[: len(message)] = np.frombuffer(message.encode(), dtype=np.uint8)
    return {"glyphs": glyphs, "blstats": blstats, "message": msg}


def test_explorer_answers_questions_and_uses_altars():
    t = game_tables()
    g = _room_map()
    g[4, 15] = t.cmap_off + S_ALTAR
    policy = ExplorerPolicy(np.random.default_rng(0), ExplorerConfig(epsilon=0.0, sell_prob=1.0, altar_drops=2))
    offer = "Asidonhopo offers 12 gold pieces for your potion.  Sell it? [ynaq] (y)"
    assert policy.act(_fake_obs(g, (5, 12), offer)) == t.answer_yes
    assert policy.act(_fake_obs(g, (5, 12), "Really attack the watchman? [yn] (n)")) == t.answer_no
    # an answered question is no longer open: the explorer moves on (towards the altar, the nearest target)
    action = policy.act(_fake_obs(g, (5, 12), "Really attack the watchman? [yn] (n) n"))
    assert action not in (t.answer_no, t.drop) and policy.path[-1] == (4, 15)
    # standing on the altar (hidden under the hero): drop items there, then move on
    on_altar = g.copy()
    on_altar[4, 15] = t.mon_off  # the hero's own glyph covers the altar
    assert [policy.act(_fake_obs(on_altar, (4, 15))) for _ in range(2)] == [t.drop, t.drop]
    assert policy.act(_fake_obs(on_altar, (4, 15))) != t.drop


@pytest.mark.slow
def test_annotation_and_reward_training_import_neither_the_game_nor_sample_factory():
    """Annotation runs in a vLLM-only environment: every rlaif module and the shared layer it uses
    load without NLE and sample-factory."""
    import pkgutil
    import subprocess
    import sys

    import rlaif

    names = [f"rlaif.{m.name}" for m in pkgutil.iter_modules(rlaif.__path__)]
    assert "rlaif.annotate" in names and "rlaif.train_reward" in names
    code = ("import importlib, sys\n"
            f"for name in {names + ['common.llm', 'common.vocabulary', 'common.torch_files', 'common.atomic_io']!r}:\n"
            "    importlib.import_module(name)\n"
            "print(sorted(m for m in ('nle', 'sample_factory', 'vllm') if m in sys.modules))")
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.game_calendar
def test_explorer_changes_level_more_often_than_random_play():
    """A small fixed-seed run of the real game: depth changes per policy."""
    config = CollectConfig(skill="descender", num_pairs=1, max_episode_steps=1500)
    env = make_env(config)
    explorer = ExplorerPolicy(np.random.default_rng(1), ExplorerConfig(min_level_steps=40, max_level_steps=80))
    changes = {}
    try:
        for policy in (explorer, RandomPolicy(np.random.default_rng(1))):
            count = 0
            for episode in range(2):
                env.unwrapped.seed(1000 + episode, 2000 + episode, False)
                obs, _ = env.reset()
                policy.reset()
                depth = stats_from_blstats(obs["blstats"])[0]
                done = False
                while not done:
                    obs, _, terminated, truncated, _ = env.step(policy.act(obs))
                    done = terminated or truncated
                    new_depth = stats_from_blstats(obs["blstats"])[0]
                    count += int(new_depth != depth and new_depth > 0)
                    depth = new_depth
            changes[policy.name] = count
    finally:
        env.close()
    assert changes["explorer"] >= 2 and changes["explorer"] > changes["random"], changes


# ----------------------------------------------------------------------------- the checkpoint policy


def _untrained_checkpoint(train_dir, experiment: str = "untrained"):
    """A sample-factory experiment folder holding a randomly initialised skill policy."""
    import json

    import gymnasium as gym
    import torch
    from sample_factory.model.actor_critic import create_actor_critic

    from common.nethack.actions import ACTIONS
    from rl_baseline.models.obs import model_observation_space
    from rl_baseline.sf.cfg import parse_cfg
    from rl_baseline.sf.env import register_envs

    exp = train_dir / experiment
    (exp / "checkpoint_p0").mkdir(parents=True)
    cfg = parse_cfg(["--experiment", experiment, "--train_dir", str(train_dir), "--device", "cpu"])
    register_envs()
    torch.manual_seed(0)
    model = create_actor_critic(cfg, model_observation_space(cfg.num_skills), gym.spaces.Discrete(len(ACTIONS)))
    (exp / "config.json").write_text(json.dumps(vars(cfg)))
    # as sample-factory wrote it before our learner stored plain numbers: best_performance a numpy.float64
    # (torch's default loader refuses it; the collection policy must still read it)
    state = {"model": model.state_dict(), "env_steps": 0, "train_step": 0, "best_performance": np.float64(0.5)}
    torch.save(state, exp / "checkpoint_p0" / "checkpoint_000000000_0.pth")
    return exp


def test_checkpoint_policy_collects_deterministically(tmp_path, capsys):
    exp = _untrained_checkpoint(tmp_path / "skill_policy")
    args = ("--num_pairs", "3", "--policy", "checkpoint", "--checkpoint", str(exp), "--max_episode_steps", "60",
            "--sample_prob", "1", "--seed", "1")
    assert _run(tmp_path, "a", *args) == 0
    assert _run(tmp_path, "b", *args) == 0
    first = (tmp_path / "a" / "descender.npz").read_bytes()
    assert first == (tmp_path / "b" / "descender.npz").read_bytes()
    ds = load_dataset(tmp_path / "a" / "descender.npz")
    assert ds.meta["policy_samples"] == {"checkpoint": 6} and ds.meta["checkpoint"] == str(exp)

    (exp / "config.json").unlink()
    capsys.readouterr()
    assert _run(tmp_path, "c", *args) == 2
    assert "config.json" in capsys.readouterr().err


@pytest.mark.game_calendar
def test_level_change_samples_carry_the_level_change_message():
    """A collected dataset's samples whose depth changed show what the game said on that step ("You descend
    the stairs." / "You climb up the stairs."), not the empty line left after NetHack's --More-- (which
    the count-based reward would score as the commonest message of all)."""
    config = CollectConfig(skill="descender", num_pairs=150, policy_mix={"explorer": 1.0}, seed=3,
                           max_episode_steps=1500, level_change_prob=1.0)
    dataset = collect_dataset(config)
    depth_before, depth_after = dataset.stats[:, 0, 0], dataset.stats[:, 1, 0]
    # one level up or down (a trap door's shaft drops several levels, and no stairs are involved)
    changed = np.flatnonzero((np.abs(depth_after - depth_before) == 1) & (depth_after > 0) & (depth_before > 0))
    assert len(changed) >= 2
    for i in changed:
        text = bytes(dataset.messages[i, 1]).rstrip(b"\0").decode()
        word = "descend" if depth_after[i] > depth_before[i] else "climb up"
        assert f"You {word} the stairs" in text, (i, text)
