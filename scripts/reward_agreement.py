"""Does a skill's reward model agree with its annotator on the data the trained policy sees?

Plays episodes with a trained skill policy, pairs the steps of one skill, labels the pairs
with an annotator backend and compares the labels with the skill's reward model; the same
on the reward model's offline validation split. See :mod:`orchestration.reward_agreement`.

Examples::

    # the policy held on the descender for 10 episodes, labelled by the LLM behind a server
    python -m scripts.reward_agreement --skill descender --policy_dir train_dir/skill_policy/default \\
        --backend openai --base_url http://gpu-node:8000/v1
    # CPU smoke run: the exploration meta-policy, the rule-based stand-in for the LLM
    python -m scripts.reward_agreement --skill discoverer --policy_dir train_dir/pipeline_smoke/skill_policy/smoke \\
        --backend heuristic --collect_mode exploration --episodes 2 --max_steps 200

Writes ``{policy_dir}/reward_agreement/{skill}_{backend}.{json,md}`` and prints the table.
Exit status 2: bad input (unknown skill or backend, no experiment, checkpoint or reward
model, a skill the policy was not trained with, nothing collected); 1: the annotation failed.
"""
from __future__ import annotations

import argparse
import logging
import sys

from common.cli import ScriptParser
from common.llm import BACKENDS, DEFAULT_MODEL, BackendError
from common.skill_files import add_skills_flag
from common.vocabulary import SKILLS
from orchestration.reward_agreement import (
    COLLECT_MODES,
    PAIR_SAMPLINGS,
    AgreementConfig,
    AgreementError,
    AnnotatorSettings,
    run_agreement,
)
from rlaif.annotate import AnnotationError


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(
        prog="python -m scripts.reward_agreement",
        description=(
            "On-policy agreement of a skill's reward model with its annotator: play --episodes episodes with the "
            "trained policy in --policy_dir, pair the steps where --skill was active, label the pairs with --backend "
            "and count how often the reward model prefers the sample the annotator preferred; the same on the reward "
            "model's offline validation split. --backend heuristic is a rule-based stand-in for the LLM, and the "
            "results say so."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--skill", required=True, choices=SKILLS, help="the skill whose reward model is checked")
    p.add_argument("--policy_dir", required=True,
                   help="trained experiment {train_dir}/{experiment} written by python -m scripts.main (holds "
                        "config.json and checkpoint_p0/checkpoint_*.pth)")
    p.add_argument("--backend", required=True,
                   help=f"annotator backend, one of: {', '.join(BACKENDS)} (heuristic: rule-based stand-in for the "
                        "LLM; random: random labels)")
    g = p.add_argument_group("collection")
    g.add_argument("--collect_mode", default="skill", choices=COLLECT_MODES,
                   help="skill: hold the policy on --skill for whole episodes; exploration: the training "
                        "meta-policy composes the skills and only --skill's steps are kept (all steps, said so in "
                        "the results, if --skill is never active)")
    g.add_argument("--episodes", type=int, default=10, help="episodes to play")
    g.add_argument("--max_steps", type=int, default=None,
                   help="step limit per episode (default: the experiment's --max_episode_steps)")
    g.add_argument("--num_envs", type=int, default=4, help="games stepped together (at most --episodes)")
    g.add_argument("--deterministic", action="store_true",
                   help="take the policy's most likely action instead of sampling")
    g.add_argument("--num_pairs", type=int, default=500,
                   help="pairs of distinct steps to label (fewer when fewer steps were collected)")
    g.add_argument("--pair_sampling", default="uniform", choices=PAIR_SAMPLINGS,
                   help="uniform: every step of the skill equally likely; collector: steps weighted by the offline "
                        "collector's keep probability (steps without a message or a visible change 10x rarer, "
                        "level changes always), so the mix resembles the offline dataset's")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the games, of the policy's action sampling, of the pairs and of the annotator's "
                        "sampling")
    g.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                   help="device of the policy and the reward model (auto: the experiment's device for the policy, "
                        "cuda when available for the reward model)")
    r = p.add_argument_group("reward model")
    r.add_argument("--reward_dir", default=None,
                   help="reward model folder of --skill (default: the experiment's --reward_dir entry of the skill)")
    r.add_argument("--relabel_offline", action="store_true",
                   help="also label up to --num_pairs offline validation pairs with --backend, so on-policy and "
                        "offline are compared under the same annotator")
    a = p.add_argument_group("annotation (as python -m scripts.annotate_pairs)")
    a.add_argument("--model", default=DEFAULT_MODEL, help="model id or local path (vllm, transformers, openai, hf)")
    a.add_argument("--base_url", default=None, help="server URL for --backend openai/hf, e.g. http://localhost:8000/v1")
    a.add_argument("--num_gpus", type=int, default=1, help="tensor parallel size for --backend vllm")
    a.add_argument("--temperature", type=float, default=0.1, help="sampling temperature")
    a.add_argument("--top_p", type=float, default=0.95, help="nucleus sampling top-p")
    a.add_argument("--top_k", type=int, default=50, help="top-k sampling (0 disables it)")
    a.add_argument("--max_tokens", type=int, default=512, help="maximum tokens per reply")
    a.add_argument("--prompt", default="default",
                   help="'default' or a text file with a template holding {preference}, {caption_1} and {caption_2}")
    a.add_argument("--batch_size", type=int, default=64, help="pairs sent to the backend at once")
    a.add_argument("--concurrency", type=int, default=16, help="parallel requests for --backend openai/hf")
    a.add_argument("--timeout", type=float, default=120.0, help="seconds per request for --backend openai/hf")
    a.add_argument("--max_retries", type=int, default=5, help="retries per failed request for --backend openai/hf")
    a.add_argument("--device_map", default=None, help="for --backend transformers: e.g. 'auto' (needs accelerate)")
    a.add_argument("--no_conversation_log", dest="log_conversations", action="store_false",
                   help="do not keep the annotation conversations")
    p.add_argument("--out_dir", default=None, help="output folder (default: {policy_dir}/reward_agreement)")
    p.add_argument("--no_progress", dest="progress", action="store_false", help="hide the progress bars")
    p.add_argument("--log_level", default="INFO", help="logging level")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    settings = AnnotatorSettings(
        backend=args.backend, model=args.model, base_url=args.base_url, num_gpus=args.num_gpus,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, max_tokens=args.max_tokens,
        prompt=args.prompt, batch_size=args.batch_size, concurrency=args.concurrency, timeout=args.timeout,
        max_retries=args.max_retries, device_map=args.device_map, log_conversations=args.log_conversations,
    )
    cfg = AgreementConfig(
        skill=args.skill, policy_dir=args.policy_dir, annotator=settings, collect_mode=args.collect_mode,
        episodes=args.episodes, max_steps=args.max_steps, num_envs=args.num_envs, num_pairs=args.num_pairs,
        pair_sampling=args.pair_sampling, seed=args.seed, reward_dir=args.reward_dir,
        relabel_offline=args.relabel_offline, deterministic=args.deterministic, device=args.device,
        out_dir=args.out_dir, progress=args.progress,
    )
    try:
        summary = run_agreement(cfg)
    except AgreementError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (AnnotationError, BackendError) as exc:
        print(f"error: annotation failed: {exc}", file=sys.stderr)
        return 1
    print(summary["table"], end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
