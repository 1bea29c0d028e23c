"""On-policy reward-model agreement (``scripts.reward_agreement``): the agreement rule on
hand-made scores, the step recording on a scripted skill runtime, the pairs, the offline split
(recomputed from the reward model's training files, or the metrics.csv fallback), bad input,
and one short real run: a tiny policy trained for a few hundred env steps, then the agreement
with the heuristic stand-in and with random labels."""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from common.nethack import blstats as B
from common.nethack.messages import decode_message, encode_message
from orchestration.reward_agreement.annotation import backend_info
from orchestration.reward_agreement.config import AgreementError
from orchestration.reward_agreement.offline import metrics_val_acc, offline_section, offline_split
from orchestration.reward_agreement.pairs import form_pairs
from orchestration.reward_agreement.rollouts import collect_rollouts, select_skill_steps
from orchestration.reward_agreement.run import markdown_table
from orchestration.reward_agreement.scoring import agreement_stats, pair_scores
from rlaif.dataset import STAT_INDEX, load_dataset
from rlaif.preferences import load_preferences
from rlaif.reward_model import RewardModelConfig, load_skill_reward
from scripts.reward_agreement import main

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the agreement rule


def test_agreement_counts_decided_pairs_where_the_preferred_sample_scores_higher():
    labels = np.array([0, 1, 0, 1, 2, 3, 0, 1])
    first = np.array([1.0, 0.0, 0.0, 2.0, 5.0, 5.0, 3.0, 3.0])
    second = np.array([0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 3.0, 3.0])
    stats = agreement_stats(first, second, labels)
    # decided: pairs 0, 1, 2, 3, 6, 7; right: 0 (first higher), 1 (second higher), 6 (equal scores count as
    # "first", as in the reward training's val_acc); wrong: 2, 3, 7
    assert (stats.pairs, stats.decided, stats.agree, stats.model_ties) == (8, 6, 3, 2)
    assert stats.agreement == pytest.approx(0.5)
    assert stats.stderr == pytest.approx(math.sqrt(0.25 / 6))


def test_agreement_is_nan_without_decided_pairs_and_checks_lengths():
    stats = agreement_stats(np.zeros(3), np.ones(3), np.array([2, 3, 2]))
    assert stats.decided == 0 and math.isnan(stats.agreement)
    with pytest.raises(ValueError):
        agreement_stats(np.zeros(3), np.zeros(2), np.zeros(3, dtype=int))


def test_pairs_are_distinct_seeded_and_capped():
    order = form_pairs(100, 20, seed=3)
    assert len(order) == 40 and len(set(order.tolist())) == 40 and order.max() < 100
    assert np.array_equal(order, form_pairs(100, 20, seed=3))
    assert not np.array_equal(order, form_pairs(100, 20, seed=4))
    assert len(form_pairs(7, 20, seed=0)) == 6  # three pairs is all that 7 observations give
    weights = np.zeros(10)
    weights[:4] = 0.25
    assert set(form_pairs(10, 5, seed=0, weights=weights).tolist()) == {0, 1, 2, 3}
    with pytest.raises(AgreementError, match="at least 2"):
        form_pairs(1, 5, seed=0)


# ----------------------------------------------------------------------------- recording steps


class ScriptedSkillEnv:
    """A skill runtime stand-in. Each episode: step 1 on level 1, steps 2 and 3 on level 2, the
    game ends at step 4 (final observation without status line); the runtime switches from skill 0
    to skill 1 after step 2."""

    def __init__(self) -> None:
        self.t = 0
        self.skill_id = 0
        self.skill_start_depth = 1
        self.last_obs: dict = {}
        self.resets = 0

    @staticmethod
    def _raw(text: str, depth: int) -> dict:
        bl = np.zeros(27, dtype=np.int64)
        bl[B.BL_DEPTH] = depth
        bl[B.BL_HP] = bl[B.BL_HPMAX] = 12
        return {"message": encode_message(text), "blstats": bl}

    def reset(self, **_):
        self.t, self.skill_id, self.skill_start_depth = 0, 0, 1
        self.resets += 1
        self.last_obs = self._raw("start", 1)
        return {"obs": np.zeros(1)}, {}

    def step(self, action):
        self.t += 1
        done = self.t == 4
        depth = 1 if self.t == 1 else 2
        self.last_obs = self._raw("You die..." if done else f"step {self.t}", 0 if done else depth)
        if self.t == 2:  # the runtime starts the next skill after the step
            self.skill_id, self.skill_start_depth = 1, depth
        return {"obs": np.zeros(1)}, 0.0, done, False, {}

    def close(self) -> None:
        pass


class ZeroPolicy:
    def __init__(self) -> None:
        self.ended: list[int] = []

    def act(self, obs):
        return np.zeros(len(obs), dtype=np.int64)

    def episode_ended(self, i: int) -> None:
        self.ended.append(i)


def test_steps_are_recorded_with_the_skill_active_during_the_step():
    envs = [ScriptedSkillEnv(), ScriptedSkillEnv()]
    policy = ZeroPolicy()
    roll = collect_rollouts(envs, policy, episodes=3, progress=False)
    assert roll.episodes == 3 and roll.episode_lengths == [4, 4, 4] and len(policy.ended) == 3
    assert sum(e.resets for e in envs) == 3
    # the final observation of each game (depth 0) is left out: 3 recorded steps per episode
    assert roll.steps == 9 and sorted(np.bincount(roll.episode).tolist()) == [3, 3, 3]
    one = roll.subset(roll.episode == 0)
    assert [decode_message(m) for m in one.messages[:, 0]] == ["start", "step 1", "step 2"]
    assert [decode_message(m) for m in one.messages[:, 1]] == ["step 1", "step 2", "step 3"]
    assert one.skill_ids.tolist() == [0, 0, 1]  # step 2 belongs to skill 0, which ended after it
    depth = STAT_INDEX["depth"]
    assert one.stats[:, :, depth].tolist() == [[1, 1], [1, 2], [2, 2]]
    # the runtime's reward input: depth now minus depth when the skill started
    assert one.rl_depth_change.tolist() == [0, 1, 0]


def test_exploration_mode_falls_back_to_all_steps_only_when_the_skill_never_ran():
    roll = collect_rollouts([ScriptedSkillEnv()], ZeroPolicy(), episodes=1, progress=False)
    sel, all_steps = select_skill_steps(roll, 1, "exploration")
    assert not all_steps and sel.steps == 1
    sel, all_steps = select_skill_steps(roll, 4, "exploration")
    assert all_steps and sel.steps == roll.steps
    sel, all_steps = select_skill_steps(roll, 4, "skill")
    assert not all_steps and sel.steps == 0


# ----------------------------------------------------------------------------- offline split


@pytest.fixture(scope="module", params=["small", "release"])
def reward_run(request, tmp_path_factory):
    from rlaif.train_reward import train_reward
    from tests.test_train_reward import EXPERIMENT, SMALL, config, write_inputs

    root = tmp_path_factory.mktemp(f"reward_{request.param}")
    write_inputs(root, pairs=200, seed=1)
    model = SMALL if request.param == "small" else RewardModelConfig(arch="release")
    result = train_reward(config(root, num_epochs=2, val_fraction=0.2, model=model))
    return root, root / "skill_rewards" / EXPERIMENT, result


def test_offline_agreement_is_the_reward_trainings_validation_accuracy(reward_run):
    root, reward_dir, result = reward_run
    reward = load_skill_reward(reward_dir)
    split, reason = offline_split(reward.checkpoint_path)
    assert split is not None, reason
    assert split.dataset.num_pairs == 40 and split.seed == 777
    section = offline_section(reward, reward_dir, split, reason)
    assert section["source"] == "validation_split"
    assert section["decided"] == result["val_pairs"] > 0
    assert section["agreement"] == pytest.approx(result["val_acc"], abs=1e-9)
    assert section["agreement"] == pytest.approx(metrics_val_acc(reward_dir), abs=1e-5)
    assert sum(section["label_shares"].values()) == pytest.approx(1.0)
    first, second = pair_scores(reward, split.dataset)
    assert section["mean_score"] == pytest.approx(float(np.mean(np.concatenate([first, second]))))


def test_offline_falls_back_to_metrics_csv_when_the_training_files_are_gone(reward_run, tmp_path):
    root, reward_dir, result = reward_run
    reward_copy = tmp_path / "reward"
    shutil.copytree(reward_dir, reward_copy)
    data = root / "og_dataset" / "descender.npz"
    moved = tmp_path / "moved.npz"
    shutil.move(data, moved)
    try:
        reward = load_skill_reward(reward_copy)
        split, reason = offline_split(reward.checkpoint_path)
        assert split is None and "descender.npz" in reason
        section = offline_section(reward, reward_copy, split, reason)
        assert section["source"] == "metrics_csv" and "metrics.csv" in section["note"]
        assert section["agreement"] == pytest.approx(result["val_acc"], abs=1e-5)
        (reward_copy / "reward_metrics" / "metrics.csv").unlink()
        assert offline_section(reward, reward_copy, split, reason)["source"] == "unavailable"
    finally:
        shutil.move(moved, data)


def test_a_training_file_saved_relative_to_the_repository_is_found_from_any_folder(tmp_path, monkeypatch):
    """A checkpoint may record its dataset relative to the repository root; the offline split finds
    it whatever the working folder (the module's REPO_ROOT is the repository, not its package)."""
    from orchestration.reward_agreement import offline

    monkeypatch.chdir(tmp_path)
    assert offline.REPO_ROOT == REPO
    assert offline._resolve("README.md") == REPO / "README.md"
    assert offline._resolve("no/such/file.npz") is None


def test_the_heuristic_is_labelled_a_stand_in():
    info = backend_info("heuristic")
    assert not info["is_llm"] and "stand-in" in info["description"]
    assert backend_info("openai")["is_llm"] and not backend_info("random")["is_llm"]


# ----------------------------------------------------------------------------- bad input


def _fake_experiment(root: Path, num_skills: int = 5) -> Path:
    exp = root / "policy" / "exp"
    exp.mkdir(parents=True)
    (exp / "config.json").write_text(json.dumps({"num_skills": num_skills}))
    return exp


def _run(argv: list[str]) -> int:
    return main([*argv, "--no_progress", "--log_level", "WARNING"])


def test_unknown_skill_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--skill", "wizard", "--policy_dir", str(tmp_path), "--backend", "heuristic"])
    assert exc.value.code == 2 and "--skill" in capsys.readouterr().err


@pytest.mark.parametrize("case", ["no_folder", "no_config", "no_checkpoint", "untrained_skill", "unknown_backend",
                                  "vllm_in_process"])
def test_bad_input_exits_2_naming_the_problem_and_writes_nothing(tmp_path, capsys, case):
    exp = _fake_experiment(tmp_path, num_skills=2)
    out = exp / "reward_agreement"
    out.mkdir()
    old = out / "descender_heuristic.json"
    old.write_text("old results")
    skill, backend, policy_dir, expected = "descender", "heuristic", exp, ""
    if case == "no_folder":
        policy_dir, expected = tmp_path / "missing", "--policy_dir"
    elif case == "no_config":
        (exp / "config.json").unlink()
        expected = "config.json"
    elif case == "no_checkpoint":
        expected = "checkpoint_*.pth"
    elif case == "untrained_skill":
        skill, expected = "merchant", "--skill merchant"
    elif case == "vllm_in_process":  # vLLM and NetHack never share an environment: served instead
        backend, expected = "vllm", "vllm serve "
    else:
        backend, expected = "gpt-judge", "--backend"
    code = _run(["--skill", skill, "--policy_dir", str(policy_dir), "--backend", backend])
    err = capsys.readouterr().err
    assert code == 2 and expected in err, err
    assert old.read_text() == "old results"
    assert sorted(p.name for p in out.iterdir()) == ["descender_heuristic.json"]


# ----------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    """A policy trained for ~600 env steps on tiny reward models (about 30 s on 2 cores)."""
    from bench.fixtures import build_tiny_reward_dirs
    from tests.test_training import run_main

    root = tmp_path_factory.mktemp("agreement_policy")
    dirs = build_tiny_reward_dirs(root)
    args = ["--num_workers", "1", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "16",
            "--max_episode_steps", "100", "--device", "cpu", "--train_dir", str(root / "skill_policy"),
            "--experiment", "tiny", "--reward_dir", repr(dirs), "--code_seed", "42", "--seed", "2",
            "--train_for_env_steps", "600", "--stats_avg", "4"]
    proc = run_main(args, root, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return root / "skill_policy" / "tiny", dirs


def _recompute(policy_dir: Path, skill: str, backend: str, reward_dir: str) -> float:
    """The on-policy agreement from the written pairs and labels, without the module's scoring code."""
    data = policy_dir / "reward_agreement" / f"{skill}_{backend}_data"
    dataset = load_dataset(data / "annotated" / f"{skill}.npz")
    labels = load_preferences(data / "preference" / f"agreement_{skill}_{backend}.npy", dataset.num_pairs)
    reward = load_skill_reward(reward_dir)
    depth = STAT_INDEX["depth"]
    change = np.clip(dataset.stats[:, 1, depth] - dataset.stats[:, 0, depth], -1, 1)
    scores = reward.score(dataset.messages[:, 1], change)
    decided = labels <= 1
    prefers_second = scores[1::2] > scores[0::2]
    return float(np.mean(prefers_second[decided] == (labels[decided] == 1))) if decided.any() else math.nan


@pytest.mark.slow
def test_on_policy_agreement_end_to_end(tiny_policy, capsys):
    policy_dir, dirs = tiny_policy
    common = ["--policy_dir", str(policy_dir), "--episodes", "2", "--max_steps", "50", "--num_envs", "2",
              "--num_pairs", "30"]
    # the heuristic stand-in, the policy held on the descender
    assert _run(["--skill", "descender", "--backend", "heuristic", *common]) == 0
    printed = capsys.readouterr().out
    result = json.loads((policy_dir / "reward_agreement" / "descender_heuristic.json").read_text())
    table = (policy_dir / "reward_agreement" / "descender_heuristic.md").read_text()
    assert table in printed and "| agreement |" in table and "stand-in" in table
    assert result["skill"] == "descender"
    assert result["backend"]["name"] == "heuristic" and result["backend"]["is_llm"] is False
    col = result["collection"]
    # at most --max_steps each; a game can end sooner (the tiny policy is trained by sample-factory's asynchronous
    # workers, so its weights, and where its hero dies, can differ between runs: once a 47-step episode)
    lengths = col["episode_lengths"]
    assert col["mode"] == "skill" and col["episodes"] == 2 and len(lengths) == 2 and all(1 <= n <= 50 for n in lengths)
    assert col["skill_steps"] == col["observations"] == col["env_steps"] and sum(lengths) - 10 <= col["env_steps"] <= 100
    assert col["skill_time_share"]["descender"] == pytest.approx(1.0)
    on, off = result["on_policy"], result["offline"]
    assert on["pairs"] == 30 and sum(on["label_counts"].values()) == 30
    assert sum(on["label_shares"].values()) == pytest.approx(1.0)
    assert 0 <= on["decided"] <= on["pairs"] and math.isfinite(on["mean_score"])
    assert on["decided"] == 0 or 0.0 <= on["agreement"] <= 1.0
    assert result["reward_model"]["reward_dir"] == dirs[1]
    assert off["source"] == "validation_split"
    val_acc = metrics_val_acc(Path(dirs[1]))
    same = math.isnan(off["agreement"]) and math.isnan(val_acc)
    assert same or off["agreement"] == pytest.approx(val_acc, abs=1e-5)

    # random labels decide almost every pair: the agreement is a number, the one the written files give
    assert _run(["--skill", "descender", "--backend", "random", *common]) == 0
    result = json.loads((policy_dir / "reward_agreement" / "descender_random.json").read_text())
    on = result["on_policy"]
    assert on["decided"] >= 20 and 0.0 <= on["agreement"] <= 1.0
    assert on["agreement"] == pytest.approx(_recompute(policy_dir, "descender", "random", dirs[1]))
    assert 0.0 <= on["agreement_rl_input"]["agreement"] <= 1.0


@pytest.mark.slow
def test_exploration_mode_and_too_few_observations(tiny_policy, capsys):
    policy_dir, dirs = tiny_policy
    assert _run(["--skill", "discoverer", "--backend", "heuristic", "--policy_dir", str(policy_dir),
                 "--collect_mode", "exploration", "--episodes", "1", "--max_steps", "40", "--num_envs", "1",
                 "--num_pairs", "10", "--pair_sampling", "collector", "--relabel_offline"]) == 0
    result = json.loads((policy_dir / "reward_agreement" / "discoverer_heuristic.json").read_text())
    col = result["collection"]
    assert col["mode"] == "exploration" and "meta-policy" in col["mode_note"]
    assert sum(col["skill_time_share"].values()) == pytest.approx(1.0)
    assert col["observations"] == (col["env_steps"] if col["used_all_steps"] else col["skill_steps"])
    assert result["offline"]["relabelled"]["pairs"] > 0
    capsys.readouterr()
    before = sorted(p.name for p in (policy_dir / "reward_agreement").iterdir())
    # one step of one episode is one observation: no pair can be formed
    code = _run(["--skill", "ascender", "--backend", "heuristic", "--policy_dir", str(policy_dir),
                 "--episodes", "1", "--max_steps", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "--episodes" in err and "observation" in err, err
    assert sorted(p.name for p in (policy_dir / "reward_agreement").iterdir()) == before


def test_help_documents_every_flag():
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "scripts.reward_agreement", "--help"], cwd=REPO,
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert proc.returncode == 0
    from scripts.reward_agreement import build_parser

    for action in build_parser()._actions:
        assert action.help, action.option_strings


def test_markdown_table_has_one_column_per_data_source():
    summary = {
        "skill": "descender",
        "backend": backend_info("heuristic"),
        "policy": {"policy_dir": "p", "env_steps": 10},
        "collection": {"mode_note": "held", "episodes": 1, "skill_steps": 5, "env_steps": 5, "used_all_steps": True},
        "reward_model": {"reward_dir": "r"},
        "on_policy": {"pairs": 2, "decided": 1, "agreement": 1.0, "stderr": 0.0,
                      "label_shares": {"first": 0.5, "second": 0.0, "tie": 0.5, "unknown": 0.0}, "mean_score": 0.1,
                      "agreement_rl_input": {"agreement": 1.0, "stderr": 0.0}, "mean_score_all_steps": 0.2},
        "offline": {"source": "metrics_csv", "agreement": 0.75},
    }
    table = markdown_table(summary)
    assert "| agreement | 1.000 ± 0.000 | 0.750 (metrics.csv val_acc, n=?) |" in table
    summary["offline"]["val_pairs"] = 3  # the count a metrics.csv holds: 3 pairs are flagged as too few
    assert "| agreement | 1.000 ± 0.000 | 0.750 (metrics.csv val_acc, n=3, too few) |" in markdown_table(summary)
    assert "ALL steps used" in table and "NOT an LLM" in table
