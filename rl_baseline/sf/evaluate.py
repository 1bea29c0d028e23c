"""Zero-shot evaluation of a trained skill policy on one task, in-process.

The newest checkpoint of ``{train_dir}/{experiment}`` (``--load_checkpoint_kind latest``,
the default, or ``best``) is loaded into sample-factory's actor-critic; ``--eval_num_envs``
environments (the task's meta-policy composing the skills) are stepped together in this
process, without training, with actions sampled from the policy
(``--eval_deterministic_actions True`` takes the most likely one).

Two protocols (``--eval_protocol``):

* ``release`` (default) -- the authors' (see :mod:`rl_baseline.tasks.release_protocol`):
  every game is reset as soon as its episode ends, until ``--eval_env_steps`` env steps
  (summed over the games; the release's 3,000,000) have been run; episodes still running
  then are dropped. An episode ends with the game, at the step limit, or when the release's
  rule says the task is reached (interaction tasks: at the first stair descent). The result
  is the release's statistic over the last ``--eval_stats_avg`` (1000) finished episodes:
  the ``reached`` rate, or for transactions/price/buc the mean count over those of them
  that saw a shop/altar. The release ran 480 games (24 workers x 20); so does the default
  ``--eval_num_envs``.
* ``project`` -- ``--eval_episodes`` episodes ended by this project's task definitions
  (:mod:`rl_baseline.tasks.detectors`); the result is their mean and standard error.

Both rule sets follow every episode, whichever protocol ends it; the release's tracker
freezes when it says "reached" (the release would have stopped there). The JSON has the
headline (``mean``, ``stderr``, ``ci95`` with its ``ci_method``, ``episodes``, ``measure``: the driving
protocol's), the
sections ``"release"`` and ``"project"`` with each rule set's numbers, ``"protocol"`` /
``"episodes_ended_by"`` (which protocol ended the episodes), ``"run"`` (budget, steps run,
finished and dropped episodes), ``"depth"`` (where the episodes got to: deepest level, Mines
entered, descents), ``"endings"`` (how the headline's episodes ended: a task's rule, the step limit, or
a death and its cause read from the last messages), ``"meta_policy_errors"`` (exceptions the generated code raised;
a non-zero count is also a warning at the end of the run) and ``per_episode``.

Writes ``{train_dir}/{experiment}/eval/{task}_seed{code_seed}.{json,csv,png}`` (and a
``.gif`` of the first episode with ``--save_video True``).

The episode loop, the two rule sets' summaries and the files they are written to are
:mod:`rl_baseline.evaluation` (no sample-factory, so the LLM policy runs the same loop); this module
loads the checkpoint, builds the skill environments and adds what only they have (the hierarchical LLM
policy's questions, the isolated skills' networks, the video).

``--eval_policy untrained`` (the same network with its initial weights) and ``--eval_policy random``
(uniformly random actions) run the same evaluation as references, under the same policy over skills; their
results go to ``eval_untrained/`` and ``eval_random/`` beside ``eval/``, and their JSON says ``policy``.

With ``--skill_policy_dirs`` (the isolated-skills ablation) the policy is one network per skill
(:mod:`rl_baseline.sf.multi_policy`): the task's policy over skills picks the skill, that skill's
network acts; the JSON also names each skill's network and checkpoint (``skill_networks``).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from common.atomic_io import atomic_write_json
from common.nethack.game_clock import active_game_clock
from common.vocabulary import TASK_MEASURE, check_eval_target
from rl_baseline.baselines.llm_policy.client import shared_client
from rl_baseline.baselines.llm_policy.cost import CostClock, cost_section, update_cost_json
from rl_baseline.baselines.llm_policy.run import llm_section
from rl_baseline.baselines.motif_eval import run_root_episodes, summarize_root
from rl_baseline.envs.seeding import seed_run
from rl_baseline.evaluation import RunResult, evaluation_plan, run_evaluation, summarize, write_results
from rl_baseline.models.render import render_tty_frame
from rl_baseline.sf.cfg import (
    ConfigError,
    SkillEnvConfig,
    eval_dir_of,
    evaluates_root_env,
    evaluation_settings,
    require_resolved,
)
from rl_baseline.sf.multi_policy import load_skill_policies
from rl_baseline.sf.policy import UniformRandomPolicy, load_policy

logger = logging.getLogger(__name__)


def eval_dir(cfg: Any) -> Path:
    """``--eval_dir``, else ``{train_dir}/{experiment}/eval``."""
    return Path(eval_dir_of(cfg))


def _action_names(num_actions: int) -> Optional[list[str]]:
    try:
        from common.nethack.actions import action_names_for  # lazy: optional; the names only label the trackers' input
    except ImportError:
        return None
    return list(action_names_for(num_actions))


class _LLMEpisodes:
    """The hierarchical LLM policy's bookkeeping around the acting network: when ``run_evaluation`` ends
    an episode of game ``i``, the questions game ``i``'s policy over skills asked during it are taken
    (in the order of the results, so they sit next to each episode in the JSON)."""

    def __init__(self, policy: Any, envs: Sequence[Any], settings: Any, clock: Any) -> None:
        self.policy = policy
        self.envs = envs
        self.settings = settings
        self.clock = clock
        self.finished: list[dict] = []

    def act(self, obs: list[dict]) -> np.ndarray:
        return self.policy.act(obs)

    def episode_ended(self, i: int) -> None:
        self.policy.episode_ended(i)
        meta = getattr(self.envs[i], "meta_policy", None)
        if meta is not None and hasattr(meta, "take_episode_stats"):
            self.finished.append(meta.take_episode_stats().as_dict())

    def add_to(self, summary: dict, cfg: Any, run: RunResult, training_env_steps: int) -> None:
        metas = [getattr(env, "meta_policy", None) for env in self.envs]
        parse_errors = sum(int(getattr(m, "parse_errors", 0)) for m in metas)
        invalid = sum(int(getattr(m, "invalid_choices", 0)) for m in metas)
        client = shared_client(self.settings)
        llm = llm_section(client.stats, parse_errors, self.settings, invalid)
        for entry, stats in zip(summary["per_episode"], self.finished):
            entry["llm"] = stats
        gpus = float(cfg.meta_llm_server_gpus) + (float(self.settings.num_gpus) if self.settings.backend == "vllm"
                                                   else 0.0)
        if getattr(cfg, "device", "cpu") == "gpu":
            gpus += 1.0  # the skill network's GPU
        label = (f"Hierarchical LLM policy: trained skills, next skill chosen by {self.settings.describe()}, "
                 f"{int(cfg.max_episode_steps)}-step cap")
        # "experiment" names the method, so a report over the whole run never files these results under
        # MaestroMotif's experiment; the skill policy's own name stays in "skill_experiment"
        summary.update(method=cfg.meta_llm_method, experiment=cfg.meta_llm_method, skill_experiment=cfg.experiment,
                       label=label, meta_policy="llm", llm=llm,
                       max_episode_steps=int(cfg.max_episode_steps),
                       cost=cost_section(label, self.clock, run.env_steps_run, gpus, llm, training_env_steps))


def _save_gif(frames: list[np.ndarray], path: Path) -> None:
    from PIL import Image  # lazy: the video only (--save_video True)

    images = [Image.fromarray(f) for f in frames]
    if images:
        images[0].save(path, save_all=True, append_images=images[1:], duration=80, loop=0)


@dataclass
class _Acting:
    """What acts in an evaluation (``--eval_policy``) and where it came from."""

    policy: Any
    loaded: Any  # the loaded network(s); None for random actions
    checkpoint: Any
    env_steps: int
    description: str


def _acting_policy(cfg: Any, kind: str, env: Any, n_envs: int) -> _Acting:
    """The trained network (newest checkpoint, or one per skill with ``--skill_policy_dirs``), the same
    network untrained (initial weights seeded by ``--seed``) or uniformly random actions."""
    seed = int(cfg.seed or 0)
    if kind == "random":
        return _Acting(UniformRandomPolicy(env.action_space.n, seed=seed), None, None, 0, "uniformly random actions")
    if getattr(cfg, "skill_policy_list", None):  # the isolated-skills ablation: one network per skill
        loaded = load_skill_policies(cfg, env.observation_space, env.action_space)
    else:
        loaded = load_policy(cfg, env.observation_space, env.action_space, untrained=kind == "untrained",
                             init_seed=seed)
    checkpoint = getattr(loaded, "checkpoint", None) or getattr(loaded, "checkpoints", None)
    return _Acting(loaded.acting(n_envs, bool(cfg.eval_deterministic_actions)), loaded, checkpoint,
                   int(loaded.env_steps), "the untrained network" if kind == "untrained" else str(checkpoint))


# ----------------------------------------------------------------------------- entry point


def evaluate(cfg: Any) -> dict:
    """Runs the evaluation described in the module docstring on a finished configuration
    (:func:`rl_baseline.sf.cfg.resolve_cfg`); returns the summary dict."""
    from rl_baseline.sf.env import (  # lazy: torch (the reward models) only when an evaluation runs
        build_skill_env,
        register_envs,
    )

    require_resolved(cfg, "evaluation")
    task = check_eval_target(cfg.eval_target)
    register_envs()
    seed_run(int(cfg.seed or 0))

    protocol = cfg.eval_protocol
    if protocol == "release":
        n_envs = int(cfg.eval_num_envs)
    else:
        n_envs = max(1, min(int(cfg.eval_num_envs), int(cfg.eval_episodes)))
    env_cfg = SkillEnvConfig.from_cfg(cfg)
    if env_cfg.meta_llm is not None:
        # the model the environments will ask: reached (or loaded) before anything else, so a server that
        # does not answer stops the run here, named, with nothing written
        shared_client(env_cfg.meta_llm)
    envs = [build_skill_env(env_cfg) for _ in range(n_envs)]
    skill_names = envs[0].skill_names
    kind = getattr(cfg, "eval_policy", "trained") or "trained"
    acting = _acting_policy(cfg, kind, envs[0], n_envs)
    policy, loaded, checkpoint, env_steps = acting.policy, acting.loaded, acting.checkpoint, acting.env_steps
    plan = evaluation_plan(protocol, n_envs, int(cfg.eval_episodes), int(cfg.eval_env_steps),
                           int(cfg.eval_stats_avg), int(cfg.max_episode_steps),
                           saved=getattr(cfg, "eval_flags_from_saved", None) or {})
    logger.info("evaluating %s (env steps %s) on %s: %s", acting.description, env_steps, task, plan)

    llm_run = None
    if env_cfg.meta_llm is not None:
        # the hierarchical LLM policy: count each episode's questions as it ends
        llm_run = _LLMEpisodes(policy, envs, env_cfg.meta_llm, CostClock().start())
        policy = llm_run
    frames: list[np.ndarray] = []
    frame_fn = None
    if cfg.save_video:
        def frame_fn(env: Any) -> None:
            raw = env.last_obs
            frames.append(np.asarray(render_tty_frame(raw["tty_chars"], raw["tty_colors"])).copy())

    try:
        run = run_evaluation(
            envs, policy, task, protocol=protocol, episodes=int(cfg.eval_episodes),
            env_steps=int(cfg.eval_env_steps), action_names=_action_names(int(envs[0].action_space.n)), seed=int(cfg.seed or 0),
            skill_names=skill_names, frame_fn=frame_fn,
        )
    finally:
        for env in envs:
            env.close()

    summary = summarize(task, TASK_MEASURE[task], run.episodes, skill_names, protocol=protocol,
                        stats_avg=int(cfg.eval_stats_avg), run=run)
    summary.update(
        code_seed=int(cfg.code_seed), experiment=cfg.experiment, checkpoint=str(checkpoint),
        seed=int(cfg.seed or 0),  # the games played: evaluation_game_seed(seed, k); merged evaluations differ in it
        env_steps=env_steps, deterministic=bool(cfg.eval_deterministic_actions), policy=kind,
        game_clock=active_game_clock(), settings=evaluation_settings(cfg),
    )
    if kind != "trained":
        # a reference, named as such: never read as the experiment's own result
        summary.update(experiment=f"{cfg.experiment} ({kind})",
                       label={"untrained": "the untrained network (initial weights)",
                              "random": "uniformly random actions"}[kind] + " under the task's policy over skills")
    if llm_run is not None:
        llm_run.add_to(summary, cfg, run, int(env_steps))
    if getattr(cfg, "skill_policy_list", None):
        summary["skill_networks"] = {s: {"dir": d, "checkpoint": str(c)}
                                     for s, d, c in zip(skill_names, loaded.dirs, loaded.checkpoints)}
    stem = eval_dir(cfg) / f"{task}_seed{cfg.code_seed}"
    paths = write_results(stem, summary, skill_names)
    if llm_run is not None:
        update_cost_json(eval_dir(cfg).parent, summary["method"])
        llm = summary["llm"]
        logger.info("%s: %d LLM calls (%d from the cache), %d tokens (%s), %d parse failures, %d choices of a skill "
                    "that could not start; cost in %s", summary["label"], llm["calls"], llm["cache_hits"],
                    llm["tokens"], llm["tokens_counted_by"], llm["parse_errors"], llm["invalid_choices"],
                    eval_dir(cfg).parent / "cost.json")
        if not env_cfg.meta_llm.is_llm:
            logger.warning("no language model chose the skills (%s); these numbers are not an LLM's",
                           env_cfg.meta_llm.describe())
    if frames:
        _save_gif(frames, stem.with_suffix(".gif"))
        paths.append(stem.with_suffix(".gif"))
    release = summary["release"]
    counted = ""
    if release.get("seen_key") is not None:
        # the release averages its count over the episodes that saw a shop/altar only
        counted = (f"; the release's count averages the {release.get('episodes', 0)} of "
                   f"{release.get('finished_episodes', 0)} finished episodes with {release['seen_key']}")
    lo, hi = summary["ci95"]
    logger.info("%s (%s protocol): %s %.3f +- %.3f, 95%% interval [%.3f, %.3f] (%s), over %d episodes (release %s "
                "%.3f, project %s %.3f%s); wrote %s",
                task, protocol, summary["measure"], summary["mean"], summary["stderr"], lo, hi, summary["ci_method"],
                summary["episodes"],
                release.get("metric"), release.get("mean", math.nan),
                summary["project"]["measure"], summary["project"]["mean"], counted, ", ".join(str(p) for p in paths))
    endings = summary.get("endings") or {}
    if endings:
        logger.info("%s: how the %d episodes ended: %s", task, sum(endings.values()),
                    ", ".join(f"{name} {n}" for name, n in endings.items()))
    if run.meta_policy_errors:
        logger.warning("the %s meta-policy raised %d exception(s) during this evaluation (each replaced by its "
                       "fallback; the first ones are logged above with their tracebacks): its results are not "
                       "those of the generated code alone", task, run.meta_policy_errors)
    return summary


def evaluate_root_env(cfg: Any) -> dict:
    """``scripts.main --evaluation True`` on a Motif run (a finished configuration): see
    :mod:`rl_baseline.baselines.motif_eval`, which has the episode loop and the summary."""
    from rl_baseline.sf.env import (  # lazy: torch (the reward models) only when an evaluation runs
        build_skill_env,
        register_envs,
    )

    require_resolved(cfg, "root-environment evaluation")
    if not evaluates_root_env(cfg):
        raise ConfigError("root-environment evaluation is for --evaluation True of an nle_fixed_eat_action run")
    register_envs()
    seed_run(int(cfg.seed or 0))
    protocol = cfg.eval_protocol
    n_envs = int(cfg.eval_num_envs) if protocol == "release" else max(1, min(int(cfg.eval_num_envs),
                                                                             int(cfg.eval_episodes)))
    env_cfg = SkillEnvConfig.from_cfg(cfg)
    envs = [build_skill_env(env_cfg) for _ in range(n_envs)]
    kind = getattr(cfg, "eval_policy", "trained") or "trained"
    try:
        acting = _acting_policy(cfg, kind, envs[0], n_envs)
        logger.info("evaluating %s (env steps %s) on %s: %s protocol, %d games", acting.description,
                    acting.env_steps, cfg.root_env, protocol, n_envs)
        run = run_root_episodes(envs, acting.policy, protocol,
                                int(cfg.eval_episodes), int(cfg.eval_env_steps), seed=int(cfg.seed or 0))
    finally:
        for env in envs:
            env.close()
    summary = summarize_root(cfg.root_env, run, protocol, int(cfg.eval_stats_avg))
    summary.update(experiment=cfg.experiment, checkpoint=str(acting.checkpoint), env_steps=acting.env_steps,
                   max_episode_steps=int(cfg.max_episode_steps), policy=kind, game_clock=active_game_clock(),
                   settings=evaluation_settings(cfg))
    if kind != "trained":
        summary["experiment"] = f"{cfg.experiment} ({kind})"
    path = atomic_write_json(eval_dir(cfg) / f"{cfg.root_env}.json", summary)
    logger.info("%s: %s %.3f (stderr %.3f) over %d episodes (success rate %.3f, mean score %.1f); wrote %s",
                cfg.root_env, summary["measure"], summary["mean"], summary["stderr"], summary["episodes"],
                summary["success_rate"], summary["mean_score"], path)
    return summary
