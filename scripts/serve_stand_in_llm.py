"""Serves a RULE-BASED STAND-IN for the LLM (OpenAI-compatible HTTP on 127.0.0.1), for CPU runs of
online rewards (ONI) without a GPU: ``--llm_server_addr 127.0.0.1 --llm_model stand-in``.

Example: python -m scripts.serve_stand_in_llm --port 9001
"""
from __future__ import annotations

import sys
from typing import Optional, Sequence

from common.cli import error, one_line_errors
from common.flag_checks import FlagError, output_file
from common.skill_files import add_skills_flag
from rl_baseline.baselines.oni.stand_in_server import build_parser, serve


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    parser.prog = "python -m scripts.serve_stand_in_llm"
    add_skills_flag(parser)
    args = one_line_errors(parser).parse_args(argv)
    try:
        if args.log:
            output_file("--log", args.log)  # before serving: the first answer would find it unwritable
    except FlagError as exc:
        return error(exc)
    serve(args.port, args.model, args.mode, args.delay, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
