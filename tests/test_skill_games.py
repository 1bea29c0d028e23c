"""Games stepped together (``--games_per_env``, :class:`rl_baseline.skills.skill_games.SkillGames`): each game plays,
decides, is paid and counted as it is alone, while its policy over skills decides in one request to the isolated
child for all the games; a child that dies in a batched request costs every game the fallback once, as a restart
always did, and the next step decides again; a training run through sample-factory's multi-agent API plays the
games of as many single-game environments."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bench.env_throughput import _skill_env
from code_generation.isolation import IsolatedPlayerHost
from rl_baseline.skills.skill_games import SkillGames

pytestmark = pytest.mark.skipif(os.environ.get("MM_NO_ISOLATION") == "1", reason="isolation disabled by hand")

GAMES = 4
#: the reward cache is one per process and reward model, shared by both sides of the comparison below; its hit
#: rate counts the other side's look-ups too, so it is the one statistic not compared
SHARED_CACHE = "intrinsic/cache_hit_rate"


class CountingHost:
    """A host that counts the round trips the games make through it."""

    def __init__(self, host) -> None:
        self.host = host
        self.single = 0
        self.batched: list[int] = []

    def __getattr__(self, name):
        return getattr(self.host, name)

    def request(self, handle, ops):
        self.single += 1
        return self.host.request(handle, ops)

    def request_many(self, batch):
        self.batched.append(len(batch))
        return self.host.request_many(batch)


def _assert_same_step(alone, together, step: int, game: int) -> None:
    obs, reward, terminated, truncated, info = alone
    t_obs, t_reward, t_terminated, t_truncated, t_info = together
    where = f"step {step}, game {game}"
    assert (reward, terminated, truncated) == (t_reward, t_terminated, t_truncated), where
    assert obs.keys() == t_obs.keys()
    if not (terminated or truncated):  # at an episode's end the next episode's first observation stands in its place
        for key in obs:
            assert np.array_equal(obs[key], t_obs[key]), f"{where}: {key}"
    for key in ("skill", "skill_id", "skill_time", "intrinsic_reward", "scored_skill", "scored_message"):
        assert info.get(key) == t_info.get(key), f"{where}: {key}"


#: a policy over skills whose decisions differ from game to game: its preconditions read the window, its
#: termination the game's clock and its choice the depth and the window's verdict
BY_GAME = '''
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.ends = 0

    def set_initial_values(self):
        self.skill = "discoverer"

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        total = 0
        for row in char_ascii_encodings:
            for value in row:
                total += int(value)
        return total % 3 == 0, total % 2 == 0

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        return skill_time % 5 == 2 or (preconditions[1] and skill_time % 3 == 0)

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        self.ends += 1
        if merchant_precondition:
            return "merchant"
        return ["discoverer", "descender", "ascender"][(self.ends + dungeon_depth) % 3]
'''


def _by_game_env(tmp_path: Path):
    from bench.fixtures import build_tiny_reward_dirs
    from common.vocabulary import SKILL_SPECS, SKILLS
    from rl_baseline.sf.cfg import SkillEnvConfig
    from rl_baseline.sf.env import build_skill_env

    module = tmp_path / "meta" / "gnomish" / "seed3" / "execution.py"
    if not module.exists():
        module.parent.mkdir(parents=True)
        module.write_text(BY_GAME)
    dirs = build_tiny_reward_dirs(tmp_path / "rewards")
    return build_skill_env(SkillEnvConfig(max_episode_steps=300, reward_dirs=tuple(dirs), task="gnomish",
                                          code_seed=3, meta_policy_root=str(tmp_path / "meta"),
                                          quantiles=tuple(SKILL_SPECS[s].quantile for s in SKILLS)))


def test_games_together_play_decide_and_count_as_each_game_alone(tmp_path):
    """The same seeds and actions, four single-game environments against one SkillGames of four, sandboxed, under
    a policy over skills whose decisions differ from game to game: every observation, reward, skill and episode
    statistic is the same until each game's first episode ends (later episodes start unseeded, as in training, so
    they differ); the games' decisions go in one request a step."""
    alone = [_by_game_env(tmp_path) for _ in range(GAMES)]
    together = SkillGames([_by_game_env(tmp_path) for _ in range(GAMES)])
    for i, env in enumerate(alone):
        env.reset(seed=7 * GAMES + i)
    together.reset(seed=7)  # game i plays seed 7 * GAMES + i
    host = together.games[0].meta_policy.host
    counting = CountingHost(host)
    for game in together.games:
        assert game.meta_policy.host is host  # one child per process: the worker's games share it
        game.meta_policy.host = counting
    rng = np.random.default_rng(0)
    playing = [True] * GAMES
    ended_with_stats = 0
    steps = 0
    skills_seen: set = set()
    while any(playing) and steps < 3000:
        actions = [int(a) for a in rng.integers(alone[0].action_space.n, size=GAMES)]
        singles = [env.step(a) for env, a in zip(alone, actions)]
        before = len(counting.batched)
        results = together.step(actions)
        for i in range(GAMES):
            if not playing[i]:
                continue
            _assert_same_step(singles[i], tuple(r[i] for r in results), steps, i)
            skills_seen.add((i, singles[i][4]["skill"]))
            if singles[i][2] or singles[i][3]:
                playing[i] = False
                stats = dict(singles[i][4]["episode_extra_stats"])
                t_stats = dict(results[4][i]["episode_extra_stats"])
                stats.pop(SHARED_CACHE), t_stats.pop(SHARED_CACHE)
                assert stats == t_stats
                assert "reset_info" in results[4][i]  # the game was reset in place
                ended_with_stats += 1
        # the games that went on decided in one round trip; none asked alone outside a reset
        if not any(r[2] or r[3] for r in zip(*results[:4])):
            assert counting.batched[before:] == [GAMES] and counting.single == 0
        counting.single = 0
        for env, single in zip(alone, singles):
            if single[2] or single[3]:
                env.reset()
        steps += 1
    assert ended_with_stats == GAMES, f"only {ended_with_stats} of {GAMES} games ended in {steps} steps"
    assert len({skill for _, skill in skills_seen}) >= 3  # the games' skills changed, not all alike


DECIDE = '''
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.steps = 0

    def set_initial_values(self):
        self.skill = "discoverer"

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        return False, False

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        self.steps += 1
        return self.steps % 3 == 0

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        return "descender" if current_skill == "discoverer" else "discoverer"
'''


def test_a_child_that_dies_in_a_batched_request_costs_each_game_one_fallback(tmp_path):
    """The child killed between two steps: the batched request fails as a whole, every game takes the fallback
    (the skill ends, the discoverer next) with one error each, the child is restarted once, and at the next
    step every game's player, made afresh, decides again (one request for all)."""
    from rl_baseline.skills import meta_policy

    root = tmp_path / "meta"
    (root / "gnomish" / "seed5").mkdir(parents=True)
    (root / "gnomish" / "seed5" / "execution.py").write_text(DECIDE)
    policies = [meta_policy.load("gnomish", 5, root=root) for _ in range(3)]
    host = policies[0].host
    assert isinstance(host, IsolatedPlayerHost) and all(p.host is host for p in policies)
    chars = np.zeros((7, 7), np.uint8)

    def step(skill: str) -> list:
        requests = [p.decision_request({"depth": 1}, chars, chars, 0, skill, 1, 1, 1, 0) for p in policies]
        return meta_policy.decide_together(requests)

    assert step("discoverer") == [((False, False), False, None)] * 3  # steps == 1: not yet
    restarts = host.restarts
    os.kill(host._beside.pids[-1], 9)
    assert step("descender") == [((False, False), True, "discoverer")] * 3  # the fallback, each game
    assert host.restarts == restarts + 1
    assert [p._num_errors for p in policies] == [1, 1, 1]
    # made afresh (steps start again at 0): the first step does not end the skill, the third does
    assert step("discoverer") == [((False, False), False, None)] * 3
    assert step("discoverer") == [((False, False), False, None)] * 3
    assert step("discoverer") == [((False, False), True, "descender")] * 3
    assert [p._num_errors for p in policies] == [1, 1, 1]


def test_a_training_run_plays_the_games_of_as_many_single_game_environments(tmp_path):
    """sample-factory runs SkillGames as a multi-agent environment: a short run with 2 workers x 1 environment x 4
    games trains, counts every game's env steps and writes the skill statistics; its games are seeded as 8
    single-game environments would be (worker w's game i: sample-factory's env index w, seed 4w + i)."""
    from bench.fixtures import build_tiny_reward_dirs
    from tests.test_training import _meta_policy_root, run_main

    dirs = build_tiny_reward_dirs(tmp_path)
    proc = run_main([
        "--num_workers", "2", "--num_envs_per_worker", "1", "--worker_num_splits", "1", "--games_per_env", "4",
        "--batch_size", "256", "--rollout", "32", "--max_episode_steps", "200", "--device", "cpu",
        "--train_dir", str(tmp_path / "runs"), "--experiment", "games", "--reward_dir", repr(dirs),
        "--eps_threshold_quantile", "0.5", "--stats_avg", "4", "--experiment_summaries_interval", "2",
        "--meta_policy_root", str(_meta_policy_root(tmp_path)), "--code_seed", "42", "--seed", "2",
        "--train_for_env_steps", "3000",
    ], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    exp = tmp_path / "runs" / "games"
    assert "num_agents=4" in proc.stdout + proc.stderr
    stats = json.loads((exp / "skill_stats.json").read_text())["means"]
    assert stats["skills/switches"] > 0  # the 15-turn discoverer budget ends: the games' policies decided
    config = json.loads((exp / "config.json").read_text())
    assert config["games_per_env"] == 4


def test_games_are_seeded_as_single_game_environments(tmp_path):
    together = SkillGames([_skill_env(Path(tmp_path), 100, trust_generated_code=True) for _ in range(3)])
    alone = _skill_env(Path(tmp_path), 100, trust_generated_code=True)
    obs, _ = together.reset(seed=5)
    for i in range(3):
        single, _ = alone.reset(seed=15 + i)
        assert all(np.array_equal(single[k], obs[i][k]) for k in single)
    with pytest.raises(ValueError, match="at least one game"):
        SkillGames([])


class _CountingGame:
    """A made-up game for the bench's counting: it counts its steps and resets, and ends every 7th step."""

    class _Space:
        n = 3

    action_space = _Space()

    def __init__(self) -> None:
        self.steps = self.resets = 0

    def reset(self, seed=None):
        self.resets += 1
        return {}, {}

    def step(self, action):
        self.steps += 1
        return {}, 0.0, self.steps % 7 == 0, False, {}


def test_the_bench_counts_game_steps_of_games_in_turn_and_of_games_together(monkeypatch):
    """bench.env_throughput's rows of 16 games: the rate is the game steps made over the time they took, each game
    stepped once a round; a game that ends is reset (in turn: by the bench; together: by SkillGames)."""
    from bench import env_throughput

    clock = iter(range(1000))
    monkeypatch.setattr(env_throughput.time, "perf_counter", lambda: float(next(clock)))  # 1 s between two reads
    games = [_CountingGame() for _ in range(4)]
    assert env_throughput._measure_games(games, 100, seed=0) == 100.0  # 25 rounds x 4 games in 1 s
    assert [g.steps for g in games] == [25] * 4 and [g.resets for g in games] == [1 + 3] * 4  # ends at 7, 14, 21

    class Together:
        num_agents = 4
        action_space = _CountingGame.action_space

        def __init__(self) -> None:
            self.actions: list = []

        def reset(self, seed=None):
            return [], []

        def step(self, actions):
            self.actions.append(list(actions))
            return [], [], [], [], []

    together = Together()
    assert env_throughput._measure_together(together, 102, seed=0) == 100.0  # whole rounds only: 25 x 4
    assert len(together.actions) == 25 and all(len(a) == 4 for a in together.actions)


def test_games_per_env_is_refused_below_one_and_outside_the_skill_environment(tmp_path):
    from tests.test_training import run_main

    for flags, said in ((["--games_per_env", "0"], "--games_per_env must be at least 1"),
                        (["--games_per_env", "4", "--env", "nle_fixed_eat_action"], "only nle_skill has")):
        proc = run_main(["--algo", "APPO", "--device", "cpu", "--train_dir", str(tmp_path / "runs"),
                         "--experiment", "x", *flags], tmp_path, timeout=120)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
        assert not (tmp_path / "runs").exists()


#: a policy over skills that fails once as each episode's player is made and then at every step's termination
FAILS_AT_NEW_AND_EVERY_STEP = '''
class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        pass

    def set_initial_values(self):
        raise ValueError("no initial values")

    def skill_precondition(self, char_ascii_encodings, char_ascii_colors, num_items, color_map):
        return False, False

    def skill_termination(self, skill, skill_time, current_depth, previous_depth, preconditions):
        raise RuntimeError("every step")

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        return "discoverer"
'''


@pytest.mark.parametrize("trusted", [False, True], ids=["isolated", "in_process"])
def test_an_episodes_module_errors_are_its_steps_not_the_making_of_its_player(tmp_path, trusted):
    """``skills/meta_policy_errors`` counts the errors of an episode's steps: the error of making the episode's
    player travels with the reset's first request and is not counted in, episode after episode."""
    from bench.fixtures import build_tiny_reward_dirs
    from common.vocabulary import SKILL_SPECS, SKILLS
    from rl_baseline.sf.cfg import SkillEnvConfig
    from rl_baseline.sf.env import build_skill_env

    module = tmp_path / "meta" / "gnomish" / "seed5" / "execution.py"
    module.parent.mkdir(parents=True)
    module.write_text(FAILS_AT_NEW_AND_EVERY_STEP)
    env = build_skill_env(SkillEnvConfig(
        max_episode_steps=40, reward_dirs=tuple(build_tiny_reward_dirs(tmp_path / "rewards")), task="gnomish",
        code_seed=5, meta_policy_root=str(tmp_path / "meta"), trust_generated_code=trusted,
        quantiles=tuple(SKILL_SPECS[s].quantile for s in SKILLS)))
    rng = np.random.default_rng(0)
    counted = []
    env.reset(seed=3)
    for _ in range(3):
        decided = 0
        while True:
            _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
            if terminated or truncated:
                break
            decided += 1  # every step that does not end the episode asks the termination, which raises
        counted.append((info["episode_extra_stats"]["skills/meta_policy_errors"], float(decided)))
        env.reset()
    assert all(errors == decided for errors, decided in counted), counted
    # the module's other errors: the making of each player, the load's and the four resets'
    assert env.meta_policy.num_errors == sum(d for _, d in counted) + 5
