"""Annotate observation pairs with LLM preferences (phase 1a).

Examples::

    # the paper's setup: Llama 3.1 70B through offline vLLM on a GPU node
    python -m scripts.annotate_pairs --goal_key descender --num_gpus 8
    # one of 8 slurm array tasks against a running OpenAI-compatible server
    python -m scripts.annotate_pairs --goal_key merchant --backend openai \
        --base_url http://gpu-node:8000/v1 --n_chunks 8 --chunk_number $SLURM_ARRAY_TASK_ID
    # CPU smoke run with the rule-based stand-in (not an LLM)
    python -m scripts.annotate_pairs --goal_key worshipper --backend heuristic
"""
from __future__ import annotations

import argparse
import logging
import sys

from common.cli import FAILED, USAGE, MissingPackageError, ScriptParser, error
from common.interrupts import interrupted_exit, sigterm_raises
from common.llm import BACKEND_ALIASES, BACKENDS, CHOICE_BACKENDS, DEFAULT_MODEL, BackendError, backend_list
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from rlaif.annotate import AnnotationConfig, annotate_chunk, check_annotation_flags, chunk_path
from rlaif.prompts import ANSWER_MODES


def boolean_flag(text: str) -> bool:
    """An argparse type for true/false flags (1/0, yes/no, on/off; also the Motif scripts')."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "y", "on"):
        return True
    if value in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.annotate_pairs",
        description=(
            "Annotate pairs of observations (samples 2k, 2k+1 of {directory}/{goal_key}.npz or .pkl) with "
            "preferences from an LLM judge; writes {preference_dir}/{annotator}.npy (0 first better, 1 second "
            "better, 2 tie, 3 unknown). --backend heuristic is a rule-based stand-in for the LLM, for CPU "
            "smoke runs only."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--goal_key", "--goal-key", dest="goal_key", required=True, choices=SKILLS,
                   help="skill whose dataset is annotated and whose preference sentence the judge gets")
    p.add_argument("--directory", default="og_dataset", help="dataset folder holding {goal_key}.npz or {goal_key}.pkl")
    p.add_argument("--preference_dir", "--preference-dir", dest="preference_dir", default="preference",
                   help="folder for the chunk files and the final {annotator}.npy")
    p.add_argument("--logdir", default="annotation_logs", help="folder for the conversation logs {annotator}.chunk{i}.jsonl")
    p.add_argument("--no_conversation_log", "--no-conversation-log", dest="log_conversations", action="store_false",
                   help="do not write conversation logs")
    p.add_argument("--custom_annotator_string", "--custom-annotator-string", dest="custom_annotator_string", default=None,
                   help="name of the preference file; default llama3_{goal_key}_default")
    p.add_argument("--prompt", default="default",
                   help="'default' or a text file with a template holding {preference}, {caption_1} and {caption_2}")
    p.add_argument("--backend", default="vllm", help=f"annotation backend, one of: {backend_list(BACKENDS)} "
                   "(heuristic: rule-based stand-in for the LLM; random: random labels)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="model id or local path (vllm, transformers, openai, hf)")
    p.add_argument("--base_url", "--base-url", dest="base_url", default=None,
                   help="server URL for --backend openai/hf, e.g. http://localhost:8000/v1")
    p.add_argument("--num_gpus", "--num-gpus", dest="num_gpus", type=int, default=None,
                   help="tensor parallel size for --backend vllm (default: every visible GPU, as the release)")
    p.add_argument("--max_model_len", "--max-model-len", dest="max_model_len", type=int, default=None,
                   help="vLLM's context length (default: the model's; a shorter one leaves more memory for the KV "
                        "cache, and annotation prompts need about 1,000 tokens plus --max_tokens)")
    p.add_argument("--gpu_memory_utilization", "--gpu-memory-utilization", dest="gpu_memory_utilization",
                   type=float, default=None, help="share of each GPU's memory vLLM may use (default: vLLM's, 0.9)")
    p.add_argument("--dtype", default=None,
                   help="vLLM's weight dtype: auto, bfloat16, float16, float32 (default: vLLM's auto)")
    p.add_argument("--quantization", default=None,
                   help="vLLM's quantization, e.g. fp8 (halves a bf16 model's weight memory)")
    p.add_argument("--temperature", type=float, default=0.1, help="sampling temperature")
    p.add_argument("--top_p", "--top-p", dest="top_p", type=float, default=0.95, help="nucleus sampling top-p")
    p.add_argument("--top_k", "--top-k", dest="top_k", type=int, default=50,
                   help="top-k sampling (0 disables it and leaves it out of server requests)")
    p.add_argument("--max_tokens", "--max-tokens", dest="max_tokens", type=int, default=512,
                   help="maximum tokens per reply")
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed: each pair is asked with a seed made from it and the pair's index, so the "
                        "labels do not depend on --batch_size, the chunking or a resume (also --backend random's)")
    p.add_argument("--n_chunks", "--n-annotation-chunks", "--n-chunks", dest="n_chunks", type=int, default=1,
                   help="split the pairs into this many chunks (e.g. one per slurm array task)")
    p.add_argument("--chunk_number", "--chunk-number", dest="chunk_number", type=int, default=0,
                   help="which chunk this run annotates, 0..n_chunks-1")
    p.add_argument("--batch_size", "--batch-size", dest="batch_size", type=int, default=None,
                   help="pairs sent to the backend at once (default: 2000 for --backend vllm, the release's, so the "
                        "engine schedules them together; 64 for the others)")
    p.add_argument("--flushing_freq", "--flushing-freq", dest="flushing_freq", type=int, default=10,
                   help="save the chunk file every this many batches")
    p.add_argument("--ignore_existing", "--ignore-existing", dest="ignore_existing", nargs="?", const=True,
                   default=False, type=boolean_flag,
                   help="start this chunk over instead of resuming from existing chunk/final files")
    p.add_argument("--allow_mixed_annotators", "--allow-mixed-annotators", dest="allow_mixed_annotators",
                   action="store_true",
                   help="let a resume add labels of another backend or model to those already there (refused by "
                        "default); the metadata then records each annotator with its pair ranges")
    p.add_argument("--merge", action="store_true",
                   help="only merge the finished chunk files of --n_chunks into the final file")
    p.add_argument("--device", default=None,
                   help="for --backend transformers: cpu, cuda or cuda:N (default: CUDA when a GPU is visible, else cpu)")
    p.add_argument("--device_map", "--device-map", dest="device_map", default=None,
                   help="for --backend transformers: e.g. 'auto' to spread a large model over all GPUs (needs accelerate)")
    p.add_argument("--concurrency", type=int, default=16, help="parallel requests for --backend openai/hf")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request for --backend openai/hf")
    p.add_argument("--max_retries", "--max-retries", dest="max_retries", type=int, default=5,
                   help="retries (exponential backoff) per failed request for --backend openai/hf")
    p.add_argument("--max_unusable_share", "--max-unusable-share", dest="max_unusable_share", type=float, default=0.5,
                   help="exit 1 when more than this share of the run's pairs have no usable answer after the retry "
                        "(the labels are saved; those pairs stay unknown for a resume); 1 never fails")
    p.add_argument("--answer_mode", "--answer-mode", dest="answer_mode", default="release", choices=ANSWER_MODES,
                   help="how the answer is asked: release (the paper's: reasoning, then the answer line, one free "
                        "retry), constrained_retry (the retry restricted to the answer lines), constrained (the "
                        "answer line alone, restricted, no reasoning; for small models that never end in the asked "
                        "form). The constrained modes need --backend " + backend_list(CHOICE_BACKENDS) + " (openai: llama.cpp's or vLLM's "
                        "server)")
    p.add_argument("--no_progress", "--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    p.add_argument("--log_level", "--log-level", dest="log_level", default="INFO", help="logging level")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    if args.backend not in BACKENDS and args.backend not in BACKEND_ALIASES:
        return error(f"--backend {args.backend!r} is unknown; valid backends: {backend_list(BACKENDS)}")
    # --skills chose this process's skill set (scripts/__init__.py); it is no annotation setting
    options = {k: v for k, v in vars(args).items() if k not in ("log_level", "device_map", "device", "skills")}
    cfg = AnnotationConfig(**options)
    for name in ("device_map", "device"):
        if getattr(args, name) is not None:
            cfg.backend_kwargs[name] = getattr(args, name)
    try:
        check_annotation_flags(cfg)
        with sigterm_raises():
            summary = annotate_chunk(cfg)
    except (MissingPackageError, ValueError) as exc:  # bad input (the project's input errors are ValueErrors)
        return error(exc, USAGE)
    except (BackendError, OSError) as exc:  # the run itself failed: a server that stopped answering, a full disk
        return error(exc, FAILED)
    except KeyboardInterrupt as exc:
        saved = chunk_path(cfg.work_dir, cfg.annotator, cfg.chunk_number, cfg.n_chunks)
        return interrupted_exit(exc, f"the labels of every finished batch are saved in {saved} (and the "
                                f"conversations in {cfg.logdir}); run the same command again to resume: only the "
                                "pairs still unknown are asked")
    print(summary.text())
    unusable = summary.unusable_error(args.max_unusable_share)
    return error(unusable, FAILED) if unusable else 0


if __name__ == "__main__":
    sys.exit(main())
