"""Annotate Motif's dataset layout with LLM preferences: Motif's ``scripts.annotate_pairs_dataset``.

Motif's README command runs as written (on a GPU node with vLLM)::

    python -m scripts.annotate_pairs_dataset --directory motif_dataset \\
        --prompt-version default --goal-key defaultgoal \\
        --n-annotation-chunks 1 --chunk-number 0 --llm-size 70 --num-gpus 8

It reads ``{directory}/data/message.npy`` (memory mapped; see :mod:`rlaif.motif_dataset`) and writes
``{directory}/preference/llama{size}b_msg_{goal}_{version}.npy`` (int8, one label per pair: 0 first
better, 1 second, 2 tie, 3 unknown). Resuming appends: an existing file keeps its labels 0-2 and only
its 3s are annotated, unless ``--ignore-existing``. Chunk files and their metadata go to
``{directory}/annotation_state/`` (``--state-dir``), never into ``preference/``.

On a CPU: ``--backend heuristic`` (a rule-based stand-in for the LLM, not the paper's method; its
labels still go under Motif's file name, and ``annotation_state/{annotator}.meta.json`` records the
backend), or ``--backend openai --base-url http://HOST:8000/v1`` against a served model.

Motif's README spells the module ``scripts.annotate_pairs_dataset.py``; Python's ``-m`` then looks
for a submodule named ``py`` and stops (exit status 1, "Try using 'scripts.annotate_pairs_dataset'"), writing
nothing: this module does no work when imported. Drop the ``.py``.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from common.cli import FAILED, USAGE, MissingPackageError, ScriptParser, error
from common.flag_checks import output_folder
from common.interrupts import interrupted_exit, sigterm_raises
from common.llm import BACKEND_ALIASES, BACKENDS, MOTIF_ANNOTATOR_MODELS, BackendError, backend_list
from common.skill_files import add_skills_flag
from rlaif.annotate import AnnotationConfig, annotate_chunk, check_annotation_flags, chunk_path
from rlaif.motif_dataset import MotifLayoutError, rule_preferences
from rlaif.motif_prompts import GOAL_KEYS, LLM_SIZES, PROMPT_CONTEXTS, PROMPT_VERSIONS, equivalent_context
from scripts.annotate_pairs import boolean_flag

ANNOTATOR_TYPES = ("llama", "score", "return")
STATE_DIRNAME = "annotation_state"


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.annotate_pairs_dataset",
        description=(
            "Annotate the pairs of Motif's dataset layout ({directory}/data/*.npy) with an LLM judge's preferences; "
            "writes {directory}/preference/{annotator}.npy (int8: 0 first better, 1 second better, 2 tie, 3 unknown). "
            "Motif's flags, plus this project's backends (--backend heuristic: a rule-based stand-in for the LLM, "
            "for CPU runs)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    # Motif's flags
    p.add_argument("--directory", default="./motif_dataset", help="the dataset in Motif's layout (data/, info/, preference/)")
    p.add_argument("--annotator-type", "--annotator_type", dest="annotator_type", default="llama", choices=ANNOTATOR_TYPES,
                   help="llama: the LLM judge; score / return: Motif's rule annotators (the higher info/score, or the "
                        "higher sum of data/rewards, wins; equal is a tie), written to preference/score.npy / return.npy")
    p.add_argument("--custom-annotator-string", "--custom_annotator_string", dest="custom_annotator_string", default=None,
                   help="name of the preference file instead of llama{size}b_msg_{goal}_{version}")
    p.add_argument("--prompt-version", "--prompt_version", dest="prompt_version", default="default",
                   choices=PROMPT_VERSIONS,
                   help="default: two 'descriptions', answer (\"best_description\": 1|2|None); reworded: two "
                        "'messages', a comment on uncertainty, answer (\"best_message\": ...)")
    p.add_argument("--goal-key", "--goal_key", dest="goal_key", default="defaultgoal", choices=GOAL_KEYS,
                   help="goal sentence of the prompt: Motif's defaultgoal (game score), zeroknowledge (none), combat, "
                        "gold, stairs, one of this project's five skills, or one of its nine evaluation tasks (the "
                        "task's description: the Motif task-specific baseline)")
    p.add_argument("--use-messages", "--use_messages", dest="use_messages", type=boolean_flag, default=True,
                   help="describe each observation by its messages (Motif's default)")
    p.add_argument("--use-blstats", "--use_blstats", dest="use_blstats", type=boolean_flag, default=False,
                   help="add the bottom-line stats (Dlvl, $, HP, Xp, hunger) to the descriptions; the file name gets minbl_")
    p.add_argument("--llm-size", "--llm_size", dest="llm_size", type=int, default=70, choices=LLM_SIZES,
                   help="Llama 2 chat model: " + ", ".join(f"{k} -> {v}" for k, v in MOTIF_ANNOTATOR_MODELS.items()))
    p.add_argument("--num-gpus", "--num_gpus", dest="num_gpus", type=int, default=8,
                   help="tensor parallel size of --backend vllm (Motif: 8 for the 70B model, 1 for 7B/13B on a 32 GB GPU)")
    p.add_argument("--logdir", default=None,
                   help="folder for the conversation logs ({annotator}.chunk{i}.jsonl); none when not given")
    p.add_argument("--allow-mixed-annotators", "--allow_mixed_annotators", dest="allow_mixed_annotators",
                   action="store_true",
                   help="let a resume add labels of another backend or model to those already there (refused by "
                        "default); the metadata then records each annotator with its pair ranges")
    p.add_argument("--max-unusable-share", "--max_unusable_share", dest="max_unusable_share", type=float, default=0.5,
                   help="exit 1 when more than this share of the run's pairs have no usable answer after the retry "
                        "(the labels are saved; those pairs stay unknown for a resume); 1 never fails")
    p.add_argument("--batch-size", "--batch_size", dest="batch_size", type=int, default=2000,
                   help="pairs sent to the backend at once")
    p.add_argument("--num-workers", "--num_workers", dest="num_workers", type=int, default=80,
                   help="accepted for Motif's command line; not used (the memory-mapped arrays are read directly, "
                        "without a data loader)")
    p.add_argument("--n-annotation-chunks", "--n_annotation_chunks", "--n-chunks", "--n_chunks", dest="n_chunks",
                   type=int, default=1, help="split the pairs into this many chunks (one job each)")
    p.add_argument("--chunk-number", "--chunk_number", dest="chunk_number", type=int, default=0,
                   help="which chunk this run annotates, 0..n-1")
    p.add_argument("--flushing-freq", "--flushing_freq", dest="flushing_freq", type=int, default=1,
                   help="save the chunk's labels every this many batches")
    p.add_argument("--ignore-existing", "--ignore_existing", dest="ignore_existing", action="store_true",
                   help="annotate this chunk again instead of keeping the labels 0-2 of an existing file (the file is "
                        "replaced only when the new run finishes)")
    # this project's flags
    p.add_argument("--backend", default="vllm",
                   help=f"one of {backend_list(BACKENDS)} (heuristic: a rule-based stand-in for the LLM; random: random labels)")
    p.add_argument("--model", default=None, help="model id or path instead of the --llm-size Llama 2 chat model")
    p.add_argument("--base-url", "--base_url", dest="base_url", default=None,
                   help="server of --backend openai/hf, e.g. http://localhost:8000/v1")
    p.add_argument("--prompt-file", "--prompt_file", dest="prompt_file", default=None,
                   help="a text file with another prompt template (e.g. the published one): three {} fields (goal, "
                        "description 1, description 2; literal braces doubled) or {goal}, {description_1}, {description_2}")
    p.add_argument("--system-prompt-file", "--system_prompt_file", dest="system_prompt_file", default=None,
                   help="a text file with another system prompt")
    p.add_argument("--prompt-context", "--prompt_context", dest="prompt_context", default="none",
                   choices=PROMPT_CONTEXTS,
                   help="text before the goal: none, or equivalent (Motif with equivalent prompting: the five skills' "
                        "descriptions, the task's description and the policy over skills of --policy-code; the goal key "
                        "must be an evaluation task; the file name gets _equivalent)")
    p.add_argument("--policy-code", "--policy_code", dest="policy_code", default=None,
                   help="the task's generated policy over skills (e.g. rl_baseline/meta_policies/gnomish/seed42/"
                        "execution.py), put into the prompt by --prompt-context equivalent")
    p.add_argument("--state-dir", "--state_dir", dest="state_dir", default=None,
                   help=f"folder of the chunk files and metadata (default: {{directory}}/{STATE_DIRNAME})")
    p.add_argument("--merge", action="store_true", help="only merge the finished chunk files into the final file")
    p.add_argument("--temperature", type=float, default=0.1, help="sampling temperature (Motif: 0.1)")
    p.add_argument("--top-p", "--top_p", dest="top_p", type=float, default=0.95, help="nucleus sampling (Motif: 0.95)")
    p.add_argument("--top-k", "--top_k", dest="top_k", type=int, default=50, help="top-k sampling (Motif: 50; 0: off)")
    p.add_argument("--max-tokens", "--max_tokens", dest="max_tokens", type=int, default=2048,
                   help="maximum tokens per reply (Motif allowed 4096, Llama 2's whole context window)")
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed: each pair is asked with a seed made from it and the pair's index, so the "
                        "labels do not depend on --batch-size, the chunking or a resume")
    p.add_argument("--concurrency", type=int, default=16, help="parallel requests of --backend openai/hf")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request of --backend openai/hf")
    p.add_argument("--max-retries", "--max_retries", dest="max_retries", type=int, default=5,
                   help="retries per failed request of --backend openai/hf")
    p.add_argument("--no-progress", "--no_progress", dest="progress", action="store_false", help="hide the progress bar")
    p.add_argument("--log-level", "--log_level", dest="log_level", default="INFO", help="logging level")
    add_skills_flag(p)
    return p


def _read_text(path: str | None, flag: str) -> str | None:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{flag} {path}: no such file")
    return p.read_text(encoding="utf-8")


def _prompt_context(args: argparse.Namespace) -> str:
    """The text of ``--prompt-context`` (checked: equivalent prompting needs a task goal and ``--policy-code``)."""
    if args.prompt_context == "none":
        if args.policy_code is not None:
            raise ValueError("--policy-code is read by --prompt-context equivalent only")
        return ""
    if args.policy_code is None:
        raise ValueError("--prompt-context equivalent needs --policy-code FILE (the task's policy over skills)")
    code = _read_text(args.policy_code, "--policy-code")
    return equivalent_context(args.goal_key, code or "")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    if args.annotator_type != "llama":
        try:
            output_folder("--directory", Path(args.directory) / "preference", MotifLayoutError)
            path, counts = rule_preferences(args.directory, args.annotator_type,
                                            name=args.custom_annotator_string, ignore_existing=args.ignore_existing)
        except MotifLayoutError as exc:
            return error(exc, USAGE)
        except OSError as exc:
            return error(exc, FAILED)
        print(f"{args.annotator_type} annotator: wrote {path} ({counts})")
        return 0
    if args.backend not in BACKENDS and args.backend not in BACKEND_ALIASES:
        return error(f"--backend {args.backend!r} is unknown; valid backends: {backend_list(BACKENDS)}")
    directory = Path(args.directory)
    try:
        context = _prompt_context(args)
        cfg = AnnotationConfig(
            layout="motif", goal_key=args.goal_key, directory=str(directory),
            preference_dir=str(directory / "preference"),
            state_dir=args.state_dir or str(directory / STATE_DIRNAME),
            logdir=args.logdir or "", log_conversations=args.logdir is not None,
            custom_annotator_string=args.custom_annotator_string, prompt_version=args.prompt_version,
            use_messages=args.use_messages, use_blstats=args.use_blstats, llm_size=args.llm_size,
            prompt=args.prompt_file, system_prompt=_read_text(args.system_prompt_file, "--system-prompt-file"),
            backend=args.backend, model=args.model or MOTIF_ANNOTATOR_MODELS[args.llm_size], base_url=args.base_url,
            num_gpus=args.num_gpus, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
            max_tokens=args.max_tokens, seed=args.seed, n_chunks=args.n_chunks, chunk_number=args.chunk_number,
            batch_size=args.batch_size, flushing_freq=args.flushing_freq, ignore_existing=args.ignore_existing,
            merge=args.merge, concurrency=args.concurrency, timeout=args.timeout, max_retries=args.max_retries,
            progress=args.progress, prompt_context=context, prompt_context_name=args.prompt_context,
            max_unusable_share=args.max_unusable_share, allow_mixed_annotators=args.allow_mixed_annotators,
        )
        if not (args.use_messages or args.use_blstats):
            raise ValueError("--use-messages false needs --use-blstats true: a description needs one of them")
        if args.backend in ("heuristic", "random"):
            logging.getLogger("scripts.annotate_pairs_dataset").warning(
                "--backend %s is not an LLM: its labels go to %s.npy (Motif's name for the prompt configuration); "
                "%s/%s.meta.json records the backend", args.backend, cfg.annotator, cfg.work_dir, cfg.annotator)
        check_annotation_flags(cfg)
        with sigterm_raises():
            summary = annotate_chunk(cfg)
    except (MissingPackageError, ValueError) as exc:  # bad input (the project's input errors are ValueErrors)
        return error(exc, USAGE)
    except (BackendError, OSError) as exc:  # the run itself failed: a server that stopped answering, a full disk
        return error(exc, FAILED)
    except KeyboardInterrupt as exc:
        saved = chunk_path(cfg.work_dir, cfg.annotator, cfg.chunk_number, cfg.n_chunks)
        return interrupted_exit(exc, f"the labels of every finished batch are saved in {saved}; run the same "
                                "command again to resume: only the pairs still unknown are asked")
    if args.backend in ("heuristic", "random") and context:
        print(f"note: the --backend {args.backend} stand-in does not read the --prompt-context text; its labels are "
              "those it gives without it (the prompts and conversation logs do hold the context)")
    print(summary.text())
    unusable = summary.unusable_error(args.max_unusable_share)
    return error(unusable, FAILED) if unusable else 0


if __name__ == "__main__":
    sys.exit(main())
