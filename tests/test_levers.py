"""The levers of the CPU screens (this project's, not the release's): ``--travel_actions`` and ``--stairs_input``,
on live wizard-mode games, in the network, and refused where they cannot work; ``--policy_heads per_skill`` (the
paper's ablation) refused where it cannot work."""
from __future__ import annotations

import json

import numpy as np
import pytest

from common.nethack.actions import ACTIONS, action_index, action_names_for, agent_actions
from rl_baseline.envs import make_monk_env
from rl_baseline.models.obs import STAIRS_KEY
from rl_baseline.sf.cfg import ConfigError, SkillEnvConfig, parse_cfg, resolve_cfg
from rl_baseline.skills.intrinsic_reward import IntrinsicReward
from rl_baseline.skills.runtime import SingleSkillPolicy, SkillRuntime

MAP = b"\x06"  # wizard mode's Ctrl-F maps the level
TO_DOWN_STAIRS, TO_UP_STAIRS = b"\x14>.", b"\x14<."  # Ctrl-T, the cursor onto a '>' / '<', pick it
SEARCH = action_index("search")


def _hero(env) -> np.ndarray:
    return env.current_observation()["blstats"][:2].astype(int)


def _stairs(env, char: str) -> np.ndarray:
    rows, cols = np.nonzero(env.current_observation()["chars"] == ord(char))
    return np.stack([cols, rows], axis=1)


def test_travel_actions_walk_towards_the_staircase_seen_on_the_map():
    """One action is NetHack's travel command to a staircase: ``_``, ``>`` (or ``<``), ``.``."""
    env = make_monk_env(wizard=True, max_episode_steps=200, travel_actions=True)
    try:
        names = action_names_for(env.action_space.n)
        assert env.action_space.n == len(ACTIONS) + 2 and names[-2:] == ("travel_down", "travel_up")
        env.seed(1, 1001, reseed=False)
        env.reset()
        env.wizard_keys(MAP)
        down = _stairs(env, ">")[0]
        before = np.abs(_hero(env) - down).max()
        for _ in range(6):
            _, _, terminated, _, info = env.step(names.index("travel_down"))
            assert not terminated
        after = np.abs(_hero(env) - down).max()
        assert after < before  # seed 1: from 59 columns away to the staircase's neighbourhood
        assert info["time"] > 1
        env.wizard_keys(TO_DOWN_STAIRS)
        up = _stairs(env, "<")[0]
        start = np.abs(_hero(env) - up).max()
        env.step(names.index("travel_up"))
        assert np.abs(_hero(env) - up).max() < start
    finally:
        env.close()


def test_travel_down_aims_at_the_nearest_staircase_so_it_cannot_leave_the_one_just_climbed():
    """The limit of the travel lever on the level holding the Mines staircase (seed 1: level 2 has two ``>``).

    The release's gnomish retry loop climbs back after a descent outside the Mines; the hero then stands on the
    Dungeons-of-Doom ``>``, which its ``@`` hides, so travel heads for the other one; once a step off it, the
    nearest ``>`` is the one just left again and the hero walks back. Travel alternates and never reaches the
    Mines staircase; a policy must walk there with its own moves."""
    env = make_monk_env(wizard=True, max_episode_steps=200, travel_actions=True)
    try:
        names = action_names_for(env.action_space.n)
        env.seed(1, 1001, reseed=False)
        env.reset()
        env.wizard_level_teleport(2)
        env.wizard_keys(MAP)
        mines, main = sorted(map(tuple, _stairs(env, ">")), key=lambda s: -s[1])  # seed 1: the lower one, row 17
        env.wizard_keys(b"\x14>>.")  # the second '>' the cursor visits: the main dungeon's
        assert tuple(_hero(env)) == main
        _, _, _, _, info = env.step(action_index("down"))
        assert (info["depth"], info["dungeon_number"]) == (3, 0)
        _, _, _, _, info = env.step(action_index("up"))
        assert info["depth"] == 2 and tuple(_hero(env)) == main  # back on the staircase just taken
        positions = []
        for _ in range(6):
            env.step(names.index("travel_down"))
            positions.append(tuple(_hero(env)))
        distance_to = lambda stairs, p: max(abs(p[0] - stairs[0]), abs(p[1] - stairs[1]))  # noqa: E731
        assert distance_to(mines, positions[0]) < distance_to(mines, main)  # first towards the other '>'
        assert main in positions[1:]  # then back onto the nearest: the one just climbed
        assert mines not in positions
    finally:
        env.close()


def test_without_the_flag_the_action_set_is_the_releases():
    env = make_monk_env(max_episode_steps=20)
    try:
        assert env.action_space.n == len(ACTIONS) == 28 and tuple(env.actions) == agent_actions(False)
    finally:
        env.close()


def test_stairs_input_says_the_hero_stands_on_a_staircase_seen_before():
    """On the stairs the hero's '@' hides them: the input comes from the staircases the measures remember."""
    reward = IntrinsicReward([], [], beta=3.0, llm_coef=1.0, extrinsic_coef=0.0)
    env = SkillRuntime(make_monk_env(wizard=True, max_episode_steps=200), lambda: SingleSkillPolicy("descender"),
                       reward, skill_reward="progress", stairs_input=True)
    try:
        assert env.observation_space[STAIRS_KEY].shape == (2,)
        env.unwrapped.seed(1, 1001, reseed=False)
        obs, _ = env.reset()
        assert obs[STAIRS_KEY].tolist() == [0.0, 0.0]
        game = env.unwrapped
        game.wizard_keys(MAP)
        obs, *_ = env.step(SEARCH)  # the mapped level is seen
        game.wizard_keys(TO_DOWN_STAIRS)
        obs, *_ = env.step(SEARCH)
        assert obs[STAIRS_KEY].tolist() == [1.0, 0.0]
        game.wizard_keys(TO_UP_STAIRS)
        obs, *_ = env.step(SEARCH)
        assert obs[STAIRS_KEY].tolist() == [0.0, 1.0]
    finally:
        env.close()


@pytest.mark.parametrize("arch", ["release", "project"])
def test_the_network_takes_the_extra_input_and_actions(arch):
    import gymnasium as gym
    import torch
    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
    from sample_factory.model.actor_critic import create_actor_critic

    from rl_baseline.models.cdgpt5 import SF_DEFAULTS, register_cdgpt5
    from rl_baseline.models.obs import model_observation, model_observation_space

    argv = ["--env", "NetHackScoreMonk-v1", "--experiment", "levers_test", "--rnn_size", "32"]
    parser, _ = parse_sf_args(argv)
    parser.set_defaults(**SF_DEFAULTS)
    cfg = parse_full_cfg(parser, argv)
    cfg.encoder_arch = arch
    register_cdgpt5()
    plain = create_actor_critic(cfg, model_observation_space(5), gym.spaces.Discrete(28))
    model = create_actor_critic(cfg, model_observation_space(5, stairs_input=True), gym.spaces.Discrete(30))
    assert model.encoder.get_out_size() - plain.encoder.get_out_size() == 2  # on to the core with the stats
    nle = {"chars": np.full((21, 79), 32, np.uint8), "colors": np.zeros((21, 79), np.uint8),
           "blstats": np.zeros(27, np.int64), "message": np.zeros(256, np.uint8)}
    outputs = []
    for on_stairs in ([0.0, 0.0], [1.0, 0.0]):
        obs = model_observation(nle, 1, 5)
        obs[STAIRS_KEY] = np.array(on_stairs, np.float32)
        batch = {k: torch.as_tensor(v)[None] for k, v in obs.items()}
        with torch.no_grad():
            head = model.forward_head(batch)
            out = model.forward_tail(model.forward_core(head, torch.zeros(1, 32))[0], values_only=False,
                                     sample_actions=True)
        outputs.append(head)
        assert out["action_logits"].shape == (1, 30)
    assert not torch.allclose(outputs[0], outputs[1])  # the network reads the flags


@pytest.mark.parametrize("flag", ["--travel_actions", "--stairs_input"])
def test_levers_are_refused_where_the_environment_cannot_take_them(flag):
    with pytest.raises(ConfigError, match=f"{flag} True: .*--env nle_fixed_eat_action"):
        parse_cfg(["--env", "nle_fixed_eat_action", flag, "True"])
    assert getattr(SkillEnvConfig.from_cfg(parse_cfg([flag, "True"])), flag[2:]) is True


@pytest.mark.parametrize("flag,trained", [("--travel_actions", True), ("--stairs_input", True),
                                          ("--stairs_input", False)])
def test_a_run_refuses_to_load_with_another_network_shape_naming_the_flag(tmp_path, flag, trained):
    run = tmp_path / "exp"
    run.mkdir()
    saved = vars(parse_cfg(["--train_dir", str(tmp_path), "--experiment", "exp"]))
    saved[flag[2:]] = trained
    (run / "config.json").write_text(json.dumps({k: v for k, v in saved.items() if k != "cli_args"}, default=str))
    argv = ["--train_dir", str(tmp_path), "--experiment", "exp", "--evaluation", "True", "--eval_target", "gnomish"]
    with pytest.raises(ConfigError, match=f"{flag} {not trained}: the run at .* was trained with {flag} {trained}"):
        resolve_cfg(argv + [flag, str(not trained)], files=False)
    assert getattr(resolve_cfg(argv, files=False), flag[2:]) is trained  # without the flag: the saved value


@pytest.mark.parametrize("argv,match", [
    (["--env", "nle_fixed_eat_action"], "--policy_heads per_skill: .*--env nle_fixed_eat_action"),
    (["--actor_critic_share_weights", "False"], "drop --actor_critic_share_weights False"),
])
def test_per_skill_heads_are_refused_where_the_network_cannot_take_them(argv, match):
    with pytest.raises(ConfigError, match=match):
        parse_cfg(argv + ["--policy_heads", "per_skill"])
    assert parse_cfg(["--policy_heads", "per_skill"]).policy_heads == "per_skill"


@pytest.mark.parametrize("trained,given", [("per_skill", "shared"), ("shared", "per_skill")])
def test_a_run_refuses_to_load_with_other_policy_heads_naming_the_flag(tmp_path, trained, given):
    run = tmp_path / "exp"
    run.mkdir()
    saved = vars(parse_cfg(["--train_dir", str(tmp_path), "--experiment", "exp"]))
    saved["policy_heads"] = trained
    (run / "config.json").write_text(json.dumps({k: v for k, v in saved.items() if k != "cli_args"}, default=str))
    argv = ["--train_dir", str(tmp_path), "--experiment", "exp", "--evaluation", "True", "--eval_target", "gnomish"]
    with pytest.raises(ConfigError, match=f"--policy_heads {given}: the run at .* was trained with --policy_heads "
                                          f"{trained}, and its network's heads"):
        resolve_cfg(argv + ["--policy_heads", given], files=False)
    assert resolve_cfg(argv, files=False).policy_heads == trained  # without the flag: the saved value
    assert resolve_cfg(argv + ["--policy_heads", trained], files=False).policy_heads == trained


@pytest.mark.parametrize("gamma", ["0", "1.5", "-0.99"])
def test_a_discount_outside_zero_to_one_is_refused(gamma):
    with pytest.raises(ConfigError, match=f"--gamma {float(gamma)}: a discount in \\(0, 1\\]"):
        parse_cfg(["--gamma", gamma])
    assert parse_cfg(["--gamma", "0.998"]).gamma == 0.998 and parse_cfg(["--gamma", "1"]).gamma == 1.0
