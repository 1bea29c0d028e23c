"""Joins a policy over skills with the skill functions and initial values into
rl_baseline/meta_policies/{task}/seed{N}/execution.py, checks, tests and loads it.

The policy is the language model's code_generation/{task}/_seed{N}/execution.py, or with
--reference the hand-written code_generation/{task}/reference_policy.py (how the shipped
seed-42 modules are built; a test checks that they are exactly this command's output).

Examples:
  python -m scripts.combine --task gnomish --seed 42
  python -m scripts.combine --task gnomish --seed 42 --reference --force   # rebuild the shipped reference
"""
from __future__ import annotations

import argparse
import logging
import sys

from code_generation.combine import CombineError, CombineInputError, combine
from code_generation.isolation import IsolationUnavailable
from code_generation.loader import MetaPolicyError
from common.cli import FAILED, USAGE, ScriptParser, error
from common.skill_files import add_skills_flag
from common.vocabulary import ALL_TASKS


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.combine", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=ALL_TASKS, help="task whose policy is combined")
    p.add_argument("--seed", type=int, default=42,
                   help="run number of scripts.generate_code (_seed{N}); the module is written to seed{N}")
    p.add_argument("--reference", action="store_true",
                   help="combine the hand-written reference policy ({prompt_dir}/{task}/reference_policy.py) "
                        "instead of generated code; the module's header says it is hand-written")
    p.add_argument("--gen_dir", default="code_generation",
                   help="root of the generation outputs ({gen_dir}/{task}/_seed{N}/execution.py); "
                        "unused with --reference")
    p.add_argument("--out_root", default="rl_baseline/meta_policies",
                   help="root of the meta-policy modules ({out_root}/{task}/seed{N}/execution.py)")
    p.add_argument("--prompt_dir", default=None, help="folder of the prompt files and parts (default: the package's)")
    p.add_argument("--force", action="store_true",
                   help="replace a different existing module, and write even if the unit test fails")
    p.add_argument("--skip_test", action="store_true", help="do not run the task's reference unit test")
    p.add_argument("--trust_generated_code", action="store_true",
                   help="run the module's unit test and its first calls in this process, unconfined (default: in a "
                        "bubblewrap sandbox with no network, no files of yours and an empty environment; "
                        "docs/reliability.md)")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = combine(args.task, args.seed, gen_dir=args.gen_dir, out_root=args.out_root, force=args.force,
                         prompt_dir=args.prompt_dir, run_test=not args.skip_test, reference=args.reference,
                         trust_generated_code=args.trust_generated_code)
    except (CombineInputError, IsolationUnavailable) as exc:  # a missing input or output; no sandbox here
        return error(exc, USAGE)
    except MetaPolicyError as exc:  # the written module is refused by the loader (names the file and why)
        return error(exc, USAGE)
    except CombineError as exc:  # the joined module fails its checks or its test (output kept)
        print(f"error: {exc}", file=sys.stderr)
        return FAILED
    state = "written" if result.written else "unchanged (identical module already there)"
    print(f"{result.path}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
