"""The LLM policy baseline: a language model picks every action; evaluated on one task.

Examples::

    # the paper's setting: a served model (e.g. `vllm serve meta-llama/Llama-3.1-405B-Instruct`)
    python -m scripts.llm_policy --eval_target gnomish --backend openai --base_url http://localhost:8000/v1 \\
        --model meta-llama/Llama-3.1-405B-Instruct --eval_episodes 20 --eval_num_envs 20 --max_episode_steps 5000
    # "equivalent prompting": MaestroMotif's knowledge of the game, the skills and the task in the prompt
    python -m scripts.llm_policy --eval_target gnomish --prompt equivalent --backend openai --base_url URL
    # CPU smoke run with the RULE-BASED STAND-IN (no language model)
    python -m scripts.llm_policy --eval_target gnomish --backend stand_in --eval_episodes 2 --max_episode_steps 200

Writes ``{out_dir}/eval/{task}_seed{seed}.{json,csv,png}`` (the JSON of ``scripts.main --evaluation
True``, plus the LLM's calls, tokens, parse failures and the run's cost) and updates
``{out_dir}/cost.json``. Replies are cached in ``--cache_dir``: a rerun asks the model only what it
was not asked before. A backend that cannot work here (``--backend vllm`` without vLLM or a GPU,
``--backend openai`` without ``--base_url`` or with a server that does not answer, ``--backend
replay`` without a transcript) or an unknown task stops with exit status 2 before anything is
started or written.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from common.cli import USAGE, ScriptParser, error
from common.llm import CODER_MODEL, BackendError
from common.skill_files import add_skills_flag
from common.vocabulary import EVAL_TASKS
from rl_baseline.baselines.llm_policy.client import POLICY_BACKENDS, LLMClient, LLMSettings
from rl_baseline.baselines.llm_policy.prompts import PROMPT_KINDS


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.llm_policy",
        description="Evaluate the paper's LLM policy baseline on one task: a language model chooses every "
                    "primitive action from a text rendering of the observation. --backend stand_in is a rule-based "
                    "stand-in for the model (no language model), for CPU smoke runs.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    t = p.add_argument_group("task and evaluation")
    t.add_argument("--eval_target", required=True, help=f"the task, one of {', '.join(EVAL_TASKS)}")
    t.add_argument("--prompt", default="zero_shot", choices=PROMPT_KINDS,
                   help="zero_shot: the task's goal only; equivalent: also MaestroMotif's knowledge of the game, the "
                        "five skills and the task's strategy (the code-generation prompt's)")
    t.add_argument("--eval_protocol", default="project", choices=("project", "release"),
                   help="project: --eval_episodes episodes; release: --eval_env_steps env steps, the last "
                        "--eval_stats_avg finished episodes averaged (the authors' protocol; costly with an LLM)")
    t.add_argument("--eval_episodes", type=int, default=10, help="project protocol: episodes to play")
    t.add_argument("--eval_env_steps", type=int, default=3_000_000, help="release protocol: env steps in all")
    t.add_argument("--eval_stats_avg", type=int, default=1000, help="release protocol: finished episodes averaged")
    t.add_argument("--eval_num_envs", type=int, default=1,
                   help="games played together; their questions go to the model in one batch")
    t.add_argument("--max_episode_steps", type=int, default=5000,
                   help="the per-episode step cap (an episode reaching it ends as step_limit)")
    t.add_argument("--seed", type=int, default=2,
                   help="seeds every episode's dungeon: the same command plays the same games")
    t.add_argument("--history", type=int, default=4, help="past steps (message and action) shown in each prompt")
    t.add_argument("--out_dir", default="train_dir/baselines/llm_policy",
                   help="results go to {out_dir}/eval/ and {out_dir}/cost.json")
    t.add_argument("--method", default=None,
                   help="method name in the results and cost.json (default: llm_policy, or llm_policy_equivalent "
                        "with --prompt equivalent)")
    t.add_argument("--no_progress", action="store_true", help="no progress bar")
    m = p.add_argument_group("the language model")
    m.add_argument("--backend", default="openai", choices=POLICY_BACKENDS,
                   help="vllm (offline, in this process, on this node's GPUs), openai (an OpenAI-compatible server at "
                        "--base_url), hf, transformers (a local model), replay (a recorded transcript, no model) or "
                        "stand_in (a RULE-BASED STAND-IN, no language model)")
    m.add_argument("--model", default=CODER_MODEL, help="model id (vllm, openai, hf, transformers)")
    m.add_argument("--base_url", default=None, help="server URL for --backend openai/hf, e.g. http://localhost:8000/v1")
    m.add_argument("--replay", default=None, help="--backend replay: a transcript written by --record")
    m.add_argument("--record", default=None, help="append every question the backend answers, and its reply, to this "
                                                  "JSONL transcript (replayable with --backend replay)")
    m.add_argument("--cache_dir", default=None,
                   help="reply cache folder (default {out_dir}/llm_cache; 'none' for no cache)")
    m.add_argument("--temperature", type=float, default=0.1, help="sampling temperature (the paper's 0.1)")
    m.add_argument("--top_p", type=float, default=0.95, help="nucleus sampling")
    m.add_argument("--top_k", type=int, default=50, help="top-k sampling (0: off, for servers that refuse it)")
    m.add_argument("--max_tokens", type=int, default=256, help="reply length cap in tokens")
    m.add_argument("--llm_seed", type=int, default=None, help="sampling seed passed to the backend")
    m.add_argument("--num_gpus", type=int, default=1, help="--backend vllm: tensor parallel size")
    m.add_argument("--concurrency", type=int, default=16, help="--backend openai/hf: requests in flight")
    m.add_argument("--timeout_s", type=float, default=300.0, help="--backend openai/hf: seconds per request")
    m.add_argument("--server_gpus", type=float, default=0.0,
                   help="GPUs of the server answering --base_url, to count its GPU hours in cost.json")
    add_skills_flag(p)
    return p


def config_from_args(args: argparse.Namespace):
    from rl_baseline.baselines.llm_policy.run import LLMPolicyConfig  # lazy: pulls in NLE and numpy; --help stays light

    cache = args.cache_dir if args.cache_dir is not None else str(Path(args.out_dir) / "llm_cache")
    llm = LLMSettings(
        backend=args.backend, model=args.model, base_url=args.base_url, replay=args.replay,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, max_tokens=args.max_tokens,
        seed=args.llm_seed, num_gpus=args.num_gpus, concurrency=args.concurrency, timeout_s=args.timeout_s,
        cache_dir=None if str(cache).lower() == "none" else cache, record=args.record,
    )
    return LLMPolicyConfig(
        task=args.eval_target, out_dir=args.out_dir, llm=llm, prompt=args.prompt, method=args.method or "",
        protocol=args.eval_protocol, episodes=args.eval_episodes, env_steps=args.eval_env_steps,
        stats_avg=args.eval_stats_avg, num_envs=args.eval_num_envs, max_episode_steps=args.max_episode_steps,
        seed=args.seed, history=args.history, server_gpus=args.server_gpus, progress=not args.no_progress,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    from rl_baseline.baselines.llm_policy.run import evaluate_llm_policy  # lazy: NLE and numpy, as above

    cfg = config_from_args(args)
    try:
        cfg.check()
        client = LLMClient(cfg.llm)  # checks the backend before any environment or file exists
    except (ValueError, BackendError) as exc:
        return error(exc, USAGE)
    except Exception as exc:  # a local model that does not load (transformers: a wrong --model, ...)
        return error(f"--backend {args.backend} --model {args.model}: the backend cannot be created: {exc}", USAGE)
    evaluate_llm_policy(cfg, client)
    return 0


if __name__ == "__main__":
    sys.exit(main())
