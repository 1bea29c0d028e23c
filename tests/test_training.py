"""Skill runtime, configuration, and a small end-to-end APPO run with evaluation and resume."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from bench.fixtures import TINY_MESSAGES, build_tiny_reward_dirs  # noqa: F401
from common.nethack.game_clock import DEFAULT_PINNED
from common.vocabulary import SKILLS
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache
from rl_baseline.skills.runtime import SingleSkillPolicy, SkillRuntime, initiation_window


# ----------------------------------------------------------------------------- stand-ins
def _msg(text: str) -> np.ndarray:
    out = np.zeros(256, dtype=np.uint8)
    out[: len(text)] = np.frombuffer(text.encode(), dtype=np.uint8)
    return out


class ScriptedNLE(gym.Env):
    """NLE-shaped observations following a script of (message, depth, new item) per step."""

    SCRIPT = [
        ("You kill the newt!", 1, False),
        ("", 1, False),
        ("You kill the newt!", 1, False),
        ("You find a hidden door.", 1, True),
        ("", 2, False),  # descended while descender is active
        ("You sold a dagger for 2 gold pieces.", 2, False),
        ("", 2, False),
    ]

    def __init__(self) -> None:
        self.action_space = gym.spaces.Discrete(4)
        self.observation_space = gym.spaces.Dict({})
        self.t = 0

    def _obs(self, depth: int, new_item: bool) -> dict:
        chars = np.full((21, 79), ord(" "), dtype=np.uint8)
        chars[5:8, 9:12] = ord(".")
        chars[5, 10] = ord("_")  # an altar north of the hero
        chars[6, 10] = ord("@")
        chars[:, : 2 + self.t] = ord("#")  # more of the map becomes visible every step
        colors = np.zeros((21, 79), dtype=np.uint8)
        blstats = np.zeros(27, dtype=np.int64)
        blstats[0], blstats[1], blstats[12] = 10, 6, depth
        inv_letters = np.zeros(55, dtype=np.uint8)
        inv_oclasses = np.full(55, 18, dtype=np.uint8)
        inv_letters[:2] = [ord("a"), ord("b")]
        inv_oclasses[:2] = [2, 6]
        if new_item:
            inv_letters[2], inv_oclasses[2] = ord("g"), 2
        return dict(chars=chars, colors=colors, blstats=blstats, inv_letters=inv_letters, inv_oclasses=inv_oclasses,
                    message=_msg(self.msg), glyphs=np.zeros((21, 79), dtype=np.int16))

    def reset(self, *, seed=None, options=None):
        self.t = 0
        self.msg = ""
        self.item = False
        return self._obs(1, False), {"depth": 1, "dungeon_number": 0}

    def step(self, action):
        self.msg, depth, new = self.SCRIPT[self.t]
        self.item = self.item or new
        self.t += 1
        done = self.t == len(self.SCRIPT)
        return self._obs(depth, self.item), 1.0, done, False, {"depth": depth, "dungeon_number": 0}


class ScriptedMetaPolicy:
    """discoverer for 3 steps, then descender until the depth changes, then merchant."""

    def __init__(self) -> None:
        self.precondition_calls: list[tuple[np.ndarray, int]] = []
        self.updates = 0
        self.calls = 0

    def reset(self) -> None:
        self.updates = 0
        self.calls = 0

    def preconditions(self, chars3x3, colors3x3, num_items):
        self.precondition_calls.append((chars3x3.copy(), num_items))
        altar = bool((chars3x3 == ord("_")).any()) and num_items > 0
        return altar, False

    def should_terminate(self, skill, skill_time, current_depth, previous_depth, preconditions):
        if skill == "discoverer":
            return skill_time >= 3
        if skill == "descender":
            return current_depth != previous_depth
        return False

    def next_skill(self, current_skill, depth, branch_number, merchant_ok, worshipper_ok):
        self.calls += 1
        return ("discoverer", "descender", "merchant")[min(self.calls - 1, 2)]

    def update_state(self, info):
        self.updates += 1


class LengthModel:
    def __init__(self, scale: float) -> None:
        self.scale = scale

    def score(self, messages, depth_change):
        return (self.scale * (messages != 0).sum(axis=1) + 100.0 * depth_change).astype(np.float32)

    def threshold(self, q):
        return 1.0


def one_hot_obs(nle_obs: dict, skill_id: int, num_skills: int) -> dict:
    onehot = np.zeros(num_skills, dtype=np.float32)
    onehot[skill_id] = 1.0
    return {"obs": nle_obs["chars"][:2, :2].astype(np.float32), "skill": onehot}


def make_runtime(meta=None, reward_timing: str = "after_action", skill_reward: str = "llm",
                 progress_scales: tuple[float, ...] = ()) -> tuple[SkillRuntime, ScriptedMetaPolicy]:
    meta = meta or ScriptedMetaPolicy()
    models = [LengthModel(1.0 + i) for i in range(len(SKILLS))]
    reward = IntrinsicReward(models, [1.0] * len(SKILLS), beta=1.0, llm_coef=0.1, extrinsic_coef=0.5,
                             cache=ScoreCache())
    env = SkillRuntime(ScriptedNLE(), lambda: meta, reward, num_skills=len(SKILLS), observation_fn=one_hot_obs,
                       observation_space=gym.spaces.Dict({}), reward_timing=reward_timing, skill_reward=skill_reward,
                       progress_scales=progress_scales)
    return env, meta


def _play(env) -> tuple[list[int], list[float], dict]:
    env.reset()
    skills, intrinsics, done, info = [], [], False, {}
    while not done:
        obs, _, term, trunc, info = env.step(0)
        done = term or trunc
        skills.append(int(np.argmax(obs["skill"])))
        intrinsics.append(info["intrinsic_reward"])
    return skills, intrinsics, info


def test_release_timing_scores_the_observation_the_action_was_chosen_on_with_its_skill():
    """The release's learner scores step t's input observation (the message the previous action produced)
    with the skill that observation carries: the arrival on level 2 (empty message, depth +1) came while the
    descender acted but is scored one step later by the merchant's model, the skill chosen on arrival."""
    env, _ = make_runtime(reward_timing="release")
    skills, intrinsics, info = _play(env)
    assert skills == [0, 0, 1, 1, 4, 4, 4]  # the same skill choices as with the other timing
    newt, door = len("You kill the newt!"), len("You find a hidden door.")
    sold = len("You sold a dagger for 2 gold pieces.")
    # models: skill i scores (i + 1) * len(message) + 100 * depth change; threshold 1; beta 1
    assert intrinsics == pytest.approx([
        0.0,  # the reset observation's empty message, discoverer
        1 * newt / 1,  # step 1's kill, discoverer, first sighting
        0.0,  # empty message (count 2), below the threshold
        2 * newt / 2,  # the second kill, scored by the descender chosen on it; count 2
        2 * door / 1,  # the door, descender
        5 * 0 + 100.0 / 3,  # the arrival (depth +1 since the descender started), merchant's model; "" count 3
        5 * sold / 1,  # the sale, merchant
    ])
    stats = info["episode_extra_stats"]
    assert stats["messages/empty_share"] == pytest.approx(3 / 7) and stats["messages/wall_share"] == 0.0
    assert "intrinsic/reward_per_descent" not in stats  # no "You descend the stairs." in the script
    assert stats["intrinsic/merchant_return"] == pytest.approx(100.0 / 3 + 5 * sold)
    assert stats["intrinsic/descender_return"] == pytest.approx(newt + 2 * door)


def test_progress_reward_pays_each_skill_its_own_measure():
    """--skill_reward progress: the discoverer is paid the map cells it reveals, the descender +1 for the level it
    went down, the merchant +1 for the sale; no reward model is asked."""
    env, _ = make_runtime(skill_reward="progress")
    env.reward_fn.models = []  # nothing to score with: progress must not need the models
    skills, intrinsics, info = _play(env)
    assert skills == [0, 0, 1, 1, 4, 4, 4]
    assert intrinsics[:3] == [21.0, 21.0, 21.0]  # one more map column (21 rows) per step, while discovering
    assert intrinsics[3:5] == [0.0, 1.0]  # the descender: nothing, then the step that went down
    assert intrinsics[5:] == [1.0, 0.0]  # the merchant's sale
    assert info["episode_extra_stats"]["intrinsic/descender_return"] == 1.0


def test_progress_scale_weighs_each_skills_measure():
    """--progress_scale: the descender's level is paid as 50 cells, the discoverer's cells and the merchant's sale
    as before (a fair bound where a skill's measure comes in units far rarer than another's)."""
    env, _ = make_runtime(skill_reward="progress", progress_scales=(1.0, 50.0, 50.0, 1.0, 2.0))
    skills, intrinsics, info = _play(env)
    assert skills == [0, 0, 1, 1, 4, 4, 4]
    assert intrinsics == [21.0, 21.0, 21.0, 0.0, 50.0, 2.0, 0.0]
    assert info["episode_extra_stats"]["intrinsic/descender_return"] == 50.0


def test_progress_scale_flag_is_checked_and_reaches_the_environment():
    from rl_baseline.sf.cfg import ConfigError, SkillEnvConfig, resolve_cfg

    cfg = resolve_cfg(["--skill_reward", "progress", "--progress_scale", "[1, 50, 50, 1, 1]"], saved=False)
    assert SkillEnvConfig.from_cfg(cfg).progress_scales == (1.0, 50.0, 50.0, 1.0, 1.0)
    cfg = resolve_cfg(["--skill_reward", "progress", "--progress_scale", "3"], saved=False)
    assert SkillEnvConfig.from_cfg(cfg).progress_scales == (3.0,) * 5
    cfg = resolve_cfg(["--skill_reward", "progress", "--progress_stairs_reward", "0.5"], saved=False)
    assert SkillEnvConfig.from_cfg(cfg).progress_stairs_reward == 0.5
    for argv, match in ((["--skill_reward", "progress", "--progress_scale", "[1, 2]"], "2 values for 5 skills"),
                        (["--skill_reward", "progress", "--progress_scale", "-1"], "negative"),
                        (["--skill_reward", "progress", "--progress_scale", "many"], "expected numbers"),
                        (["--progress_scale", "2"], "needs --skill_reward progress"),
                        (["--progress_stairs_reward", "0.5"], "needs --skill_reward progress"),
                        (["--skill_reward", "progress", "--progress_stairs_reward", "-1"], "non-negative")):
        with pytest.raises(ConfigError, match=match):
            resolve_cfg(argv, saved=False)


# ----------------------------------------------------------------------------- runtime unit tests
def test_initiation_window_is_the_releases_tty_window():
    # the release cuts terminal rows y-3..y+3 (map rows y-4..y+2) and columns x-3..x+3
    chars = (np.arange(21 * 79) % 200 + 40).astype(np.uint8).reshape(21, 79)
    colors = np.full((21, 79), 5, dtype=np.uint8)
    c, k = initiation_window(chars, colors, x=10, y=8)
    assert c.shape == (7, 7)
    assert (c == chars[4:11, 7:14]).all()
    assert c[4, 3] == chars[8, 10] and k[4, 3] == 0  # the hero's cell: its colour is hidden
    assert (np.delete(k.ravel(), 4 * 7 + 3) == 5).all()
    # near the top-left corner the window is padded with blanks of colour 0
    c, k = initiation_window(chars, colors, x=1, y=1)
    assert (c[:3] == ord(" ")).all() and (c[:, :2] == ord(" ")).all() and (k[:3] == 0).all()
    assert c[4, 3] == chars[1, 1] and c[5, 4] == chars[2, 2]


def test_runtime_switches_skills_and_shapes_reward():
    env, meta = make_runtime()
    obs, info = env.reset()
    assert info["skill"] == "discoverer" and obs["skill"].tolist() == [1, 0, 0, 0, 0]
    skills, rewards, intrinsics = [], [], []
    done = False
    while not done:
        obs, r, term, trunc, info = env.step(0)
        done = term or trunc
        skills.append(int(np.argmax(obs["skill"])))
        rewards.append(r)
        intrinsics.append(info["intrinsic_reward"])
    # discoverer for 3 steps, descender until depth 2 (step 5), then merchant
    assert skills == [0, 0, 1, 1, 4, 4, 4]
    # step 1: discoverer scores "You kill the newt!" (18 chars, scale 1) at count 1
    assert intrinsics[0] == pytest.approx(18.0)
    assert rewards[0] == pytest.approx(0.5 * 1.0 + 0.1 * 18.0)
    # step 3: same message again under discoverer -> divided by count 2 (beta 1)
    assert intrinsics[2] == pytest.approx(18.0 / 2)
    # step 5: descender active, empty message, depth change +1 since the skill started
    assert intrinsics[4] == pytest.approx(100.0 / 2)  # second empty message of the episode
    stats = info["episode_extra_stats"]
    assert sum(stats[f"skills/{s}_share"] for s in SKILLS) == pytest.approx(1.0)
    assert stats["skills/discoverer_share"] == pytest.approx(3 / 7)
    assert stats["skills/descender_success"] == 1.0 == stats["measures/descender/levels_descended"]
    # the sale happened while the merchant was active: counted by the transactions task's detector
    assert stats["skills/merchant_success"] == 1.0 == stats["measures/merchant/items_sold"]
    # one column more of the map every step: 21 cells per step, per 1000 steps
    assert stats["skills/discoverer_success"] == pytest.approx(21_000.0)
    assert stats["intrinsic/discoverer_return"] == pytest.approx(sum(intrinsics[:3]))
    assert stats["intrinsic/descender_return"] == pytest.approx(sum(intrinsics[3:5]))
    assert stats["skills/switches"] == 2 and stats["skills/max_depth"] == 2
    assert stats["intrinsic/discoverer_mean"] > 0 and stats["intrinsic/descender_mean"] > 0
    # one of the 7 scored steps repeats what was already scored (step 3: the discoverer, the same message)
    assert stats["intrinsic/cache_hit_rate"] == pytest.approx(1 / 7)
    # preconditions saw the altar next to the hero; only the new item (letter g) counts
    crop, _ = meta.precondition_calls[-1]
    assert crop[3, 3] == ord("_") and crop[4, 3] == ord("@")
    assert [n for _, n in meta.precondition_calls][:4] == [0, 0, 0, 0]
    assert meta.precondition_calls[-1][1] == 1
    # the altar (colour 0 here, not an altar's 7) is not counted as one
    assert "measures/worshipper/altars_found" not in stats or stats["measures/worshipper/altars_found"] == 0


def test_runtime_reset_restarts_episode_state():
    env, _ = make_runtime()
    env.reset()
    for _ in range(4):
        env.step(0)
    obs, info = env.reset()
    assert info["skill"] == "discoverer" and env.skill_time == 0
    assert env.reward_fn.counts == {}
    assert sum(env.stats.time) == 0


def test_single_skill_policy_never_switches():
    env, _ = make_runtime(meta=SingleSkillPolicy("discoverer"))
    env.reset()
    for _ in range(len(ScriptedNLE.SCRIPT)):
        obs, *_ = env.step(0)
        assert obs["skill"][0] == 1.0


# ----------------------------------------------------------------------------- configuration
def test_release_command_line_parses_with_paper_defaults():
    from rl_baseline.sf.cfg import parse_cfg

    dirs = "['train_dir/skill_rewards/llama3_discoverer_default',\n  'train_dir/skill_rewards/llama3_descender_default']"
    cfg = parse_cfg([
        "--algo", "APPO", "--num_workers", "24", "--num_envs_per_worker", "20", "--batch_size", "4096",
        "--reward_scale", "0.1", "--obs_scale", "255.0", "--train_for_env_steps", "5_000_000_000",
        "--save_every_steps", "6_000_000_000", "--code_seed", "42", "--seed", "2", "--stats_avg", "1000",
        "--train_dir", "train_dir/skill_policy/", "--experiment", "default", "--reward_dir", dirs,
        "--evaluation", "True", "--eval_target", "goldenexit", "--device", "cuda", "--keep_checkpoints", "5",
        "--num_skills", "2",
    ])
    assert cfg.env == "nle_skill" and cfg.evaluation is True and cfg.eval_target == "goldenexit"
    assert cfg.train_for_env_steps == 5_000_000_000 and cfg.save_every_steps == 6_000_000_000
    assert cfg.reward_dirs == ["train_dir/skill_rewards/llama3_discoverer_default",
                               "train_dir/skill_rewards/llama3_descender_default"]
    assert cfg.threshold_quantiles == [0.95, 0.85]
    assert cfg.device == "gpu" and cfg.keep_checkpoints == 5
    # paper defaults that the command does not set
    assert (cfg.ppo_clip_ratio, cfg.ppo_clip_value, cfg.num_epochs, cfg.max_grad_norm) == (0.1, 1.0, 1, 4.0)
    assert cfg.value_loss_coeff == 0.5 and cfg.exploration_loss == "entropy"
    assert cfg.use_rnn is True and cfg.rnn_type == "gru" and cfg.with_vtrace is True
    assert cfg.llm_reward == 0.1 and cfg.extrinsic_reward == 0.0 and cfg.beta_count_exponent == 3.0
    assert cfg.max_episode_steps == 10000
    # the paper's pixel scale goes to the encoder; sample-factory's own scaling is off
    assert cfg.encoder_obs_scale == 255.0 and cfg.obs_scale == 1.0 and cfg.normalize_input is False


def test_motif_command_line_is_single_skill():
    from rl_baseline.sf.cfg import SkillEnvConfig, parse_cfg

    cfg = parse_cfg(["--env", "nle_fixed_eat_action", "--root_env", "NetHackStaircaseLvl3-v1", "--reward_dir", "rd",
                     "--extrinsic_reward", "10.0", "--llm_reward", "0.1", "--beta_count_exponent", "3",
                     "--eps_threshold_quantile", "0.5"])
    assert cfg.num_skills == 1 and cfg.reward_dirs == ["rd"] and cfg.threshold_quantiles == [0.5]
    env_cfg = SkillEnvConfig.from_cfg(cfg)
    assert env_cfg.task is None and env_cfg.root_env == "NetHackStaircaseLvl3-v1"
    assert cfg.cli_args["env"] == "nle_fixed_eat_action"
    # without --env the skill env is the default, but a saved experiment's env is not overridden
    plain = parse_cfg(["--experiment", "m", "--llm_reward", "0"])
    assert plain.env == "nle_skill" and "env" not in plain.cli_args


def test_motif_task_reward_and_continual_variant():
    """Motif's staircase tasks: success is a step that shows "You descend the stairs." and arrives on the
    task's dungeon level (a trapdoor's fall does not count); it pays 50; the Continual variant pays once and
    goes on; the score task keeps the game's reward (plus Motif's time penalty) and reports the in-game score as true_objective."""
    from rl_baseline.baselines.motif_tasks import DESCEND_MESSAGE, TASK_REWARD, TIME_PENALTY, MotifTaskReward

    class Levels(gym.Env):
        def __init__(self, steps):
            self.action_space = gym.spaces.Discrete(2)
            self.observation_space = gym.spaces.Dict({})
            self.steps = steps  # (dungeon level, messages shown during the step)

        def _o(self, level):
            bl = np.zeros(27, dtype=np.int64)
            bl[12] = bl[24] = level
            bl[9] = 10 * level
            return {"blstats": bl, "glyphs": np.zeros((21, 79), dtype=np.int16), "message": np.zeros(256, np.uint8)}

        def reset(self, **kw):
            self.t = 0
            return self._o(1), {}

        def step(self, a):
            level, messages = self.steps[self.t]
            self.t += 1
            return self._o(level), 5.0, self.t == len(self.steps), False, {"messages": messages}

    script = [(2, ["There is a trap door here.", "You fall through..."]), (2, []), (3, [DESCEND_MESSAGE]),
              (3, []), (4, [DESCEND_MESSAGE])]
    env = MotifTaskReward(Levels(script), "NetHackStaircaseLvl3-v1")
    env.reset()
    out = [env.step(0) for _ in range(3)]
    assert [(r, t) for _, r, t, _, _ in out] == [(0.0, False), (0.0, False), (TASK_REWARD, True)] and TASK_REWARD == 50
    assert out[2][4]["task_success"] and out[2][4]["true_objective"] == 1.0 and out[1][4]["true_objective"] == 0.0
    # (that the descent message stays the observed message is the Monk env's rule, tested on live games:
    # tests/test_nethack_options.py, tests/test_motif.py::test_staircase_task_succeeds_on_a_live_walk_down_the_stairs)
    # a staircase task succeeds only on its own level: level 2 reached by a fall, then stairs to 3 -- not 2
    stair = MotifTaskReward(Levels(script), "NetHackStaircase-v1")
    stair.reset()
    assert [stair.step(0)[1] for _ in range(5)] == [0.0] * 5
    cont = MotifTaskReward(Levels(script), "NetHackStaircaseLvl3Continual-v1")
    cont.reset()
    steps = [cont.step(0) for _ in range(5)]
    assert [(r, t) for _, r, t, _, _ in steps] == [(0.0, False), (0.0, False), (TASK_REWARD, False), (0.0, False),
                                                    (0.0, True)]
    assert steps[-1][4]["true_objective"] == 1.0  # the episode still counts as a success
    score = MotifTaskReward(Levels(script), "NetHackScore-v1")
    score.reset()
    _, reward, _, _, info = score.step(0)
    # the game's reward plus Motif's time penalty: this made-up game's clock (blstats[20]) never moves
    assert reward == pytest.approx(5.0 + TIME_PENALTY) and info["true_objective"] == 20.0
    with pytest.raises(ValueError, match="unknown root env"):
        MotifTaskReward(Levels(script), "NetHackOracleContinual-v1")  # not one of Motif's environments


def test_motif_env_and_model_run_one_step_in_process():
    """The single-reward (Motif) environment and a one-skill network, built as sample-factory builds them."""
    import torch
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
    from sample_factory.envs.create_env import create_env
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.model.model_utils import get_rnn_size

    from rl_baseline.baselines.motif_tasks import MotifTaskReward
    from rl_baseline.sf.cfg import parse_cfg
    from rl_baseline.sf.env import register_envs

    cfg = parse_cfg(["--env", "nle_fixed_eat_action", "--root_env", "NetHackStaircaseContinual-v1",
                     "--llm_reward", "0", "--extrinsic_reward", "10.0", "--max_episode_steps", "20", "--device", "cpu"])
    register_envs()
    env = create_env(cfg.env, cfg=cfg, env_config=None)
    assert isinstance(env.env, MotifTaskReward) and env.env.continual and env.env.task == "Staircase"
    obs, info = env.reset(seed=1)
    assert obs["skill_onehot"].shape == (1,) and obs["skill_onehot"][0] == 1.0
    model = create_actor_critic(cfg, env.observation_space, env.action_space)
    batch = {k: torch.from_numpy(np.asarray(v)[None].copy()) for k, v in obs.items()}
    with torch.no_grad():
        out = model(prepare_and_normalize_obs(model, batch), torch.zeros(1, get_rnn_size(cfg)))
    action = int(out["actions"].reshape(-1)[0])
    assert 0 <= action < env.action_space.n
    _, reward, terminated, truncated, info = env.step(action)
    assert reward in (0.0, 50.0) and "true_objective" in info
    env.close()


def test_each_training_run_plays_its_own_games():
    """sample-factory seeds every environment's first reset with its index alone, the same in every run:
    the training environments mix in the run's --seed, so runs with another seed meet other games and a
    rerun with the same seed the same ones (live games, built as sample-factory builds them)."""
    from sample_factory.envs.create_env import create_env

    from rl_baseline.sf.cfg import parse_cfg
    from rl_baseline.sf.env import register_envs

    register_envs()

    def first_game(seed: str, env_index: int = 0) -> bytes:
        cfg = parse_cfg(["--env", "nle_fixed_eat_action", "--llm_reward", "0", "--extrinsic_reward", "0.1",
                         "--max_episode_steps", "20", "--device", "cpu", "--seed", seed])
        env = create_env(cfg.env, cfg=cfg, env_config=None)
        try:
            env.reset(seed=env_index)  # what sample-factory's rollout worker does
            game = env.unwrapped.current_observation()
            return game["tty_chars"].tobytes() + game["blstats"].tobytes()
        finally:
            env.close()

    assert first_game("2") == first_game("2")
    assert first_game("2") != first_game("3")
    assert first_game("2", 0) != first_game("2", 1)


# The two commands of the original release's README, character for character (including its
# lines without a trailing backslash: they are read here as one command line).
RELEASE_EVAL_COMMAND = """python -m scripts.main --algo APPO --num_workers 24 --num_envs_per_worker 20 \\
                       --batch_size 4096 --reward_scale 0.1 --obs_scale 255.0 \\
                       --train_for_env_steps 5_000_000_000 --save_every_steps 6_000_000_000 \\
                       --code_seed 42 --seed 2  --stats_avg 1000
                       --train_dir train_dir/skill_policy/ --experiment default \\
                       --reward_dir "['train_dir/skill_rewards/llama3_discoverer_default',
                                      'train_dir/skill_rewards/llama3_descender_default',
                                      'train_dir/skill_rewards/llama3_ascender_default',
                                      'train_dir/skill_rewards/llama3_worshipper_default',
                                      'train_dir/skill_rewards/llama3_merchant_default']"
                         --evaluation True --eval_target goldenexit
"""
RELEASE_TRAIN_COMMAND = """python -m scripts.main --algo APPO  --num_workers 24 --num_envs_per_worker 20 \\
                       --batch_size 4096 --reward_scale 0.1 --obs_scale 255.0 \\
                       --train_for_env_steps 4_000_000_000 --save_every_steps 50_000_000 \\
                       --keep_checkpoints 5 --stats_avg 1000 --seed 2 --code_seed 42  \\
                       --reward_dir "['train_dir/skill_rewards/llama3_discoverer_default',
                                      'train_dir/skill_rewards/llama3_descender_default',
                                      'train_dir/skill_rewards/llama3_ascender_default',
                                      'train_dir/skill_rewards/llama3_worshipper_default',
                                      'train_dir/skill_rewards/llama3_merchant_default']"
                       --extrinsic_reward 0.0 --llm_reward 0.1
                       --train_dir train_dir/skill_policy/
                       --experiment default
"""


def _release_argv(command: str) -> list[str]:
    import shlex

    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "scripts.main"]
    return argv[3:]


def test_release_readme_commands_parse_verbatim():
    from rl_baseline.sf.cfg import SkillEnvConfig, parse_cfg

    expected_dirs = [f"train_dir/skill_rewards/llama3_{s}_default" for s in SKILLS]
    train = parse_cfg(_release_argv(RELEASE_TRAIN_COMMAND))
    assert train.env == "nle_skill" and train.evaluation is False and train.num_skills == len(SKILLS)
    assert train.reward_dirs == expected_dirs and train.threshold_quantiles == [0.95, 0.85, 0.85, 0.85, 0.85]
    assert (train.num_workers, train.num_envs_per_worker, train.batch_size) == (24, 20, 4096)
    assert train.train_for_env_steps == 4_000_000_000 and train.save_every_steps == 50_000_000
    assert train.keep_checkpoints == 5 and train.stats_avg == 1000 and train.game_reward_scale == 0.1
    assert (train.seed, train.code_seed, train.llm_reward, train.extrinsic_reward) == (2, 42, 0.1, 0.0)
    assert train.train_dir == "train_dir/skill_policy/" and train.experiment == "default"
    assert train.restart_behavior == "resume"
    assert SkillEnvConfig.from_cfg(train).task == "exploration"

    ev = parse_cfg(_release_argv(RELEASE_EVAL_COMMAND))
    assert ev.evaluation is True and ev.eval_target == "goldenexit" and ev.reward_dirs == expected_dirs
    assert ev.train_for_env_steps == 5_000_000_000 and ev.save_every_steps == 6_000_000_000
    assert SkillEnvConfig.from_cfg(ev).task == "goldenexit"


@pytest.mark.slow
def test_release_evaluation_without_checkpoint_is_a_clear_error(tmp_path):
    proc = run_main(_release_argv(RELEASE_EVAL_COMMAND) + ["--device", "cpu"], tmp_path, timeout=120)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-3000:]
    assert "train_dir/skill_policy" in text and "Traceback" not in text
    assert not (tmp_path / "train_dir" / "skill_policy" / "default" / "eval").exists()


def test_extrinsic_only_baseline_needs_no_reward_model():
    from rl_baseline.sf.cfg import SkillEnvConfig, resolve_cfg

    cfg = resolve_cfg(["--env", "nle_fixed_eat_action", "--root_env", "NetHackScore-v1", "--llm_reward", "0",
                       "--extrinsic_reward", "1"], saved=False)
    assert cfg.reward_thresholds == [] and cfg.reward_dirs == []
    env_cfg = SkillEnvConfig.from_cfg(cfg)
    assert env_cfg.llm_reward == 0.0 and env_cfg.extrinsic_reward == 1.0 and env_cfg.num_skills == 1


BROKEN_ENV_MODULE = """
def make(full_env_name, cfg, env_config=None, render_mode=None):
    from rl_baseline.sf import env as E
    everywhere = {everywhere}
    if everywhere or (env_config is not None and env_config.get("worker_index", -1) == 1):
        raise RuntimeError("simulated environment failure")
    return E.build_skill_env(E.SkillEnvConfig.from_cfg(cfg))
"""
BROKEN_DRIVER = """
import sys
import broken_env
import rl_baseline.sf.env as E
E.make_sf_env = broken_env.make  # register_envs() registers this factory
from scripts.main import main
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["one_worker", "everywhere"])
def test_environment_failure_ends_the_run_with_an_error(tmp_path, where):
    """A rollout worker whose environment fails stops the run (no hang); an env that cannot be
    built at all is reported before any worker starts."""
    (tmp_path / "broken_env.py").write_text(BROKEN_ENV_MODULE.replace("{everywhere}", str(where == "everywhere")))
    (tmp_path / "drive.py").write_text(BROKEN_DRIVER)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}", OMP_NUM_THREADS="1")
    args = ["--num_workers", "2", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "32",
            "--max_episode_steps", "100", "--device", "cpu", "--train_dir", str(tmp_path / "runs"),
            "--experiment", where, "--llm_reward", "0", "--train_for_env_steps", "100000"]
    proc = run_command([sys.executable, str(tmp_path / "drive.py"), *args], tmp_path, env, timeout=150)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    assert "simulated environment failure" in text
    if where == "one_worker":
        assert "worker process exited during training: rollout_proc1" in text
    else:
        assert "building the environment failed" in text and "RolloutWorker" not in text


LEARNER_FAULT_DRIVER = """
import sys
from sample_factory.algo.learning.learner import Learner

def broken_init(self, *args, **kwargs):
    raise RuntimeError("simulated learner failure")

Learner.init = broken_init  # the learner process starts from this one, with the fault in place
from rl_baseline.sf import train
train.WORKER_FAILURE_GRACE_S = 5.0  # the watchdog's grace cut from 30 s: the same path, 25 s sooner
from scripts.main import main
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_learner_that_fails_at_start_ends_the_run_within_a_minute(tmp_path):
    """The learner's event loop raised, its process stayed alive (non-daemon threads) and training waited for its
    first heartbeat for minutes ("Components not started: LearnerWorker_p0"); now the process exits, the watchdog
    sees it and the run ends non-zero with the error and the newest checkpoint named."""
    (tmp_path / "drive.py").write_text(LEARNER_FAULT_DRIVER)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}", OMP_NUM_THREADS="1")
    args = ["--num_workers", "1", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "16",
            "--device", "cpu", "--train_dir", str(tmp_path / "runs"), "--experiment", "x", "--llm_reward", "0",
            "--train_for_env_steps", "100000"]
    start = time.monotonic()
    proc = run_command([sys.executable, str(tmp_path / "drive.py"), *args], tmp_path, env, timeout=150)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text[-3000:]
    assert time.monotonic() - start < 90  # start-up, then under a minute from the failure
    assert "simulated learner failure" in text
    assert "worker process exited during training: learner_proc0 (exit code 1)" in text
    assert "newest checkpoint: none saved yet; the same command resumes from it" in text


# ----------------------------------------------------------------------------- end to end
REPO = Path(__file__).resolve().parents[1]


def _meta_policy_root(tmp: Path) -> Path:
    """The reference meta-policies, with the exploration discoverer budget cut to 15 turns."""
    root = tmp / "meta_policies"
    shutil.copytree(REPO / "rl_baseline" / "meta_policies", root)
    path = root / "exploration" / "seed42" / "execution.py"
    source = path.read_text()
    assert "self.discoverer_skill_steps = 500" in source
    path.write_text(source.replace("self.discoverer_skill_steps = 500", "self.discoverer_skill_steps = 15"))
    return root


def run_command(cmd: list[str], cwd: Path, env: dict, timeout: int) -> subprocess.CompletedProcess:
    """Runs ``cmd`` in its own process group; on timeout the whole group (workers included) is killed."""
    import signal

    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd[:3])} ... did not finish within {timeout} s:\n{out[-2000:]}{err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_main(args: list[str], cwd: Path, timeout: int = 200) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return run_command([sys.executable, "-m", "scripts.main", *args], cwd, env, timeout)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("skill_rl")
    dirs = build_tiny_reward_dirs(tmp)
    base = [
        "--num_workers", "2", "--num_envs_per_worker", "4", "--batch_size", "512", "--rollout", "32",
        "--max_episode_steps", "300", "--device", "cpu", "--train_dir", str(tmp / "skill_policy"),
        "--experiment", "e2e", "--reward_dir", repr(dirs), "--eps_threshold_quantile", "0.5", "--stats_avg", "4",
        "--experiment_summaries_interval", "2", "--meta_policy_root", str(_meta_policy_root(tmp)),
        "--code_seed", "42", "--seed", "2",
        # cross sample-factory's best-model save early, as every real run does: from then on its
        # checkpoints carried a numpy.float64 that torch's safe loader refused
        "--save_best_after", "500", "--save_best_every_sec", "1",
    ]
    first = run_main(base + ["--train_for_env_steps", "6000", "--save_every_steps", "3000"], tmp)
    return tmp, base, dirs, first


def _checkpoints(exp: Path) -> list[Path]:
    return sorted((exp / "checkpoint_p0").glob("checkpoint_*.pth"))


def test_training_run_writes_checkpoint_and_skill_stats(trained):
    tmp, _, _, proc = trained
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    exp = tmp / "skill_policy" / "e2e"
    # --save_every_steps 3000 adds a checkpoint half way through (the time-based one would wait 120 s)
    steps = [int(c.stem.split("_")[-1]) for c in _checkpoints(exp)]
    assert len(steps) >= 2 and steps[0] < 6000 <= steps[-1], steps
    stats = json.loads((exp / "skill_stats.json").read_text())["means"]
    nonzero = [s for s in SKILLS if abs(stats.get(f"intrinsic/{s}_mean", 0.0)) > 0]
    assert len(nonzero) >= 2, stats
    assert 0.0 < stats["intrinsic/cache_hit_rate"] <= 1.0
    assert "intrinsic reward cache hit rate" in proc.stdout + proc.stderr
    assert sum(stats[f"skills/{s}_share"] for s in SKILLS) == pytest.approx(1.0, abs=1e-6)


def test_every_training_scalar_is_a_finite_number(trained):
    from orchestration.report import read_tensorboard_scalars

    tmp, _, _, proc = trained
    assert proc.returncode == 0
    scalars = read_tensorboard_scalars(tmp / "skill_policy" / "e2e", prefixes=("",))
    assert "train/adv_min" in scalars and "train/policy_loss" in scalars
    bad = {tag for tag, (_, values) in scalars.items() if not all(math.isfinite(v) for v in values)}
    assert not bad, bad
    # the V-trace advantages' range (sample-factory reads GAE's, absent with --with_vtrace True)
    assert all(lo <= hi for lo, hi in zip(scalars["train/adv_min"][1], scalars["train/adv_max"][1]))
    assert any(lo < hi for lo, hi in zip(scalars["train/adv_min"][1], scalars["train/adv_max"][1]))


def test_skill_one_hot_reaches_the_network(trained):
    import torch
    from sample_factory.algo.learning.learner import Learner
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.model.model_utils import get_rnn_size

    from rl_baseline.models.obs import model_observation, model_observation_space
    from rl_baseline.sf.cfg import resolve_cfg
    from rl_baseline.sf.env import make_base_env, register_envs

    tmp, base, _, proc = trained
    assert proc.returncode == 0
    cfg = resolve_cfg(base)  # the saved experiment under the training command, as a resumed run reads it
    register_envs()
    space = model_observation_space(len(SKILLS))
    env = make_base_env(50)
    nle_obs, _ = env.reset(seed=3)
    model = create_actor_critic(cfg, space, env.action_space)
    state = Learner.load_checkpoint(_checkpoints(tmp / "skill_policy" / "e2e"), torch.device("cpu"))
    model.load_state_dict(state["model"])
    model.eval()
    values = []
    with torch.no_grad():
        for skill in range(len(SKILLS)):
            obs = model_observation(nle_obs, skill, len(SKILLS))
            batch = {k: torch.from_numpy(np.asarray(v)[None].copy()) for k, v in obs.items()}
            out = model(prepare_and_normalize_obs(model, batch), torch.zeros(1, get_rnn_size(cfg)))
            values.append(out["action_logits"].numpy().copy())
    env.close()
    assert any(not np.allclose(values[0], v) for v in values[1:]), "policy output ignores the skill one-hot"


@pytest.mark.parametrize("task", ["gnomish", "goldenexit"])
def test_evaluation_writes_results(trained, task):
    tmp, base, _, proc = trained
    assert proc.returncode == 0
    ev = run_main(base + ["--evaluation", "True", "--eval_replace", "True", "--eval_target", task, "--eval_protocol", "project",
                          "--eval_episodes", "2",
                          "--eval_num_envs", "2"] + (["--save_video", "True"] if task == "gnomish" else []), tmp)
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    out = tmp / "skill_policy" / "e2e" / "eval"
    result = json.loads((out / f"{task}_seed42.json").read_text())
    for key in ("task", "measure", "episodes", "mean", "stderr", "episode_lengths", "skill_time_share",
                "per_episode", "checkpoint", "env_steps"):
        assert key in result
    assert result["task"] == task and result["episodes"] == 2 and len(result["episode_lengths"]) == 2
    assert result["measure"] == "success" and 0.0 <= result["mean"] <= 1.0
    assert sum(result["skill_time_share"].values()) == pytest.approx(1.0, abs=1e-6)
    rows = (out / f"{task}_seed42.csv").read_text().splitlines()
    assert rows[0].startswith("episode,success,count,value,length") and len(rows) == 1 + 2 + 2
    assert (out / f"{task}_seed42.png").stat().st_size > 0
    if task == "gnomish":
        assert (out / "gnomish_seed42.gif").stat().st_size > 0


@pytest.mark.slow
def test_release_protocol_evaluation_runs_a_step_budget(trained):
    """The default protocol (the authors'): a budget of env steps over the games, the last
    --eval_stats_avg finished episodes averaged, both rule sets in the JSON."""
    tmp, base, _, proc = trained
    assert proc.returncode == 0
    ev = run_main(base + ["--evaluation", "True", "--eval_replace", "True", "--eval_target", "buc", "--eval_env_steps", "400",
                          "--eval_num_envs", "2", "--eval_stats_avg", "3", "--game_clock", "2026-11-26 12:00:00"], tmp)
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    result = json.loads((tmp / "skill_policy" / "e2e" / "eval" / "buc_seed42.json").read_text())
    # --game_clock: the evaluation ran itself again on NetHack's clock pinned at a full-moon noon (its log times
    # show the pinned date: the whole process's clock) and its results say so
    assert "running the command again under it" in ev.stdout
    assert "[2026-11-26 12:0" in ev.stdout + ev.stderr
    assert result["game_clock"] == "pinned at 2026-11-26 12:00:00, Thursday, full moon (Luck +1)"
    assert result["protocol"] == result["episodes_ended_by"] == "release"
    assert result["run"]["env_step_budget"] == result["run"]["env_steps_run"] == 400
    assert result["run"]["num_envs"] == 2
    finished = result["run"]["finished_episodes"]
    assert len(result["per_episode"]) == finished and result["release"]["finished_episodes"] == finished
    assert sum(e["length"] for e in result["per_episode"]) <= 400
    assert result["release"]["metric"] == "num_buc" and result["release"]["episodes"] <= 3
    assert result["mean"] == result["release"]["mean"] or result["release"]["episodes"] == 0
    assert result["project"]["measure"] == "count" and result["project"]["episodes"] == min(finished, 3)
    for e in result["per_episode"]:
        assert e["ended_by"] in ("game", "step_limit", "release")
        assert e["ended_by"] != "release" or e["release"]["reached"]


@pytest.mark.slow
def test_evaluations_on_other_games_merge_into_one(trained, capsys):
    """One evaluation per core (each its own --seed, so its own games) merged by scripts.merge_evaluations is one
    evaluation of all their episodes: counts summed, every episode kept, the release's window over them all."""
    from scripts import merge_evaluations

    tmp, base, _, proc = trained
    assert proc.returncode == 0
    parts = []
    for seed in (5, 6):
        ev = run_main(base + ["--evaluation", "True", "--eval_replace", "True", "--eval_target", "gnomish", "--eval_env_steps", "300",
                              "--eval_num_envs", "2", "--seed", str(seed), "--eval_dir", f"parts/s{seed}"], tmp)
        assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
        parts.append(tmp / "parts" / f"s{seed}" / "gnomish_seed42.json")
    a, b = (json.loads(p.read_text()) for p in parts)
    assert (a["seed"], b["seed"]) == (5, 6)
    assert a["per_episode"] != b["per_episode"]  # other games
    out = tmp / "merged" / "gnomish_seed42.json"
    merged = merge_evaluations.main(["--inputs", *map(str, parts), "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(merged))
    assert out.with_suffix(".csv").is_file() and out.with_suffix(".png").is_file()
    assert merged["seed"] == [5, 6] and merged["checkpoint"] == a["checkpoint"]
    assert merged["run"]["num_envs"] == 4 and merged["run"]["env_steps_run"] == 600
    n = a["run"]["finished_episodes"] + b["run"]["finished_episodes"]
    assert merged["run"]["finished_episodes"] == len(merged["per_episode"]) == n
    assert sorted(e["length"] for e in merged["per_episode"]) == sorted(
        e["length"] for e in a["per_episode"] + b["per_episode"])
    reached = sum(bool(e["release"]["reached"]) for e in a["per_episode"] + b["per_episode"])
    assert merged["release"]["finished_episodes"] == n and merged["episodes"] == n
    assert merged["mean"] == pytest.approx(reached / n)
    assert "games" in capsys.readouterr().out
    # the same games twice, and an existing --out, are refused before anything is written
    for argv in (["--inputs", str(parts[0]), str(parts[0]), "--out", str(tmp / "merged" / "twice.json")],
                 ["--inputs", *map(str, parts), "--out", str(out)]):
        with pytest.raises(SystemExit) as exit_info:
            merge_evaluations.main(argv)
        assert exit_info.value.code == 2
    assert "played the same games" in capsys.readouterr().err
    assert not (tmp / "merged" / "twice.json").exists()


@pytest.mark.slow
def test_reference_policies_evaluate_beside_the_trained_one(trained):
    """--eval_policy untrained / random: the same task evaluation with the initial weights or random
    actions, written beside the trained policy's results (never over them) and named in the JSON."""
    tmp, base, _, proc = trained
    assert proc.returncode == 0
    exp = tmp / "skill_policy" / "e2e"
    args = base + ["--evaluation", "True", "--eval_replace", "True", "--eval_target", "buc", "--eval_env_steps", "300", "--eval_num_envs", "2"]
    ev = run_main(args, tmp)
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    trained_json = (exp / "eval" / "buc_seed42.json").read_text()
    results = {}
    for kind in ("untrained", "random"):
        ev = run_main(args + ["--eval_policy", kind], tmp)
        assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
        results[kind] = json.loads((exp / f"eval_{kind}" / "buc_seed42.json").read_text())
        assert results[kind]["policy"] == kind and results[kind]["env_steps"] == 0
        assert results[kind]["checkpoint"] == "None" and kind in results[kind]["experiment"]
        assert results[kind]["run"]["env_steps_run"] == 300
        assert {"untrained": "evaluating the untrained network", "random": "evaluating uniformly random actions"}[
            kind] in ev.stdout + ev.stderr
    assert (exp / "eval" / "buc_seed42.json").read_text() == trained_json
    assert json.loads(trained_json)["policy"] == "trained" and json.loads(trained_json)["env_steps"] > 0


def test_rerun_resumes_from_saved_step_count(trained):
    tmp, base, _, proc = trained
    assert proc.returncode == 0
    exp = tmp / "skill_policy" / "e2e"
    before = int(_checkpoints(exp)[-1].stem.split("_")[-1])
    again = run_main(base + ["--train_for_env_steps", str(before + 1500)], tmp)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"env_steps={before}" in again.stdout + again.stderr
    after = int(_checkpoints(exp)[-1].stem.split("_")[-1])
    assert after > before


@pytest.mark.parametrize("case", ["missing_dir", "wrong_length", "missing_quantile"])
def test_bad_reward_configuration_fails_before_workers(trained, case):
    tmp, _, dirs, _ = trained
    args = {
        "missing_dir": ["--reward_dir", repr(dirs[:4] + [str(tmp / "nope")])],
        "wrong_length": ["--reward_dir", repr(dirs[:3])],
        "missing_quantile": ["--reward_dir", repr(dirs), "--eps_threshold_quantile", "0.123"],
    }[case]
    proc = run_main(["--num_workers", "2", "--device", "cpu", "--train_dir", str(tmp / "bad"), "--experiment", case]
                    + args, tmp, timeout=120)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert {"missing_dir": "not found", "wrong_length": "--num_skills is 5", "missing_quantile": "0.123"}[case] in text
    assert "RolloutWorker" not in text and not (tmp / "bad" / case / "checkpoint_p0").exists()


def test_a_threshold_not_above_zero_is_a_warning_naming_the_reward_model(trained, tmp_path, caplog):
    from rl_baseline.sf.cfg import resolve_cfg

    _, _, dirs, _ = trained
    bunched = tmp_path / "llama3_descender_default"
    shutil.copytree(dirs[1], bunched)
    csv = bunched / "reward_metrics" / "train_norm_quantiles.csv"
    header, *rows = csv.read_text().splitlines()
    # a quantile row as when most labels are ties: every quantile just below zero
    rows[-1] = ",".join(f"{-0.03 + 0.001 * i:.6f}" for i in range(len(header.split(","))))
    csv.write_text("\n".join([header, *rows]) + "\n")
    argv = ["--device", "cpu", "--train_dir", str(tmp_path / "runs"), "--experiment", "x",
            "--reward_dir", repr([dirs[0], str(bunched), *dirs[2:]]), "--meta_policy_root",
            str(_meta_policy_root(tmp_path)), "--code_seed", "42"]
    with caplog.at_level("WARNING"):
        cfg = resolve_cfg(argv, saved=False)
    warned = [r.getMessage() for r in caplog.records if "rewarded negatively" in r.getMessage()]
    assert len(warned) == 1 and str(bunched) in warned[0] and "quantile 0.85" in warned[0], warned
    assert cfg.experiment == "x"  # a warning: the run goes ahead


@pytest.mark.slow
def test_extrinsic_only_baseline_trains_and_is_evaluated_on_a_task(tmp_path):
    """The paper's game-reward-only baseline: trained in the single-skill env, then evaluated
    with --eval_target like the skill policy; evaluation finds the env in the saved config."""
    common = ["--device", "cpu", "--train_dir", str(tmp_path / "runs"), "--experiment", "extrinsic_only",
              "--max_episode_steps", "100", "--seed", "3"]
    train = run_main(["--env", "nle_fixed_eat_action", "--root_env", "NetHackScore-v1", "--llm_reward", "0",
                      "--extrinsic_reward", "1", "--num_workers", "1", "--num_envs_per_worker", "2",
                      "--batch_size", "128", "--rollout", "32", "--train_for_env_steps", "1500"] + common, tmp_path)
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    saved = json.loads((tmp_path / "runs" / "extrinsic_only" / "config.json").read_text())
    assert saved["env"] == "nle_fixed_eat_action" and saved["num_skills"] == 1
    ev = run_main(common + ["--evaluation", "True", "--eval_replace", "True", "--eval_target", "gnomish", "--eval_protocol", "project",
                            "--eval_episodes", "2", "--eval_num_envs", "2"], tmp_path)
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    result = json.loads((tmp_path / "runs" / "extrinsic_only" / "eval" / "gnomish_seed42.json").read_text())
    assert result["task"] == "gnomish" and result["episodes"] == 2
    # one network, no policy over skills: the whole episode is spent in the single skill
    assert list(result["skill_time_share"].values()) == [pytest.approx(1.0)]


# ----------------------------------------------------------------------------- checkpoints past the best-model save

def _steps_of(path: Path) -> int:
    return int(path.stem.split("_")[2])


def test_run_past_the_best_model_save_writes_checkpoints_the_default_loader_reads(trained):
    import torch

    tmp, _, _, proc = trained
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ckpt_dir = tmp / "skill_policy" / "e2e" / "checkpoint_p0"
    best = sorted(ckpt_dir.glob("best_*.pth"))
    assert best, "the run never crossed sample-factory's best-model save"
    last = _checkpoints(tmp / "skill_policy" / "e2e")[-1]
    for path in best + [last]:
        state = torch.load(path)  # torch's default: weights_only=True
        assert type(state["best_performance"]) is float, path
    assert torch.load(last)["best_performance"] > -1e9, "the last checkpoint was written before the best-model save"


def test_evaluation_on_the_best_checkpoint(trained):
    tmp, base, _, proc = trained
    assert proc.returncode == 0
    ev = run_main(base + ["--evaluation", "True", "--eval_replace", "True", "--eval_target", "gnomish", "--eval_protocol", "project",
                          "--eval_episodes", "1", "--eval_num_envs", "1", "--load_checkpoint_kind", "best"], tmp)
    assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    result = json.loads((tmp / "skill_policy" / "e2e" / "eval" / "gnomish_seed42.json").read_text())
    assert Path(result["checkpoint"]).name.startswith("best_")


def _write_pre_fix_format(path: Path) -> None:
    """Rewrites a checkpoint the way sample-factory wrote it before the fix: best_performance a numpy.float64."""
    import torch

    state = torch.load(path)
    state["best_performance"] = np.float64(state["best_performance"])
    torch.save(state, path)
    with pytest.raises(Exception, match="numpy"):
        torch.load(path)


def _copy_experiment(tmp: Path, name: str) -> tuple[Path, list[str]]:
    import shutil

    dst = tmp / name
    shutil.copytree(tmp / "skill_policy" / "e2e", dst / "e2e")
    shutil.rmtree(dst / "e2e" / "eval", ignore_errors=True)
    return dst / "e2e", ["--train_dir", str(dst)]


def test_kill_9_mid_run_then_resume_continues_from_the_newest_readable_checkpoint(trained):
    """A run killed with SIGKILL, whose newest checkpoint is then damaged (a save cut short) and whose
    older ones are in the pre-fix format, resumes from the newest readable one and keeps its step count."""
    import signal
    import time

    tmp, base, _, proc = trained
    assert proc.returncode == 0
    exp, where = _copy_experiment(tmp, "killed")
    start = _steps_of(_checkpoints(exp)[-1])
    cmd = [sys.executable, "-m", "scripts.main", *base, *where, "--train_for_env_steps", str(start + 10_000_000),
           "--save_every_steps", "1000"]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    running = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.time() + 180
    try:
        while time.time() < deadline and _steps_of(_checkpoints(exp)[-1]) < start + 2000:
            assert running.poll() is None, "training exited before it was killed"
            time.sleep(0.5)
    finally:
        os.killpg(running.pid, signal.SIGKILL)
        running.wait()
    ckpts = _checkpoints(exp)
    good = ckpts[-1]
    assert _steps_of(good) >= start + 2000, "no checkpoint was written after the restart within 180 s"
    for path in ckpts:
        _write_pre_fix_format(path)
    data = good.read_bytes()
    train_step = int(good.stem.split("_")[1])
    damaged = good.with_name(f"checkpoint_{train_step + 1:09d}_{_steps_of(good) + 999}.pth")
    damaged.write_bytes(data[: len(data) // 2])
    (exp / "checkpoint_p0" / "checkpoint_temp").write_bytes(data[:100])  # a save interrupted by the kill

    good_steps = _steps_of(good)
    again = run_main(base + where + ["--train_for_env_steps", str(good_steps + 1500)], tmp)
    text = again.stdout + again.stderr
    assert again.returncode == 0, text[-4000:]
    assert f"skipping unreadable checkpoint {damaged}" in text and damaged.name in text
    assert f"env_steps={good_steps}" in text and "starting from scratch" not in text
    assert damaged.exists() and damaged.read_bytes() == data[: len(data) // 2], "the damaged file was touched"
    newest = max(_steps_of(c) for c in _checkpoints(exp) if c != damaged)
    assert newest > good_steps


def test_resume_with_no_readable_checkpoint_stops_with_the_files_named(trained):
    tmp, base, _, proc = trained
    assert proc.returncode == 0
    exp, where = _copy_experiment(tmp, "unreadable")
    before = {p: p.read_bytes()[:64] for p in _checkpoints(exp)}
    for path in before:
        path.write_bytes(before[path])  # truncated to 64 bytes
    again = run_main(base + where + ["--train_for_env_steps", "100000"], tmp, timeout=120)
    text = again.stdout + again.stderr
    assert again.returncode == 2, text[-3000:]
    assert "cannot resume" in text and all(p.name in text for p in before) and "--restart_behavior restart" in text
    assert "RolloutWorker" not in text
    assert {p: p.read_bytes() for p in _checkpoints(exp)} == before, "nothing may be written or removed"

    fresh = run_main(base + where + ["--train_for_env_steps", "1000", "--restart_behavior", "restart"], tmp)
    assert fresh.returncode == 0, (fresh.stdout + fresh.stderr)[-3000:]
    old = exp.parent / "e2e_old0001" / "checkpoint_p0"
    assert sorted(p.name for p in old.glob("checkpoint_*.pth")) == sorted(p.name for p in before)
    assert min(_steps_of(c) for c in _checkpoints(exp)) < 3000


# ----------------------------------------------------------------------------- fidelity to the release's training

def test_depth_change_reaching_the_reward_models_is_clipped_to_one_level():
    """A trapdoor (two levels down while one skill runs) is read as one level, as in the release."""
    from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache

    class Recorder(LengthModel):
        seen: list[float] = []

        def score(self, messages, depth_change):
            Recorder.seen.extend(float(d) for d in np.asarray(depth_change).reshape(-1))
            return super().score(messages, depth_change)

    class TrapdoorNLE(ScriptedNLE):
        SCRIPT = [("There is a trap door here.", 1, False), ("You fall through a trap door!", 3, False),
                  ("You climb up the stairs.", 1, False)]

    class StayDescender(ScriptedMetaPolicy):
        def should_terminate(self, *args):
            return False

        def next_skill(self, *args):
            return "descender"

    meta = StayDescender()
    reward = IntrinsicReward([Recorder(1.0) for _ in SKILLS], [1.0] * len(SKILLS), beta=1.0, llm_coef=0.1,
                             cache=ScoreCache())
    env = SkillRuntime(TrapdoorNLE(), lambda: meta, reward, num_skills=len(SKILLS), observation_fn=one_hot_obs,
                       observation_space=gym.spaces.Dict({}))
    env.reset()
    for _ in range(3):
        env.step(0)
    # the release's timing scores the observations the actions were chosen on: the reset's, then the two after it
    assert Recorder.seen == [0.0, 0.0, 1.0], Recorder.seen  # +2 levels is read as +1


def test_reward_training_inputs_clip_the_depth_change():
    from rlaif.dataset import STAT_FIELDS, STAT_INDEX, ObservationDataset
    from rlaif.train_reward import reward_inputs

    n = 4
    stats = np.zeros((n, 2, len(STAT_FIELDS)), dtype=np.int64)
    d = STAT_INDEX["depth"]
    stats[:, 0, d] = [1, 1, 4, 2]
    stats[:, 1, d] = [3, 2, 1, 2]  # +2 (a hole), +1, -3, 0
    messages = np.zeros((n, 2, 256), dtype=np.uint8)
    ds = ObservationDataset(messages=messages, stats=stats)
    assert reward_inputs(ds).depth_change.tolist() == [1.0, 1.0, -1.0, 0.0]


def test_release_learner_defaults_and_reward_scale_on_the_game_reward_only():
    from rl_baseline.sf.cfg import SkillEnvConfig, parse_cfg
    from rl_baseline.sf.env import build_skill_env

    cfg = parse_cfg(["--reward_scale", "0.1", "--extrinsic_reward", "0.5", "--llm_reward", "0.1",
                     "--code_seed", "-1", "--max_episode_steps", "50"])
    assert cfg.rnn_type == "gru" and cfg.with_vtrace is True and cfg.normalize_returns is False
    assert cfg.msg_max_keys == 20
    # sample-factory must not scale the env's reward: the skill reward enters unscaled, as in the release
    assert cfg.reward_scale == 1.0 and cfg.game_reward_scale == 0.1
    env = build_skill_env(SkillEnvConfig.from_cfg(cfg))
    try:
        assert env.reward_fn.extrinsic_coef == pytest.approx(0.05)  # 0.5 x 0.1 on the game reward
        assert env.reward_fn.combine(10.0, 2.0) == pytest.approx(0.05 * 10.0)  # no reward model loaded
        assert env.reward_fn.msg_max_keys == 20
    finally:
        env.close()
    assert parse_cfg(["--rnn_type", "lstm"]).rnn_type == "lstm"
    assert parse_cfg(["--msg_max_keys", "-1"]).msg_max_keys == -1


def test_progress_runs_need_no_reward_model_and_the_release_timing_is_the_default():
    from rl_baseline.sf.cfg import SkillEnvConfig, parse_cfg, resolve_cfg
    from rl_baseline.sf.env import build_skill_env

    cfg = resolve_cfg(["--skill_reward", "progress", "--reward_dir", "['missing']"], saved=False)
    assert cfg.reward_dirs == [] and cfg.llm_reward == 0.1
    config = SkillEnvConfig.from_cfg(cfg)
    assert (config.skill_reward, config.reward_timing) == ("progress", "release")
    env = build_skill_env(config)
    try:
        assert env.skill_reward == "progress" and env.reward_fn.llm_coef == pytest.approx(0.1)
    finally:
        env.close()
    assert SkillEnvConfig.from_cfg(parse_cfg([])).reward_timing == "release"
    assert SkillEnvConfig.from_cfg(parse_cfg(["--skill_reward_timing", "after_action"])).reward_timing == "after_action"


@pytest.mark.parametrize("argv,flag", [(["--msg_max_keys", "-2"], "--msg_max_keys"),
                                       (["--rnn_type", "transformer"], "--rnn_type"),
                                       (["--skill_reward", "oracle"], "--skill_reward"),
                                       (["--skill_reward_timing", "later"], "--skill_reward_timing"),
                                       (["--skill_reward", "progress", "--env", "nle_fixed_eat_action"],
                                        "--skill_reward progress")])
@pytest.mark.slow
def test_bad_learner_flags_exit_with_the_flag_named(tmp_path, argv, flag):
    proc = run_main(argv + ["--train_dir", str(tmp_path), "--experiment", "bad", "--device", "cpu"], tmp_path,
                    timeout=120)
    assert proc.returncode == 2 and flag in proc.stdout + proc.stderr
    assert not (tmp_path / "bad").exists()


def test_forced_skill_evaluation_reports_the_skills_measures(trained):
    tmp, _, _, first = trained
    assert first.returncode == 0
    args = ["--train_dir", str(tmp / "skill_policy"), "--experiment", "e2e", "--evaluation", "True", "--eval_replace", "True",
            "--eval_skill", "descender", "--eval_episodes", "3", "--eval_num_envs", "2", "--max_episode_steps", "60"]
    proc = run_main(args, tmp, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = json.loads((tmp / "skill_policy" / "e2e" / "eval" / "skill_descender.json").read_text())
    assert out["skill"] == "descender" and out["policy"] == "trained" and out["episodes"] == 3
    assert set(out["measures"]) == {"levels_descended", "depth_increases", "steps_to_first_descent", "down_stairs_known_share",
                                    "down_stairs_reached"}
    assert all(e["length"] <= 60 for e in out["per_episode"]) and out["checkpoint"].endswith(".pth")
    # training logged the same measures (skills active in an episode only)
    stats = json.loads((tmp / "skill_policy" / "e2e" / "skill_stats.json").read_text())["means"]
    assert "measures/discoverer/cells_per_1000_steps" in stats and "skills/meta_policy_errors" in stats
    bad = run_main(args[:-8] + ["--eval_skill", "juggler"], tmp, timeout=60)
    assert bad.returncode == 2 and "--eval_skill 'juggler'" in bad.stdout + bad.stderr


def test_skill_report_compares_trained_untrained_and_random(trained):
    tmp, _, _, first = trained
    policy_dir = tmp / "skill_policy" / "e2e"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "scripts.skill_report", "--policy_dir", str(policy_dir), "--episodes", "2",
           "--num_envs", "2", "--max_episode_steps", "40", "--no_progress"]
    proc = run_command(cmd, tmp, env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((policy_dir / "skill_report.json").read_text())
    assert list(report["skills"]) == list(SKILLS)
    # the games are played on NetHack's clock pinned at the default date (the command ran itself again under it)
    assert "running the command again under it" in proc.stdout
    assert report["game_clock"].startswith(f"pinned at {DEFAULT_PINNED}, Wednesday")
    for skill, entry in report["skills"].items():
        assert set(entry["policies"]) == {"trained", "untrained", "random"}
        for kind, result in entry["policies"].items():
            assert result["episodes"] == 2 and result["mean_length"] <= 40
            assert entry["main_measure"] in result["measures"]
        assert entry["policies"]["untrained"]["checkpoint"] is None
    assert report["skills"]["ascender"]["start_depth"] == 3
    assert all(e["start_depth"] == 3 for e in report["skills"]["ascender"]["policies"]["random"]["per_episode"])
    random = report["skills"]["discoverer"]["policies"]["random"]
    assert sum(random["action_shares"].values()) == pytest.approx(1.0) and len(random["action_shares"]) > 3
    assert sum(random["endings"].values()) == 2
    md = (policy_dir / "skill_report.md").read_text()
    assert "| descender | **levels_descended** |" in md and "| trained | untrained | random |" in md
    assert "| skill | policy | median length | most taken actions | endings |" in md
    assert "| discoverer | random |" in md
    assert f"NetHack's clock pinned at {DEFAULT_PINNED}" in md
    assert (policy_dir / "skill_report.png").stat().st_size > 0
    # --out writes the report elsewhere, leaving the policy folder's (the pipeline's) as it was; it had no --out and
    # replaced the pipeline's report without a word
    before = (policy_dir / "skill_report.json").read_bytes()
    proc = run_command(cmd + ["--skill_names", "discoverer", "--policies", "random", "--out", str(tmp / "elsewhere"),
                              "--game_clock", "real"], tmp, env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "note:" not in proc.stdout and (policy_dir / "skill_report.json").read_bytes() == before
    elsewhere = json.loads((tmp / "elsewhere" / "skill_report.json").read_text())
    assert list(elsewhere["skills"]) == ["discoverer"] and elsewhere["game_clock"].startswith("real: ")
    assert "running the command again" not in proc.stdout
    # bad input: a folder without a trained experiment, an unknown skill; nothing is written
    for extra, needle in ((["--policy_dir", str(tmp)], "config.json"),
                          (["--policy_dir", str(policy_dir), "--skill_names", "juggler"], "juggler")):
        before = (policy_dir / "skill_report.json").read_bytes()
        proc = run_command([sys.executable, "-m", "scripts.skill_report", *extra], tmp, env, timeout=60)
        assert proc.returncode == 2 and needle in proc.stdout + proc.stderr
        assert (policy_dir / "skill_report.json").read_bytes() == before


def test_progress_run_trains_without_reward_models_and_gets_its_own_report_column(trained):
    """--skill_reward progress: a run with no reward model trains on the skills' own measures (the discoverer
    is paid the cells it reveals), and the skill report shows it as a column of its own on the same games."""
    tmp, base, _, _ = trained
    args = list(base)
    i = args.index("--reward_dir")
    del args[i:i + 2]
    args[args.index("--experiment") + 1] = "progress"
    proc = run_main(args + ["--skill_reward", "progress", "--train_for_env_steps", "3000"], tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    progress_dir = tmp / "skill_policy" / "progress"
    assert json.loads((progress_dir / "config.json").read_text())["skill_reward"] == "progress"
    # map cells revealed while discovering: some logged window of episodes earned them (the last few episodes
    # alone, which skill_stats.json averages, can all be short ones that revealed nothing)
    from orchestration.report import read_tensorboard_scalars

    returns = read_tensorboard_scalars(progress_dir, ("intrinsic/",))
    series = [values for tag, (_, values) in returns.items() if tag.startswith("intrinsic/discoverer_return")]
    assert series and max(max(v) for v in series) > 0, returns.keys()
    policy_dir = tmp / "skill_policy" / "e2e"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "scripts.skill_report", "--policy_dir", str(policy_dir), "--episodes", "2",
           "--num_envs", "2", "--max_episode_steps", "40", "--skill_names", "discoverer,descender", "--no_progress"]
    proc = run_command(cmd + ["--progress_policy_dir", str(progress_dir)], tmp, env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # the first report is replaced, and the run says so before it starts
    assert f"note: {policy_dir} already holds a skill report (skill_report.md, skill_report.json, skill_report.png); " \
           "this run replaces it" in proc.stdout
    report = json.loads((policy_dir / "skill_report.json").read_text())
    assert report["policies"][-1] == "progress-trained"
    for entry in report["skills"].values():
        assert entry["policies"]["progress-trained"]["episodes"] == 2
    assert "| trained | untrained | random | progress-trained |" in (policy_dir / "skill_report.md").read_text()
    # an experiment that was not trained on the progress measures is refused, naming the flag
    bad = run_command(cmd + ["--progress_policy_dir", str(policy_dir)], tmp, env, timeout=120)
    assert bad.returncode == 2 and "--progress_policy_dir" in bad.stdout + bad.stderr
    # the progress run's own report: its "trained" column is the diagnostic, and the report says so
    own = [sys.executable, "-m", "scripts.skill_report", "--policy_dir", str(progress_dir), "--episodes", "1",
           "--num_envs", "1", "--max_episode_steps", "20", "--skill_names", "discoverer", "--policies", "trained",
           "--out", str(tmp / "progress_own"), "--no_progress"]
    proc = run_command(own, tmp, env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads((tmp / "progress_own" / "skill_report.json").read_text())["trained_skill_reward"] == "progress"
    assert ("This policy was trained with `--skill_reward progress`: its `trained` column is the privileged "
            "progress diagnostic") in (tmp / "progress_own" / "skill_report.md").read_text()
    assert "trained_skill_reward" not in report  # the method's own report makes no such claim
