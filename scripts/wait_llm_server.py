"""Waits until an OpenAI-compatible LLM server serves a model (``GET /v1/models``), for launch scripts
and slurm jobs; exits 1 with the reason when the time runs out or the server's process dies.

Example: python -m scripts.wait_llm_server --addr localhost --port 9001 --model Meta-Llama-3.1-8B-Instruct --pid 1234
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from common.cli import ScriptParser, positive_seconds, tcp_port
from common.skill_files import add_skills_flag
from rl_baseline.baselines.oni.service import DEFAULT_PORT, ServerError, server_url, wait_for_server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a dead child not yet reaped is a zombie: gone as far as serving goes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return True


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    p = ScriptParser(prog="python -m scripts.wait_llm_server", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default="localhost", help="server host (or a URL)")
    p.add_argument("--port", type=tcp_port, default=DEFAULT_PORT, help="server port (default: %(default)s)")
    p.add_argument("--model", required=True, help="the model name the server must list")
    p.add_argument("--timeout_s", type=positive_seconds, default=1800.0, help="give up after this long (default: %(default)s)")
    p.add_argument("--pid", type=int, default=None, help="the server's process: stop waiting when it dies")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    url = server_url(args.addr, args.port)
    try:
        wait_for_server(url, args.model, args.timeout_s, alive=(lambda: _alive(args.pid)) if args.pid else None)
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"ready: {url} serves {args.model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
