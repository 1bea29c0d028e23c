"""The fast paths of the skill environment decide as the slow ones did, and the long-run benchmark times what it
names (#64): the byte-search stair scan against ``np.argwhere``, the glyph pre-check against the exact count,
the CPU split by part in a real skill environment, and the long runs' configuration as the pipeline builds it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.nethack.actions import action_index
from rl_baseline.envs import make_monk_env
from rl_baseline.tasks.skill_measures import _add_cells

REPO = Path(__file__).resolve().parents[1]


def test_the_byte_search_finds_the_cells_argwhere_finds():
    rng = np.random.default_rng(0)
    for trial in range(300):
        chars = rng.choice(np.frombuffer(b" .#<>@-|", dtype=np.uint8), size=(21, 79),
                           p=[0.5, 0.2, 0.1, 0.05, 0.05, 0.02, 0.04, 0.04])
        if trial % 3 == 0:
            chars[:, :] = ord(" ")  # an empty map
            chars[20, 78] = chars[0, 0] = ord(">")  # the corners
        raw = chars.tobytes()
        for char in (b"<", b">"):
            found: set = set()
            _add_cells(found, raw, char, chars.shape[1])
            expected = {(int(r), int(c)) for r, c in np.argwhere(chars == char[0])}
            assert found == expected


def test_a_staircase_down_shows_as_a_greater_than_sign_wherever_it_is_seen():
    """The Mines-entrance check looks for two '>' before it counts staircase glyphs: every staircase-down glyph
    on the map of a live game is a '>' (game seed 1: level 1, then level 2 with the Mines staircase, both mapped)."""
    from rl_baseline.envs.monk_env import DOWN_STAIRCASE_GLYPH

    env = make_monk_env(wizard=True, max_episode_steps=500)
    try:
        env.seed(1, 1001, reseed=False)
        env.reset()
        counts = []
        for _ in range(2):
            env.wizard_keys(b"\x06")  # wizard mode's Ctrl-F maps the level
            obs = env.current_observation()
            stairs = obs["glyphs"] == DOWN_STAIRCASE_GLYPH
            counts.append(int(stairs.sum()))
            assert (obs["chars"][stairs] == ord(">")).all()
            env.wizard_keys(b"\x14>.")  # Ctrl-T: teleport onto the first '>'
            env.step(action_index("down"))
        assert counts == [1, 2]
    finally:
        env.close()


def test_the_skill_environment_reports_where_its_cpu_time_goes(tmp_path):
    """With MAESTROMOTIF_PART_TIMES set, a skill environment writes its process's CPU seconds per part; the whole
    includes its parts, and off, nothing is written."""
    script = (
        "import sys; sys.path.insert(0, '.')\n"
        "from pathlib import Path\n"
        "import numpy as np\n"
        "from bench.env_throughput import _skill_env\n"
        f"env = _skill_env(Path({str(tmp_path / 'rewards')!r}), 200, trust_generated_code=True)\n"
        "rng = np.random.default_rng(0); env.reset(seed=3)\n"
        "for _ in range(400):\n"
        "    _, _, te, tr, _ = env.step(int(rng.integers(env.action_space.n)))\n"
        "    if te or tr: env.reset()\n"
    )
    folder = tmp_path / "parts"
    env = dict(os.environ, MAESTROMOTIF_PART_TIMES=str(folder))
    subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, check=True, capture_output=True, timeout=300)
    files = list(folder.glob("parts_*.json"))
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    seconds, calls = record["seconds"], record["calls"]
    assert set(seconds) == {"env", "reward", "skill_env"}
    assert calls["skill_env"] >= 400 and calls["env"] == calls["skill_env"]  # every step and reset
    assert 0 < seconds["env"] + seconds["reward"] < seconds["skill_env"]

    files[0].unlink()
    env.pop("MAESTROMOTIF_PART_TIMES")
    subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, check=True, capture_output=True, timeout=300)
    assert not list(tmp_path.rglob("parts_*.json"))


def test_a_training_environment_fills_fewer_arrays_and_plays_observes_and_pays_the_same(tmp_path):
    """Training's environments ask NLE for the arrays training reads only (TRAINING_OBSERVATION_KEYS): the same
    games, observations, rewards, skills and statistics as an environment with every array, step for step."""
    from bench.fixtures import build_tiny_reward_dirs
    from common.vocabulary import SKILL_SPECS, SKILLS
    from rl_baseline.envs import OBSERVATION_KEYS, TRAINING_OBSERVATION_KEYS
    from rl_baseline.sf.cfg import SkillEnvConfig
    from rl_baseline.sf.env import build_skill_env

    dirs = tuple(build_tiny_reward_dirs(tmp_path / "rewards"))
    envs = [build_skill_env(SkillEnvConfig(max_episode_steps=150, reward_dirs=dirs, trust_generated_code=True,
                                           quantiles=tuple(SKILL_SPECS[s].quantile for s in SKILLS),
                                           training_observations=lean)) for lean in (False, True)]
    full, lean = (set(env.unwrapped.nethack._obs_buffers) for env in envs)
    assert full - lean == set(OBSERVATION_KEYS) - set(TRAINING_OBSERVATION_KEYS) == {
        "specials", "inv_glyphs", "tty_colors", "tty_cursor"}
    rng = np.random.default_rng(4)
    outs = [env.reset(seed=11) for env in envs]
    episodes = 0
    for step in range(700):
        for key in outs[0][0]:
            assert np.array_equal(outs[0][0][key], outs[1][0][key]), (step, key)
        action = int(rng.integers(envs[0].action_space.n))
        outs = [env.step(action) for env in envs]
        (_, reward, te, tr, info), (_, lean_reward, lean_te, lean_tr, lean_info) = outs
        assert (reward, te, tr) == (lean_reward, lean_te, lean_tr), step
        stats, lean_stats = info.pop("episode_extra_stats", {}), lean_info.pop("episode_extra_stats", {})
        for shared in ("intrinsic/cache_hit_rate",):  # one cache per process, counted by both
            stats.pop(shared, None), lean_stats.pop(shared, None)
        assert info == lean_info and stats == lean_stats, step
        if te or tr:  # a reset without a seed draws a new game in each env: the next game seeded alike
            episodes += 1
            outs = [env.reset(seed=11 + episodes) for env in envs]
    assert episodes >= 2


def test_the_long_run_configuration_is_the_learn_preset_with_the_three_levers():
    from bench.long_run import LONG_RUN_LEVERS, config_args, parts_of
    from orchestration.phases import skill_training_args
    from orchestration.pipeline import make_config

    dirs = [f"/r/{i}" for i in range(5)]
    long, smoke = config_args("long", dirs, "cpu"), config_args("smoke", dirs, "cpu")

    def flag(args: list[str], name: str) -> str:
        return args[args.index(name) + 1]

    assert flag(long, "--max_episode_steps") == "10000" and flag(smoke, "--max_episode_steps") == "500"
    for name in ("--num_envs_per_worker", "--games_per_env", "--worker_num_splits", "--precision", "--batch_size",
                 "--rollout"):
        assert flag(long, name) == flag(skill_training_args(make_config("learn")), name)
    assert (flag(long, "--num_envs_per_worker"), flag(long, "--games_per_env")) == ("1", "16")
    assert flag(long, "--worker_num_splits") == "1"
    apart = config_args("long_games_apart", dirs, "cpu")  # the same 16 games a worker, each its own environment
    assert (flag(apart, "--num_envs_per_worker"), flag(apart, "--games_per_env")) == ("16", "1")
    assert [a for a in apart if a not in ("16", "1")] == [a for a in long if a not in ("16", "1")]
    assert flag(long, "--discoverer_turns") == "100"
    assert long[-len(LONG_RUN_LEVERS):] == list(LONG_RUN_LEVERS)
    assert "--gamma" not in smoke and "--policy_heads" not in smoke
    assert flag(long, "--reward_dir") == repr(dirs) == flag(smoke, "--reward_dir")
    assert "--reward_timing" not in long  # the release's timing, the default

    cpu = {"rollout": 10.0, "inference": 4.0, "learner": 5.0, "generated_code": 1.0, "other": 0.5}
    parts = parts_of(cpu, {"env": 3.0, "reward": 0.5, "skill_env": 6.0})
    assert parts["skill runtime"] == pytest.approx(2.5) and parts["sample-factory rollout"] == pytest.approx(4.0)
    assert sum(parts.values()) == pytest.approx(sum(cpu.values()))


def test_the_steady_window_leaves_start_up_out():
    """The long-run bench splits the CPU of the window between the FPS report after the warm-up and the last one:
    a start-up's CPU before that window is not charged to the env steps."""
    import datetime

    from bench.train_throughput import MemorySampler, report_times

    def stamp(second: int) -> str:
        return f"\x1b[36m[2026-12-02 03:00:{second:02d},000][100] Fps is (10 sec: 1000.0, 60 sec: 1.0, 300 sec: 1.0). " \
               f"Total num frames: {1000 * max(second - 10, 0)}. Throughput: 0: 1.0\x1b[0m"

    log = "\n".join(["[2026-12-02 03:00:00,000][100] LearnerWorker_p0\tpid 7\tparent 1"]
                    + [stamp(s) for s in (10, 20, 30, 40)])
    reports = report_times(log)
    assert [frames for _, frames in reports] == [0, 10_000, 20_000, 30_000]
    t = datetime.datetime(2026, 12, 2, 3, 0, 0).timestamp()
    sampler = MemorySampler.__new__(MemorySampler)
    sampler.sandboxed = set()
    # the learner (pid 7) burns 5 s starting up, then 1 s per 10,000 steps; a rollout part likewise
    sampler.snapshots = [(t + s, {7: 5.0 + max(s - 10, 0) / 10}, {"env": 2.0 + max(s - 10, 0) / 20})
                         for s in range(0, 41)]
    steps, roles, parts = sampler.steady(log, warmup_reports=1)
    assert steps == 20_000
    assert roles["learner"] == pytest.approx(2.0) and parts["env"] == pytest.approx(1.0)
    assert sampler.steady(log, warmup_reports=3) == (0, {}, {})  # too few reports after the warm-up
