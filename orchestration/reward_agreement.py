"""On-policy agreement of a skill's reward model with its annotator.

A skill's reward model is distilled from an annotator's preferences over an *offline*
dataset (:mod:`rl_baseline.collect`: scripted/random play). Its validation accuracy says how
well it matches the annotator there. The trained policy, however, visits its own states:
this module asks whether the reward model still agrees with the annotator on the data the
policy actually sees.

Steps (:func:`run_agreement`):

1. load the trained experiment ``{train_dir}/{experiment}`` (:mod:`rl_baseline.sf.policy`)
   and play ``episodes`` episodes in this process, in one of two collection modes:

   * ``skill``: the policy is held on the skill for the whole episode (the forced-skill
     evaluation's environment, ``--eval_skill``; the ascender starts on level 3);
   * ``exploration``: the training meta-policy composes the skills, as during training;
     only the steps where the skill was active are kept (all steps, said so in the
     results, when the skill was never active);

2. record every step as the annotators see it (one sample of :mod:`rlaif.dataset`: the
   message before and after the step, the stats before and after) plus the depth change
   the runtime fed the reward model (depth now minus depth when the skill started);
3. form ``num_pairs`` random pairs of distinct steps (seeded), laid out as the offline
   datasets are: a shuffled array of samples whose samples ``2k`` and ``2k+1`` are pair ``k``
   (``pair_sampling collector`` draws steps with the offline collector's keep
   probabilities instead of uniformly, so the mix of steps resembles the offline data's);
4. label the pairs with an annotator backend through the annotation pipeline itself
   (:func:`rlaif.annotate.annotate_chunk`: captions, prompt, parsing, retry); the
   ``heuristic`` backend is a rule-based stand-in for the LLM, and the results say so;
5. score both samples of each pair with the skill's reward model. Agreement is the share
   of pairs the annotator decided (first or second better) where the reward model gives
   the preferred sample the higher score: the rule of the reward training's validation
   accuracy (:func:`rlaif.train_reward.pair_accuracy_counts`; equal scores count as
   "first"). The headline scores a sample as training does (its current message and the
   one-step depth change); ``agreement_rl_input`` scores it with the depth change the
   runtime used during the episode;
6. the same on the reward model's offline validation split: the dataset and preference
   file, seed and validation fraction saved in its checkpoint give the split
   (:func:`rlaif.train_reward.split_pairs`); when those files cannot be read, the
   ``val_acc`` of the last row of ``{reward_dir}/reward_metrics/metrics.csv`` stands in, and
   the results say which was used. Optionally (``relabel_offline``) up to ``num_pairs``
   validation pairs are labelled again with the same backend, so that on-policy and offline
   are compared under one annotator.

Outputs, under ``{policy_dir}/reward_agreement/`` (``out_dir``)::

    {skill}_{backend}.json        everything above (see :func:`summary_dict`)
    {skill}_{backend}.md          the table printed at the end
    {skill}_{backend}_data/       the labelled on-policy pairs ({skill}.npz, preference/,
                                  annotation_logs/), to inspect or re-annotate

Bad input (unknown skill, no experiment or checkpoint, a skill the policy was not trained
with, no reward model, nothing collected) raises :class:`AgreementError` before anything is
written.
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
from tqdm import tqdm

from common.atomic_io import atomic_write_text
from common.nethack.messages import MESSAGE_LEN
from common.vocabulary import SKILLS
from rlaif.dataset import STAT_FIELDS, STAT_INDEX, ObservationDataset, save_dataset
from rlaif.preferences import FIRST, SECOND, label_counts, label_shares

logger = logging.getLogger(__name__)

COLLECT_MODES: tuple[str, ...] = ("skill", "exploration")
PAIR_SAMPLINGS: tuple[str, ...] = ("uniform", "collector")
#: backends that are language models (the others are stand-ins: rules or coin flips)
LLM_BACKENDS: tuple[str, ...] = ("vllm", "openai", "hf", "transformers", "hf-local")
OUT_DIRNAME = "reward_agreement"
SCORE_BATCH = 4096
REPO_ROOT = Path(__file__).resolve().parents[1]


class AgreementError(ValueError):
    """Bad input for the agreement run; the message names the flag or file."""


# ----------------------------------------------------------------------------- configuration


@dataclass
class AnnotatorSettings:
    """How the pairs are labelled: the flags of ``scripts.annotate_pairs`` that apply here."""

    backend: str = "heuristic"
    model: Optional[str] = None  # None: the annotation default (common.llm.DEFAULT_MODEL)
    base_url: Optional[str] = None
    num_gpus: int = 1
    temperature: float = 0.1
    top_p: float = 0.95
    top_k: int = 50
    max_tokens: int = 512
    prompt: Optional[str] = None
    batch_size: int = 64
    concurrency: int = 16
    timeout: float = 120.0
    max_retries: int = 5
    device_map: Optional[str] = None
    log_conversations: bool = True


@dataclass
class AgreementConfig:
    """One agreement run (see the module docstring)."""

    skill: str
    policy_dir: str
    annotator: AnnotatorSettings = field(default_factory=AnnotatorSettings)
    collect_mode: str = "skill"
    episodes: int = 10
    max_steps: Optional[int] = None  # per episode; None: the experiment's --max_episode_steps
    num_envs: int = 4
    num_pairs: int = 500
    pair_sampling: str = "uniform"
    seed: int = 0
    reward_dir: Optional[str] = None  # None: the experiment's reward dir of the skill
    relabel_offline: bool = False
    deterministic: bool = False
    device: str = "cpu"  # policy and reward model: cpu, cuda or auto
    out_dir: Optional[str] = None  # None: {policy_dir}/reward_agreement
    progress: bool = True

    @property
    def output_dir(self) -> Path:
        return Path(self.out_dir) if self.out_dir else Path(self.policy_dir) / OUT_DIRNAME

    @property
    def stem(self) -> str:
        return f"{self.skill}_{self.annotator.backend}"


def check_config(cfg: AgreementConfig) -> None:
    """The flags that can be checked without loading anything; :class:`AgreementError`."""
    from common.llm import BACKENDS

    if cfg.skill not in SKILLS:
        raise AgreementError(f"--skill {cfg.skill!r}: unknown skill; valid skills: {', '.join(SKILLS)}")
    if cfg.annotator.backend not in BACKENDS and cfg.annotator.backend != "hf-local":
        raise AgreementError(f"--backend {cfg.annotator.backend!r}: unknown backend; valid backends: "
                             f"{', '.join(BACKENDS)}")
    if cfg.collect_mode not in COLLECT_MODES:
        raise AgreementError(f"--collect_mode {cfg.collect_mode!r}: expected one of {', '.join(COLLECT_MODES)}")
    if cfg.pair_sampling not in PAIR_SAMPLINGS:
        raise AgreementError(f"--pair_sampling {cfg.pair_sampling!r}: expected one of {', '.join(PAIR_SAMPLINGS)}")
    for name in ("episodes", "num_envs", "num_pairs"):
        if int(getattr(cfg, name)) < 1:
            raise AgreementError(f"--{name} must be at least 1, got {getattr(cfg, name)}")
    if cfg.max_steps is not None and int(cfg.max_steps) < 1:
        raise AgreementError(f"--max_steps must be at least 1 step per episode, got {cfg.max_steps}")
    if cfg.device not in ("cpu", "cuda", "auto"):
        raise AgreementError(f"--device {cfg.device!r}: expected cpu, cuda or auto")
    policy_dir = Path(cfg.policy_dir)
    if not policy_dir.is_dir():
        raise AgreementError(f"--policy_dir {policy_dir}: no such folder; expected {{train_dir}}/{{experiment}} "
                             "written by python -m scripts.main")
    if not (policy_dir / "config.json").is_file():
        raise AgreementError(f"--policy_dir {policy_dir}: no config.json there; expected the folder of a trained "
                             "experiment, {train_dir}/{experiment}, as written by python -m scripts.main")


# ----------------------------------------------------------------------------- the experiment


@dataclass
class Experiment:
    """The trained experiment, configured for collection."""

    cfg: Any  # the sample-factory config (argparse namespace)
    skill_id: int  # index of the skill in the policy's skills
    reward_dir: Path
    mode_note: str  # how the episodes were played, in words


def saved_setting(policy_dir: str | Path, key: str) -> Any:
    """One value of the experiment's saved ``config.json`` (None when absent or unreadable)."""
    try:
        saved = json.loads((Path(policy_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return saved.get(key) if isinstance(saved, dict) else None


def saved_num_skills(policy_dir: str | Path) -> Optional[int]:
    """The skill count in the experiment's ``config.json`` (None when it does not say)."""
    from common.vocabulary import NUM_SKILLS
    from rl_baseline.sf.cfg import MOTIF_ENV

    try:
        saved = json.loads((Path(policy_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None  # resolve_experiment_cfg reports an unreadable file
    if not isinstance(saved, dict):
        return None
    if saved.get("num_skills") is not None:
        return int(saved["num_skills"])
    return 1 if saved.get("env") == MOTIF_ENV else (NUM_SKILLS if "env" in saved else None)


def check_trained_skill(policy_dir: str | Path, skill: str, num_skills: Optional[int]) -> None:
    """:class:`AgreementError` naming ``--skill`` when the policy has no such skill."""
    if num_skills is not None and SKILLS.index(skill) >= int(num_skills):
        raise AgreementError(f"--skill {skill}: the policy in {policy_dir} was trained with {num_skills} "
                             f"skill(s) ({', '.join(SKILLS[:int(num_skills)])}), not with {skill}")


def load_experiment(cfg: AgreementConfig) -> Experiment:
    """The experiment's configuration for ``cfg.collect_mode``, checked against ``cfg.skill``.

    Raises :class:`AgreementError` naming the flag or file."""
    from rl_baseline.sf.cfg import ConfigError, check_files, meta_policy_task, resolve_experiment_cfg, uses_meta_policy
    from rl_baseline.sf.checkpoints import checkpoint_dir, list_checkpoints

    skill_id = SKILLS.index(cfg.skill)
    check_trained_skill(cfg.policy_dir, cfg.skill, saved_num_skills(cfg.policy_dir))
    overrides: list[str] = []
    if cfg.device != "auto":
        overrides += ["--device", cfg.device]
    if cfg.max_steps is not None:
        saved_max = saved_setting(cfg.policy_dir, "max_episode_steps")
        limit = int(cfg.max_steps) if saved_max is None else min(int(saved_max), int(cfg.max_steps))
        overrides += ["--max_episode_steps", str(limit)]
    if cfg.collect_mode == "exploration":
        # the training environment: the exploration meta-policy
        overrides += ["--eval_skill", "none"]
    else:
        overrides += ["--eval_skill", cfg.skill]
    try:
        exp = resolve_experiment_cfg(cfg.policy_dir, overrides, evaluation=cfg.collect_mode != "exploration",
                                     files=False)
    except ConfigError as exc:
        raise AgreementError(str(exc)) from exc
    check_trained_skill(cfg.policy_dir, cfg.skill, int(exp.num_skills))
    kind = getattr(exp, "load_checkpoint_kind", "latest")
    ckpt_dir = checkpoint_dir(exp.train_dir, exp.experiment)
    if not list_checkpoints(ckpt_dir, kind):
        prefix = "checkpoint" if kind == "latest" else "best"
        raise AgreementError(f"--policy_dir {cfg.policy_dir}: no {prefix}_*.pth under {ckpt_dir}; train first")
    try:
        exp.reward_thresholds = check_files(exp)
    except ConfigError as exc:
        raise AgreementError(f"--policy_dir {cfg.policy_dir}: {exc}") from exc
    exp.resolved = True
    if cfg.reward_dir:
        reward_dir = Path(cfg.reward_dir)
    else:
        dirs = list(exp.reward_dirs)
        if len(dirs) <= skill_id:
            raise AgreementError(f"the experiment in {cfg.policy_dir} has {len(dirs)} reward dir(s) "
                                 f"(--reward_dir {exp.reward_dir!r}), none for {cfg.skill}; pass --reward_dir")
        reward_dir = Path(dirs[skill_id])
    if cfg.collect_mode == "skill":
        note = f"policy held on {cfg.skill} for whole episodes (forced skill, no meta-policy)"
    elif uses_meta_policy(exp):
        note = f"training meta-policy ({meta_policy_task(exp)}, code seed {exp.code_seed}) composing the skills"
    else:
        note = f"no meta-policy in this experiment: {SKILLS[0]} held for whole episodes"
    return Experiment(exp, skill_id, reward_dir, note)


def load_reward(reward_dir: Path, device: str) -> Any:
    """The skill's reward model; :class:`AgreementError` naming the folder when it cannot load."""
    from rlaif.reward_model import RewardCheckpointError, load_skill_reward

    try:
        return load_skill_reward(reward_dir, device=device)
    except (FileNotFoundError, RewardCheckpointError, ValueError) as exc:
        raise AgreementError(f"reward model of the skill (--reward_dir {reward_dir}): {exc}") from exc


# ----------------------------------------------------------------------------- collection


@dataclass
class Rollouts:
    """Every step played, as the annotators see it, with the skill active during the step."""

    messages: np.ndarray  # uint8 [N, 2, 256] message before / after the step
    stats: np.ndarray  # int32 [N, 2, 6] STAT_FIELDS before / after the step
    skill_ids: np.ndarray  # int64 [N] skill active during the step
    rl_depth_change: np.ndarray  # int64 [N] depth after the step minus depth when the skill started (clipped)
    episode: np.ndarray  # int64 [N] episode index
    episodes: int = 0
    episode_lengths: list[int] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.skill_ids)

    def subset(self, mask: np.ndarray) -> "Rollouts":
        return Rollouts(self.messages[mask], self.stats[mask], self.skill_ids[mask], self.rl_depth_change[mask],
                        self.episode[mask], self.episodes, list(self.episode_lengths))

    def dataset(self, order: np.ndarray, meta: dict) -> ObservationDataset:
        return ObservationDataset(self.messages[order], self.stats[order], meta)


def _message_row(raw: dict) -> np.ndarray:
    out = np.zeros(MESSAGE_LEN, dtype=np.uint8)
    msg = np.asarray(raw["message"], dtype=np.uint8).reshape(-1)[:MESSAGE_LEN]
    out[: len(msg)] = msg
    return out


def _stats_row(raw: dict) -> np.ndarray:
    from rl_baseline.collect.rollouts import stats_from_blstats

    return stats_from_blstats(raw["blstats"])


def _seed_game(env: Any, seed: int, episode: int) -> None:
    """Fixed NetHack seeds for episode ``episode`` (the game's own generator, not gym's)."""
    core, disp = (int(s) for s in np.random.default_rng([int(seed) & 0xFFFFFFFF, int(episode)]).integers(1, 2**62, 2))
    game = getattr(env, "unwrapped", env)
    if hasattr(game, "seed"):
        try:
            game.seed(core, disp, False)
        except TypeError:  # an env without NLE's seed signature (tests)
            pass


def collect_rollouts(envs: Sequence[Any], policy: Any, episodes: int, seed: int = 0,
                     progress: bool = True) -> Rollouts:
    """Plays ``episodes`` episodes over ``envs`` (skill runtimes: ``skill_id``,
    ``skill_start_depth``, ``last_obs``) with ``policy`` (``act(obs_list)``,
    ``episode_ended(i)``) and records every step.

    A step is attributed to the skill active *during* it (the runtime may switch skills after
    the step). The final observation of a finished game (no status line, depth 0) is left
    out, as the offline collector does."""
    from rlaif.reward_model import clip_depth_change

    n = min(len(envs), int(episodes))
    rows_msg: list[np.ndarray] = []
    rows_stats: list[np.ndarray] = []
    skills: list[int] = []
    rl_depth: list[int] = []
    ep_index: list[int] = []
    obs: list[Any] = [None] * n  # each game's policy observation
    before: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0), np.zeros(0))] * n  # message, stats before the step
    current = list(range(n))  # the episode each game is playing
    lengths = [0] * n
    finished: list[int] = []

    def start(i: int, episode: int) -> None:
        _seed_game(envs[i], seed, episode)
        o, _ = envs[i].reset()
        raw = envs[i].last_obs
        before[i] = (_message_row(raw), _stats_row(raw))
        obs[i] = o

    for i in range(n):
        start(i, i)
    started = n
    active = np.ones(n, dtype=bool)
    bar = tqdm(total=int(episodes), desc="on-policy episodes", unit="episode", disable=None if progress else True)
    try:
        while active.any():
            actions = policy.act(obs)
            for i, env in enumerate(envs[:n]):
                if not active[i]:
                    continue
                skill, start_depth = int(env.skill_id), int(env.skill_start_depth)
                o, _, terminated, truncated, info = env.step(int(actions[i]))
                raw = env.last_obs
                msg_after, stats_after = _message_row(raw), _stats_row(raw)
                lengths[i] += 1
                done = bool(terminated or truncated)
                depth = int(info["depth"]) if "depth" in info else int(stats_after[STAT_INDEX["depth"]])
                if not (done and stats_after[STAT_INDEX["depth"]] == 0):
                    msg_before, stats_before = before[i]
                    rows_msg.append(np.stack([msg_before, msg_after]))
                    rows_stats.append(np.stack([stats_before, stats_after]))
                    skills.append(skill)
                    rl_depth.append(int(clip_depth_change(depth - start_depth)))
                    ep_index.append(current[i])
                before[i] = (msg_after, stats_after)
                obs[i] = o
                if done:
                    finished.append(lengths[i])
                    lengths[i] = 0
                    policy.episode_ended(i)
                    bar.update(1)
                    if started < int(episodes):
                        current[i] = started
                        start(i, started)
                        started += 1
                    else:
                        active[i] = False
            bar.set_postfix(steps=len(skills), refresh=False)
    finally:
        bar.close()
    if rows_msg:
        messages = np.stack(rows_msg).astype(np.uint8)
        stats = np.stack(rows_stats).astype(np.int32)
    else:
        messages = np.zeros((0, 2, MESSAGE_LEN), dtype=np.uint8)
        stats = np.zeros((0, 2, len(STAT_FIELDS)), dtype=np.int32)
    return Rollouts(messages, stats, np.asarray(skills, dtype=np.int64), np.asarray(rl_depth, dtype=np.int64),
                    np.asarray(ep_index, dtype=np.int64), len(finished), finished)


def select_skill_steps(rollouts: Rollouts, skill_id: int, collect_mode: str) -> tuple[Rollouts, bool]:
    """The steps of skill ``skill_id``; in exploration mode all steps when the skill was never
    active (the second value says so)."""
    mask = rollouts.skill_ids == int(skill_id)
    if mask.any() or collect_mode != "exploration" or rollouts.steps == 0:
        return rollouts.subset(mask), False
    return rollouts, True


# ----------------------------------------------------------------------------- pairs


def sample_weights(rollouts: Rollouts, pair_sampling: str) -> Optional[np.ndarray]:
    """None (uniform over steps) or the offline collector's keep probability of each step."""
    if pair_sampling == "uniform":
        return None
    from rl_baseline.collect.config import CollectConfig
    from rl_baseline.collect.rollouts import keep_probability

    defaults = CollectConfig(skill=SKILLS[0], num_pairs=1)
    w = np.array([keep_probability(m[0], m[1], s[0], s[1], defaults.sample_prob, defaults.uninformative_keep_prob,
                                   defaults.level_change_prob) for m, s in zip(rollouts.messages, rollouts.stats)],
                 dtype=np.float64)
    return w / w.sum()


def form_pairs(num_observations: int, num_pairs: int, seed: int,
               weights: Optional[np.ndarray] = None) -> np.ndarray:
    """Indices of ``2P`` distinct observations in random order (seeded); samples ``2k`` and
    ``2k+1`` form pair ``k``, as in the offline datasets. ``P`` is ``num_pairs``, or as many as
    the observations (those of non-zero weight) allow (a warning says so)."""
    available = num_observations if weights is None else int(np.count_nonzero(np.asarray(weights) > 0))
    if available < 2:
        raise AgreementError(f"{available} observation(s) collected: at least 2 are needed to form a pair")
    pairs = min(int(num_pairs), available // 2)
    if pairs < num_pairs:
        logger.warning("only %d observations: %d pairs instead of --num_pairs %d", available, pairs, num_pairs)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x5041_4952])
    return rng.choice(num_observations, size=2 * pairs, replace=False, p=weights).astype(np.int64)


# ----------------------------------------------------------------------------- scoring and agreement


@dataclass
class AgreementStats:
    """Reward model vs annotator over a set of labelled pairs."""

    pairs: int
    decided: int  # pairs labelled first or second better
    agree: int
    agreement: float  # agree / decided (nan when nothing was decided)
    stderr: float  # binomial standard error of the agreement
    model_ties: int  # decided pairs the reward model scores equally (counted as "first")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def agreement_stats(score_first: np.ndarray, score_second: np.ndarray, labels: np.ndarray) -> AgreementStats:
    """Share of decided pairs (labels 0/1) whose preferred sample the model scores higher.

    The reward training's validation accuracy rule
    (:func:`rlaif.train_reward.pair_accuracy_counts`): the model prefers the second sample
    when its score is strictly higher; ties and unknowns (labels 2/3) are not counted."""
    import torch

    from rlaif.train_reward import pair_accuracy_counts

    labels = np.asarray(labels, dtype=np.int64)
    first = np.asarray(score_first, dtype=np.float64)
    second = np.asarray(score_second, dtype=np.float64)
    if not (len(first) == len(second) == len(labels)):
        raise ValueError(f"{len(first)} first scores, {len(second)} second scores and {len(labels)} labels")
    agree, decided = pair_accuracy_counts(torch.from_numpy(first), torch.from_numpy(second), torch.from_numpy(labels))
    mask = (labels == FIRST) | (labels == SECOND)
    p = agree / decided if decided else math.nan
    stderr = math.sqrt(p * (1 - p) / decided) if decided else math.nan
    return AgreementStats(len(labels), decided, agree, p, stderr, int(np.count_nonzero(first[mask] == second[mask])))


def score_samples(reward: Any, messages: np.ndarray, depth_change: np.ndarray) -> np.ndarray:
    """Normalised reward-model scores of current messages [N, 256] with depth changes [N]."""
    from rlaif.reward_model import clip_depth_change

    depth = clip_depth_change(np.asarray(depth_change, dtype=np.float32).reshape(-1))
    out = [reward.score(messages[i:i + SCORE_BATCH], depth[i:i + SCORE_BATCH])
           for i in range(0, len(messages), SCORE_BATCH)]
    return np.concatenate(out).astype(np.float64) if out else np.zeros(0, dtype=np.float64)


def one_step_depth_change(stats: np.ndarray) -> np.ndarray:
    """Depth after minus depth before, per sample: what the reward model reads in training."""
    d = STAT_INDEX["depth"]
    return stats[:, 1, d].astype(np.int64) - stats[:, 0, d]


def pair_scores(reward: Any, dataset: ObservationDataset) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the first and second sample of every pair of ``dataset`` (training's inputs)."""
    scores = score_samples(reward, dataset.messages[:, 1], one_step_depth_change(dataset.stats))
    n = 2 * dataset.num_pairs
    return scores[0:n:2], scores[1:n:2]


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else math.nan


# ----------------------------------------------------------------------------- offline split


@dataclass
class OfflineSplit:
    """The reward model's validation pairs, from the files its training read."""

    dataset: ObservationDataset  # the validation pairs only (pair k = samples 2k, 2k+1)
    labels: np.ndarray  # the training annotator's labels of those pairs (unknowns included)
    dataset_path: Path
    preference_path: Path
    seed: int
    val_fraction: float


def _resolve(path_text: str) -> Optional[Path]:
    """A path saved in a checkpoint: as written (relative to this directory) or to the repository."""
    path = Path(path_text)
    for candidate in (path, REPO_ROOT / path):
        if candidate.is_file():
            return candidate
    return None


def offline_split(checkpoint_path: Path) -> tuple[Optional[OfflineSplit], str]:
    """The validation split of the reward model's training data, or None and the reason."""
    from rlaif.dataset import DatasetError, load_dataset
    from rlaif.preferences import PreferenceError, load_preferences
    from rlaif.reward_model import RewardCheckpointError, load_checkpoint
    from rlaif.train_reward import RewardTrainingError, split_pairs

    try:
        state = load_checkpoint(checkpoint_path)
    except (OSError, RewardCheckpointError) as exc:
        return None, f"cannot read {checkpoint_path}: {exc}"
    missing = [k for k in ("dataset", "preferences", "seed", "val_fraction") if k not in state]
    if missing:
        return None, f"{checkpoint_path} does not record its training data ({', '.join(missing)} missing)"
    dataset_path, pref_path = _resolve(str(state["dataset"])), _resolve(str(state["preferences"]))
    if dataset_path is None or pref_path is None:
        gone = state["dataset"] if dataset_path is None else state["preferences"]
        return None, f"the training data recorded in {checkpoint_path} is not reachable: {gone}"
    try:
        dataset = load_dataset(dataset_path)
        labels = load_preferences(pref_path, dataset.num_pairs)
        _, val_idx = split_pairs(dataset.num_pairs, float(state["val_fraction"]), int(state["seed"]))
    except (DatasetError, PreferenceError, RewardTrainingError) as exc:
        return None, f"the training data recorded in {checkpoint_path} cannot be used: {exc}"
    if len(val_idx) == 0:
        return None, f"{checkpoint_path} was trained without a validation split (val_fraction {state['val_fraction']})"
    samples = np.stack([2 * val_idx, 2 * val_idx + 1], axis=1).reshape(-1)
    val = ObservationDataset(dataset.messages[samples], dataset.stats[samples], {"source": str(dataset_path)})
    return OfflineSplit(val, labels[val_idx], dataset_path, pref_path, int(state["seed"]),
                        float(state["val_fraction"])), ""


def metrics_val_acc(reward_dir: Path) -> Optional[float]:
    """``val_acc`` of the last row of ``{reward_dir}/reward_metrics/metrics.csv`` (None if absent)."""
    import csv

    from rlaif.reward_model import METRICS_DIRNAME

    path = reward_dir / METRICS_DIRNAME / "metrics.csv"
    if not path.is_file():
        return None
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or "val_acc" not in rows[-1]:
        return None
    try:
        return float(rows[-1]["val_acc"])
    except (TypeError, ValueError):
        return None


def offline_section(reward: Any, reward_dir: Path, split: Optional[OfflineSplit], reason: str) -> dict[str, Any]:
    """Agreement, label shares and mean score on the offline validation split (or the
    fallback, see the module docstring)."""
    if split is not None:
        first, second = pair_scores(reward, split.dataset)
        stats = agreement_stats(first, second, split.labels)
        return {
            "source": "validation_split",
            "note": (f"the reward model's validation split recomputed from its training data (split_pairs, seed "
                     f"{split.seed}, val_fraction {split.val_fraction}), labels of the training annotator"),
            "dataset": str(split.dataset_path),
            "preferences": str(split.preference_path),
            "annotator": split.preference_path.stem,
            **stats.to_dict(),
            "label_counts": label_counts(split.labels),
            "label_shares": label_shares(split.labels),
            "mean_score": _mean(np.concatenate([first, second])),
        }
    val_acc = metrics_val_acc(reward_dir)
    path = reward_dir / "reward_metrics" / "metrics.csv"
    if val_acc is None:
        return {"source": "unavailable", "note": f"{reason}; no val_acc in {path} either", "agreement": math.nan}
    return {"source": "metrics_csv", "note": f"{reason}; val_acc of the last row of {path} instead",
            "metrics_csv": str(path), "agreement": val_acc}


# ----------------------------------------------------------------------------- annotation


def backend_info(backend: str) -> dict[str, Any]:
    """What the backend is, in words: the heuristic is a stand-in, not an LLM."""
    if backend == "heuristic":
        from rlaif.heuristic import STAND_IN_NOTICE

        return {"name": backend, "is_llm": False, "description": "rule-based stand-in for the LLM (rlaif.heuristic)",
                "note": f"{STAND_IN_NOTICE}; its labels are NOT an LLM's"}
    if backend == "random":
        return {"name": backend, "is_llm": False, "description": "random labels (a chance baseline, not an LLM)",
                "note": "random answers; agreement near 0.5 is expected"}
    return {"name": backend, "is_llm": True, "description": f"LLM annotator through the {backend} backend", "note": ""}


def annotate(datasets: Sequence[ObservationDataset], skill: str, settings: AnnotatorSettings, seed: int,
             work_dir: Path, progress: bool) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Labels the pairs of each dataset with one annotation run (:func:`rlaif.annotate.annotate_chunk`,
    one backend for all of them); the files land in ``work_dir``."""
    from common.llm import DEFAULT_MODEL
    from rlaif.annotate import AnnotationConfig, annotate_chunk

    messages = np.concatenate([d.messages[: 2 * d.num_pairs] for d in datasets])
    stats = np.concatenate([d.stats[: 2 * d.num_pairs] for d in datasets])
    data_dir = work_dir / "annotated"
    save_dataset(data_dir / f"{skill}.npz", ObservationDataset(messages, stats, dict(datasets[0].meta)))
    name = f"agreement_{skill}_{settings.backend}"
    acfg = AnnotationConfig(
        goal_key=skill, directory=str(data_dir), preference_dir=str(work_dir / "preference"),
        logdir=str(work_dir / "annotation_logs"), custom_annotator_string=name, backend=settings.backend,
        model=settings.model or DEFAULT_MODEL, base_url=settings.base_url, num_gpus=settings.num_gpus,
        temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
        max_tokens=settings.max_tokens, seed=seed, prompt=settings.prompt, batch_size=settings.batch_size,
        ignore_existing=True, log_conversations=settings.log_conversations, concurrency=settings.concurrency,
        timeout=settings.timeout, max_retries=settings.max_retries, progress=progress,
    )
    if settings.device_map is not None:
        acfg.backend_kwargs["device_map"] = settings.device_map
    summary = annotate_chunk(acfg)
    labels = summary.merged
    if labels is None:  # one chunk: the run always merges
        raise RuntimeError(f"annotation of {data_dir} did not produce {name}.npy")
    out, start = [], 0
    for d in datasets:
        out.append(np.asarray(labels[start:start + d.num_pairs], dtype=np.int32))
        start += d.num_pairs
    info = {"annotator": name, "retried": summary.retried, "unparseable": summary.unparseable,
            "seconds": round(summary.seconds, 3), "model": acfg.model if settings.backend in LLM_BACKENDS else None}
    return out, info


# ----------------------------------------------------------------------------- the run


@dataclass
class CollectedData:
    """What the episodes gave: the skill's steps and the pairs formed from them."""

    rollouts: Rollouts  # every step played
    selected: Rollouts  # the steps scored (the skill's, or all: see used_all_steps)
    used_all_steps: bool
    order: np.ndarray  # indices into ``selected``: samples 2k, 2k+1 are pair k
    checkpoint: str
    env_steps: int


def collect(cfg: AgreementConfig, exp: Experiment) -> CollectedData:
    """Plays the episodes with the experiment's policy and forms the pairs."""
    import torch

    from rl_baseline.sf.cfg import SkillEnvConfig
    from rl_baseline.sf.checkpoints import CheckpointError
    from rl_baseline.sf.env import build_skill_env, register_envs
    from rl_baseline.sf.policy import load_policy

    register_envs()
    torch.manual_seed(int(cfg.seed))
    env_cfg = SkillEnvConfig.from_cfg(exp.cfg)
    n_envs = max(1, min(int(cfg.num_envs), int(cfg.episodes)))
    envs = [build_skill_env(env_cfg) for _ in range(n_envs)]
    try:
        try:
            loaded = load_policy(exp.cfg, envs[0].observation_space, envs[0].action_space)
        except (FileNotFoundError, CheckpointError) as exc:
            raise AgreementError(f"--policy_dir {cfg.policy_dir}: {exc}") from exc
        logger.info("collecting %d episode(s) over %d game(s) with %s (%s)", cfg.episodes, n_envs, loaded.checkpoint,
                    exp.mode_note)
        rollouts = collect_rollouts(envs, loaded.acting(n_envs, deterministic=cfg.deterministic), cfg.episodes,
                                    seed=cfg.seed, progress=cfg.progress)
    finally:
        for env in envs:
            env.close()
    selected, used_all = select_skill_steps(rollouts, exp.skill_id, cfg.collect_mode)
    if used_all:
        logger.warning("%s was never active in %d exploration episode(s) (%d steps): using all steps", cfg.skill,
                       rollouts.episodes, rollouts.steps)
    if selected.steps < 2:
        raise AgreementError(
            f"{selected.steps} observation(s) of {cfg.skill} collected in {rollouts.episodes} episode(s) of "
            f"{rollouts.steps} steps; play more with --episodes or --max_steps"
        )
    order = form_pairs(selected.steps, cfg.num_pairs, cfg.seed, sample_weights(selected, cfg.pair_sampling))
    return CollectedData(rollouts, selected, used_all, order, str(loaded.checkpoint), loaded.env_steps)


def on_policy_section(reward: Any, data: CollectedData, labels: np.ndarray) -> dict[str, Any]:
    """Agreement (training's inputs and the runtime's), label shares and mean scores on-policy."""
    sel, order = data.selected, data.order
    scores = score_samples(reward, sel.messages[:, 1], one_step_depth_change(sel.stats))
    rl_scores = score_samples(reward, sel.messages[:, 1], sel.rl_depth_change)
    main = agreement_stats(scores[order[0::2]], scores[order[1::2]], labels)
    rl = agreement_stats(rl_scores[order[0::2]], rl_scores[order[1::2]], labels)
    return {
        **main.to_dict(),
        "agreement_rl_input": rl.to_dict(),
        "label_counts": label_counts(labels),
        "label_shares": label_shares(labels),
        "mean_score": _mean(scores[order]),
        "mean_score_all_steps": _mean(scores),
        "mean_score_rl_input_all_steps": _mean(rl_scores),
        "distinct_messages": int(len({bytes(m) for m in sel.messages[:, 1]})),
    }


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def _agreement_cell(section: dict[str, Any]) -> str:
    if section.get("source") == "metrics_csv":
        return f"{_fmt(section.get('agreement'))} (metrics.csv val_acc)"
    text = _fmt(section.get("agreement"))
    if text != "-" and not math.isnan(section.get("stderr", math.nan)):
        text += f" ± {_fmt(section['stderr'])}"
    return text


def markdown_table(summary: dict[str, Any]) -> str:
    """The results as a small Markdown table (printed and written as ``{skill}_{backend}.md``)."""
    on, off = summary["on_policy"], summary["offline"]
    backend = summary["backend"]
    columns = [("on-policy", on), ("offline validation", off)]
    relabel = off.get("relabelled")
    if relabel:
        columns.append((f"offline validation, {backend['name']} labels", relabel))

    def row(name: str, cells: list[str]) -> str:
        return f"| {name} | " + " | ".join(cells) + " |"

    def get(sec: dict, key: str, sub: Optional[str] = None) -> str:
        value = sec.get(key)
        if sub is not None:
            value = (value or {}).get(sub)
        return _fmt(value)

    off_annotator = f"{off.get('annotator', '-')} (training labels)" if off.get("source") == "validation_split" else "-"
    annotators = [f"{backend['name']}" + ("" if backend["is_llm"] else " (stand-in, not an LLM)"), off_annotator]
    if relabel:
        annotators.append(annotators[0])
    lines = [
        f"## Reward-model agreement: {summary['skill']} ({backend['description']})",
        "",
        f"policy `{summary['policy']['policy_dir']}` ({summary['policy']['env_steps']} env steps); "
        f"{summary['collection']['mode_note']}; {summary['collection']['episodes']} episode(s), "
        f"{summary['collection']['skill_steps']} {summary['skill']} step(s) of {summary['collection']['env_steps']}"
        + (" (the skill was never active: ALL steps used)" if summary["collection"]["used_all_steps"] else ""),
        f"reward model `{summary['reward_model']['reward_dir']}`; offline: {off.get('source')}",
        "",
        "| | " + " | ".join(name for name, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
        row("annotator", annotators),
        row("pairs", [get(sec, "pairs") for _, sec in columns]),
        row("decided pairs", [get(sec, "decided") for _, sec in columns]),
        row("agreement", [_agreement_cell(sec) for _, sec in columns]),
    ]
    for label in ("first", "second", "tie", "unknown"):
        lines.append(row(f"share {label}", [get(sec, "label_shares", label) for _, sec in columns]))
    lines.append(row("mean RM score", [get(sec, "mean_score") for _, sec in columns]))
    rl = on.get("agreement_rl_input", {})
    lines += ["", f"agreement with the runtime's depth input (depth since the skill started): "
                  f"{_agreement_cell(rl)}; mean RM score over all "
                  f"{'' if summary['collection']['used_all_steps'] else summary['skill'] + ' '}steps: "
                  f"{_fmt(on.get('mean_score_all_steps'))}"]
    if not backend["is_llm"]:
        lines.append(f"NOTE: {backend['note']}.")
    return "\n".join(lines) + "\n"


def summary_dict(cfg: AgreementConfig, exp: Experiment, reward: Any, data: CollectedData,
                 on_policy: dict[str, Any], offline: dict[str, Any], annotation: dict[str, Any]) -> dict[str, Any]:
    """The JSON written next to the table."""
    roll = data.rollouts
    share = {s: float(np.mean(roll.skill_ids == k)) if roll.steps else 0.0
             for k, s in enumerate(SKILLS[: int(exp.cfg.num_skills)])}
    return {
        "skill": cfg.skill,
        "backend": backend_info(cfg.annotator.backend),
        "annotation": annotation,
        "policy": {"policy_dir": str(cfg.policy_dir), "checkpoint": data.checkpoint, "env_steps": data.env_steps,
                   "num_skills": int(exp.cfg.num_skills), "deterministic": bool(cfg.deterministic)},
        "reward_model": {"reward_dir": str(exp.reward_dir), "checkpoint": str(reward.checkpoint_path),
                         "arch": getattr(reward.model.config, "arch", None), "trained_skill": reward.skill},
        "collection": {
            "mode": cfg.collect_mode, "mode_note": exp.mode_note, "episodes": roll.episodes,
            "episode_lengths": roll.episode_lengths, "env_steps": roll.steps,
            "max_episode_steps": int(exp.cfg.max_episode_steps), "num_envs": max(1, min(cfg.num_envs, cfg.episodes)),
            "seed": cfg.seed, "skill_steps": int(np.count_nonzero(roll.skill_ids == exp.skill_id)),
            "observations": data.selected.steps, "used_all_steps": data.used_all_steps,
            "note": (f"{cfg.skill} was never active: all steps were used" if data.used_all_steps else ""),
            "skill_time_share": share, "pair_sampling": cfg.pair_sampling,
        },
        "on_policy": on_policy,
        "offline": offline,
        "definition": ("agreement = share of pairs labelled first/second better (ties and unknowns left out) where "
                       "the reward model scores the preferred sample strictly higher (equal scores count as "
                       "'first', as in the reward training's val_acc); samples are scored on their current "
                       "message and one-step depth change, as in reward training"),
    }


def run_agreement(cfg: AgreementConfig) -> dict[str, Any]:
    """The whole run (module docstring); returns the summary and writes the files."""
    check_config(cfg)
    exp = load_experiment(cfg)
    reward = load_reward(exp.reward_dir, cfg.device)
    if reward.skill and reward.skill != cfg.skill:
        logger.warning("%s holds a reward model trained for %s, used here for %s", exp.reward_dir, reward.skill,
                       cfg.skill)
    split, reason = offline_split(reward.checkpoint_path)
    if split is None:
        logger.warning("offline validation split not available (%s); falling back to metrics.csv", reason)
    data = collect(cfg, exp)

    meta = {"source": "on-policy", "policy_dir": str(cfg.policy_dir), "checkpoint": data.checkpoint,
            "collect_mode": cfg.collect_mode, "skill": cfg.skill, "seed": cfg.seed}
    datasets = [data.selected.dataset(data.order, meta)]
    relabel_split = None
    if cfg.relabel_offline and split is not None:
        k = min(cfg.num_pairs, split.dataset.num_pairs)
        chosen = np.sort(np.random.default_rng([int(cfg.seed) & 0xFFFFFFFF, 0x4F46]).choice(
            split.dataset.num_pairs, size=k, replace=False))
        samples = np.stack([2 * chosen, 2 * chosen + 1], axis=1).reshape(-1)
        relabel_split = ObservationDataset(split.dataset.messages[samples], split.dataset.stats[samples],
                                           {"source": str(split.dataset_path)})
        datasets.append(relabel_split)
    elif cfg.relabel_offline:
        logger.warning("--relabel_offline: the offline validation split is not available (%s)", reason)

    out_dir = cfg.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{cfg.stem}.", dir=out_dir))
    work.chmod(out_dir.stat().st_mode & 0o777)  # mkdtemp makes it private; it becomes the data folder
    try:
        labels, annotation = annotate(datasets, cfg.skill, cfg.annotator, cfg.seed, work, cfg.progress)
        on_policy = on_policy_section(reward, data, labels[0])
        offline = offline_section(reward, exp.reward_dir, split, reason)
        if relabel_split is not None:
            first, second = pair_scores(reward, relabel_split)
            offline["relabelled"] = {**agreement_stats(first, second, labels[1]).to_dict(),
                                     "label_counts": label_counts(labels[1]),
                                     "label_shares": label_shares(labels[1]),
                                     "mean_score": _mean(np.concatenate([first, second]))}
        summary = summary_dict(cfg, exp, reward, data, on_policy, offline, annotation)
        data_dir = out_dir / f"{cfg.stem}_data"
        if data_dir.exists():
            shutil.rmtree(data_dir)
        os.replace(work, data_dir)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    json_path, md_path = out_dir / f"{cfg.stem}.json", out_dir / f"{cfg.stem}.md"
    summary["files"] = {"json": str(json_path), "markdown": str(md_path), "data": str(data_dir)}
    table = markdown_table(summary)
    summary["table"] = table
    atomic_write_text(json_path, json.dumps(summary, indent=1, default=_json_default))
    atomic_write_text(md_path, table)
    logger.info("wrote %s, %s and %s", json_path, md_path, data_dir)
    return summary


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


__all__ = [
    "AgreementConfig",
    "AgreementError",
    "AgreementStats",
    "AnnotatorSettings",
    "Rollouts",
    "agreement_stats",
    "collect_rollouts",
    "form_pairs",
    "markdown_table",
    "offline_split",
    "run_agreement",
    "select_skill_steps",
]
