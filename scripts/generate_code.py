"""Writes a policy over skills with a language model (phase 2-3 of MaestroMotif).

Example: python -m scripts.generate_code --task gnomish --seed 42
"""
from __future__ import annotations

import argparse
import logging
import sys

from code_generation.generate import GenerationConfig, generate
from code_generation.isolation import IsolationUnavailable, require_isolation
from code_generation.prompts import PromptError
from code_generation.sandbox import SandboxLimits
from common.cli import FAILED, USAGE, MissingPackageError, ScriptParser, error
from common.flag_checks import FlagError, output_folder
from common.llm import CODER_MODEL, BackendError, make_backend
from common.skill_files import add_skills_flag
from common.vocabulary import ALL_TASKS

# the backends that can write code (the annotation stand-ins cannot)
CODE_BACKENDS = ("hf", "openai", "transformers", "llamacpp", "vllm", "replay")


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.generate_code", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=ALL_TASKS, help="task whose policy over skills is written")
    p.add_argument("--seed", type=int, default=42,
                   help="run number: names the output folder _seed{N} and is the sampling seed sent to the model")
    p.add_argument("--out_dir", default="code_generation",
                   help="root of the outputs: {out_dir}/{task}/_seed{N}/{transcript.jsonl,execution.py}")
    p.add_argument("--max_iters", type=int, default=4, help="most code answers asked for (rewrites included)")
    p.add_argument("--backend", default="hf", choices=CODE_BACKENDS,
                   help="how the language model is reached (replay: the answers of a recorded transcript)")
    p.add_argument("--model", default=CODER_MODEL, help="model name (hub id, served name or local path)")
    p.add_argument("--base_url", default=None, help="endpoint URL (TGI/vLLM for hf, OpenAI-compatible for openai)")
    p.add_argument("--api_key_env", default="HF_TOKEN", help="environment variable holding the API token")
    p.add_argument("--replay", default=None, help="transcript.jsonl whose answers the replay backend gives")
    p.add_argument("--temperature", type=float, default=0.2, help="sampling temperature")
    p.add_argument("--max_tokens", type=int, default=10000, help="most tokens per answer")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (openai, hf)")
    p.add_argument("--device", default=None,
                   help="for --backend transformers: cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument("--device_map", default=None,
                   help="for --backend transformers: 'auto' spreads a large model over all GPUs (needs accelerate)")
    p.add_argument("--prompt_dir", default=None, help="folder of the prompt files (default: the package's)")
    p.add_argument("--meta_root", default=None,
                   help="meta-policy root whose exploration module is shown to evaluation tasks")
    p.add_argument("--skill_functions", action="store_true",
                   help="also generate skill_precondition / skill_termination (saved as skill_functions.py)")
    p.add_argument("--no_reference_test", action="store_true",
                   help="accept code on the model's verdict alone, without the task's reference unit test")
    p.add_argument("--test_timeout", type=float, default=10.0, help="wall-clock limit of one sandboxed test (s)")
    p.add_argument("--trust_generated_code", action="store_true",
                   help="run the unit tests of the generated code unconfined but for the rlimits (default: in a "
                        "bubblewrap sandbox with no network, no files of yours and an empty environment; "
                        "docs/reliability.md)")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.max_iters < 1:
        print("error: --max_iters must be at least 1", file=sys.stderr)
        return 2
    config = GenerationConfig(task=args.task, seed=args.seed, out_dir=args.out_dir, max_iters=args.max_iters,
                              prompt_dir=args.prompt_dir, meta_root=args.meta_root,
                              reference_test=not args.no_reference_test, skill_functions=args.skill_functions,
                              limits=SandboxLimits(wall_seconds=args.test_timeout,
                                                   cpu_seconds=max(1, int(args.test_timeout)),
                                                   trust_generated_code=args.trust_generated_code))
    if not args.trust_generated_code:
        try:
            require_isolation()
        except IsolationUnavailable as exc:
            return error(exc, USAGE)
    try:  # the flags' output folder and backend (a --replay transcript that is missing or broken): bad input
        output_folder("--out_dir", args.out_dir)
        client = make_backend(args.backend, model=args.model, base_url=args.base_url,
                              temperature=args.temperature, max_tokens=args.max_tokens, top_k=0, top_p=1.0,
                              seed=args.seed, api_key_env=args.api_key_env, replay_path=args.replay,
                              timeout=args.timeout, max_retries=2, concurrency=1, device=args.device,
                              device_map=args.device_map)
    except (FlagError, BackendError) as exc:
        return error(exc, USAGE)
    recorded = getattr(client, "recorded", {}) or {}
    if recorded.get("task") not in (None, args.task):
        return error(f"--replay {args.replay}: a transcript recorded for task {recorded['task']} (seed "
                     f"{recorded.get('seed', '?')}), not for --task {args.task}; replay it with --task "
                     f"{recorded['task']}, or give {args.task}'s transcript", USAGE)
    try:
        result = generate(config, client)
    except (MissingPackageError, PromptError) as exc:  # a missing optional package or a bad prompt file
        return error(exc, USAGE)
    except BackendError as exc:  # the model's server failed, or a transcript ran out
        return error(exc, FAILED)
    print(f"transcript: {result.transcript_path}")
    if not result.accepted:
        print(f"error: {result.reason}; nothing written to execution.py", file=sys.stderr)
        return 1
    print(f"accepted after {result.rounds} round(s): {result.execution_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
