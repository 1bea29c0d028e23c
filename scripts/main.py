"""Skill training (sample-factory APPO) and zero-shot evaluation.

Training (the release's command; ``--env`` defaults to the skill environment)::

    python -m scripts.main --algo APPO --num_workers 24 --num_envs_per_worker 20 \\
        --batch_size 4096 --reward_scale 0.1 --obs_scale 255.0 \\
        --train_for_env_steps 4_000_000_000 --save_every_steps 50_000_000 \\
        --keep_checkpoints 5 --stats_avg 1000 --seed 2 --code_seed 42 \\
        --reward_dir "['train_dir/skill_rewards/llama3_discoverer_default', ...]" \\
        --extrinsic_reward 0.0 --llm_reward 0.1 --train_dir train_dir/skill_policy/ --experiment default

Evaluation: the same command plus ``--evaluation True --eval_target goldenexit`` (any of
gnomish, delphi, minetown, transactions, price, buc, goldenexit, levelupsell, discoveryhunger);
results go to ``{train_dir}/{experiment}/eval/{task}_seed{code_seed}.{json,csv,png}``.

Forced-skill evaluation: ``--evaluation True --eval_skill descender`` (any skill) holds the
policy on one skill for ``--eval_episodes`` episodes, no meta-policy, and writes that skill's
measures to ``{train_dir}/{experiment}/eval/skill_{skill}.json``; ``python -m
scripts.skill_report --policy_dir {train_dir}/{experiment}`` does it for every skill next to
the untrained network and a uniform random policy.

Motif single-reward runs (one skill, one reward model, no meta-policy; Motif's README command)::

    python -m scripts.main --algo APPO --env nle_fixed_eat_action --num_workers 24 \\
        --num_envs_per_worker 20 --batch_size 4096 --reward_scale 0.1 --obs_scale 255.0 \\
        --train_for_env_steps 2_000_000_000 --save_every_steps 10_000_000 \\
        --keep_checkpoints 5 --stats_avg 1000 --seed 777 --reward_dir train_dir/reward_saving_dir/standard_reward/ \\
        --experiment standard_motif --train_dir train_dir/rl_saving_dir \\
        --extrinsic_reward 0.1 --llm_reward 0.1 --reward_encoder nle_torchbeast_encoder \\
        --root_env NetHackScore-v1 --beta_count_exponent 3 --eps_threshold_quantile 0.5

Game reward only (no reward model): ``--env nle_fixed_eat_action --root_env NetHackScore-v1
--llm_reward 0 --extrinsic_reward 1``. ``--evaluation True`` on either evaluates its ``--root_env``
task (``{train_dir}/{experiment}/eval/{root_env}.json``: success rate, or the score); with
``--eval_target`` one of MaestroMotif's tasks it is evaluated like the skill policy (its environment
is read from the saved configuration).

All of sample-factory's flags are accepted too (``--help`` lists them). A worker that dies ends
the run with exit status 1; a bad configuration is reported before any worker starts (status 2).
A run that seems stuck: ``kill -USR1 <pid>`` prints the stack of every thread of the main process.
"""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

if __package__ in (None, ""):  # run as a file (python scripts/main.py, ONI's spelling): the project on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from common.skill_files import activate_from_argv

    activate_from_argv()  # what importing the scripts package does: --skills before anything reads the skill set

# the project's imports come after the path above (which a run as a file needs to find them)
from common.interrupts import hold_signals  # noqa: E402

if __name__ == "__main__":  # a command: signals wait while it loads, checks and starts (common.interrupts)
    hold_signals()
    import faulthandler
    import signal

    # a run that seems stuck: ``kill -USR1 <pid>`` prints every thread's stack of this process on stderr
    faulthandler.register(signal.SIGUSR1, all_threads=True)

from common.cli import FAILED, USAGE, MissingPackageError, error
from common.flag_checks import output_folder
from common.interrupts import exit_if_signalled, interrupted_exit, release_signals, sigterm_raises
from common.llm import BackendError
from common.nethack import game_clock
from common.run_lock import LockHeldError, RunLock
from rl_baseline.sf.cfg import (
    ConfigError,
    eval_dir_of,
    eval_result_path,
    evaluates_root_env,
    evaluation_settings,
    forced_skill,
    resolve_cfg,
)
from rl_baseline.sf.checkpoints import CheckpointError

#: held in the experiment folder while a training runs there
TRAINING_LOCK = ".training.lock"


def _earlier_result(cfg: Any) -> Optional[str]:
    """Checks the result this evaluation would replace (before any game starts): one made with other settings is
    refused unless --eval_replace True (ConfigError naming them); returns what to say when it is replaced."""
    path = Path(eval_result_path(cfg))
    if not path.exists():
        return None
    settings = evaluation_settings(cfg)
    try:
        earlier = json.loads(path.read_text()).get("settings")
    except (OSError, ValueError, AttributeError):
        earlier = None
    if earlier == settings:
        return f"replaced the earlier result at {path} (made with the same settings)"
    if earlier is None:
        differ = "it records no settings (an older or damaged result)"
    else:
        keys = sorted(k for k in set(settings) | set(earlier) if settings.get(k) != earlier.get(k))
        differ = "other settings: " + ", ".join(f"{k} {earlier.get(k)!r} there, {settings.get(k)!r} here"
                                                for k in keys[:6])
    if not getattr(cfg, "eval_replace", False):
        raise ConfigError(f"{path} holds an earlier evaluation ({differ}); pass --eval_replace True to replace it, "
                          "or --eval_dir DIR to keep both")
    return f"replaced the earlier result at {path} (--eval_replace True; {differ})"


def _evaluate(cfg: Any) -> int:
    """An evaluation (tasks, a forced skill, or Motif's root environment); it writes its results at the end, so an
    interrupted one leaves nothing behind and says so."""
    replacing = _earlier_result(cfg)
    try:
        with sigterm_raises():
            if evaluates_root_env(cfg):
                from rl_baseline.sf.evaluate import evaluate_root_env  # lazy: pulls in NLE

                evaluate_root_env(cfg)
            elif forced_skill(cfg) is not None:
                from rl_baseline.sf.skill_eval import evaluate_skill  # lazy: pulls in NLE

                evaluate_skill(cfg)
            else:
                from rl_baseline.sf.evaluate import evaluate  # lazy: pulls in NLE

                evaluate(cfg)
    except KeyboardInterrupt as exc:
        return interrupted_exit(exc, "an evaluation writes its results when it ends, so nothing was written and "
                                "earlier results are as they were; run the same command again to evaluate")
    if replacing:
        print(replacing)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    try:
        cfg = resolve_cfg(argv)  # parsed, derived and validated once; the phases take it as it is
        # the folder written, before any game or worker starts: the evaluation's, or the experiment's
        if cfg.evaluation:
            flag = "--eval_dir" if getattr(cfg, "eval_dir", None) else "--train_dir"
            output_folder(flag, eval_dir_of(cfg), ConfigError)
        else:
            output_folder("--train_dir", Path(cfg.train_dir) / cfg.experiment, ConfigError)
        exit_if_signalled("nothing was started or written; the same command starts it")
        if cfg.evaluation:
            release_signals()  # from here on a signal is a KeyboardInterrupt: the evaluation says what it kept
            pinned = game_clock.parse_game_clock(cfg.game_clock)  # checked by resolve_cfg
            try:
                if pinned is not None and not game_clock.runs_under(pinned):
                    return game_clock.rerun_under(pinned, "scripts.main", argv)
            except MissingPackageError as exc:
                return error(exc, USAGE)
            except RuntimeError as exc:  # pinned, but the library did not load
                return error(exc, FAILED)
            return _evaluate(cfg)
        from rl_baseline.sf.train import train  # lazy: pulls in sample-factory and torch; only when training

        # one training per experiment folder: a second one would delete the first's checkpoints as its own
        # rotate; the lock names its holder (pid, host, start) and dies with it (common.run_lock)
        experiment = Path(cfg.train_dir) / cfg.experiment
        try:
            lock = RunLock(experiment / TRAINING_LOCK).acquire()
        except LockHeldError as exc:
            return error(f"another training is running in {experiment}: {exc}; wait for it to end (the same "
                         "command then resumes from its checkpoint), or train into another --experiment", USAGE)
        try:
            # sample-factory's event loop catches the KeyboardInterrupt a signal raises, stops the workers in order
            # (the learner saves a checkpoint) and reports INTERRUPTED; the exit status train returns says which
            # signal
            with sigterm_raises(sigint=True):
                return train(cfg)
        except KeyboardInterrupt as exc:  # before sample-factory's loop took over: while checking or starting
            return interrupted_exit(exc, "the training was stopped while it started, its workers with it; nothing "
                                    "was trained since its newest checkpoint; the same command starts (or resumes) it")
        finally:
            lock.release()
    except (ConfigError, CheckpointError, FileNotFoundError, BackendError) as exc:  # BackendError: --meta_llm_*
        return error(exc, USAGE)
    except KeyboardInterrupt as exc:  # between the checks and a phase's own handling: nothing written yet
        return interrupted_exit(exc, "nothing was started or written; the same command starts it")
    except Exception as exc:  # sample-factory's config loader raises bare Exception
        if "Could not load saved parameters" in str(exc):
            return error(exc, USAGE)
        raise


if __name__ == "__main__":
    sys.exit(main())
