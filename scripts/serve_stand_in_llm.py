"""Serves a RULE-BASED STAND-IN for the LLM (OpenAI-compatible HTTP on 127.0.0.1), for CPU runs of
online rewards (ONI) without a GPU: ``--llm_server_addr 127.0.0.1 --llm_model stand-in``.

Example: python -m scripts.serve_stand_in_llm --port 9001
"""
from __future__ import annotations

from common.cli import one_line_errors
from rl_baseline.baselines.oni.stand_in_server import build_parser, serve

if __name__ == "__main__":
    parser = build_parser()
    parser.prog = "python -m scripts.serve_stand_in_llm"
    args = one_line_errors(parser).parse_args()
    serve(args.port, args.model, args.mode, args.delay, args.log)
