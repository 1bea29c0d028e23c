"""Serves a named local model (e.g. ``smollm2-135m``) or a GGUF file with llama.cpp's own OpenAI-compatible
server (``llama_cpp.server``), waits until it answers, prints its URL, and stops it cleanly on Ctrl-C or
SIGTERM (slurm's scancel and preemption).

    python -m scripts.serve_local_llm --model smollm2-135m --port 8000
    # then, in another shell:
    python -m scripts.annotate_pairs --backend openai --base_url http://127.0.0.1:8000/v1 --model smollm2-135m ...

The server needs llama-cpp-python with its server extra (requirements-local-llm.txt). ``--ready_file PATH``
writes the URL there once the model answers, for scripts that start the server in the background.
Exit status: 0 after a clean stop, 1 when the server does not come up (its log's end is printed), 2 for bad
input.
"""
from __future__ import annotations

import argparse
import logging
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from common.atomic_io import atomic_write_text
from common.cli import FAILED, USAGE, ScriptParser, error, tcp_port
from common.flag_checks import FlagError, output_file
from common.local_models import (
    LLAMA_CPP_INSTALL,
    LOCAL_MODELS,
    LocalModelError,
    llama_cpp_server_command,
    local_model_file,
    served_name,
)
from common.skill_files import add_skills_flag
from rl_baseline.baselines.oni.service import ServerError, server_url, wait_for_server

logger = logging.getLogger("serve_local_llm")


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _host_problem(host: str, port: int) -> str | None:
    """Why ``host`` cannot be served on (a name that does not resolve), or None."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        return f"cannot be resolved to an address ({exc})"
    return None


def build_parser() -> argparse.ArgumentParser:
    p = ScriptParser(prog="python -m scripts.serve_local_llm", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m",
                   help=f"a named local model ({', '.join(LOCAL_MODELS)}) or a .gguf path (default: %(default)s)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this machine only)")
    p.add_argument("--port", type=tcp_port, default=8000, help="port, 1 to 65535 (default: %(default)s)")
    p.add_argument("--n_ctx", type=_positive_int, default=8192,
                   help="context window in tokens, prompt and reply together (default: %(default)s)")
    p.add_argument("--n_threads", type=_positive_int, default=None,
                   help="CPU threads for generation (default: llama.cpp's choice, all cores)")
    p.add_argument("--timeout_s", type=float, default=300.0,
                   help="give up when the model does not answer within this many seconds (default: %(default)s)")
    p.add_argument("--log", default=None,
                   help="the server's own log file (default: train_dir/llm_server_PORT.log)")
    p.add_argument("--ready_file", default=None, help="write the server's URL here once it answers")
    add_skills_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    # the flags first, so that each mistake is named even where llama.cpp is not installed yet
    try:
        local_model_file(args.model)
    except LocalModelError as exc:
        return error(f"--model: {exc}", USAGE)
    log_path = Path(args.log or f"train_dir/llm_server_{args.port}.log")
    try:
        output_file("--log", log_path)
        if args.ready_file:
            output_file("--ready_file", args.ready_file)
    except FlagError as exc:
        return error(exc, USAGE)
    problem = _host_problem(args.host, args.port)
    if problem:
        return error(f"--host {args.host}: {problem}", USAGE)
    if _port_in_use(args.host, args.port):
        return error(f"--port {args.port}: something already listens on {args.host}:{args.port}; pick another port "
                     "or stop it", USAGE)
    try:
        import llama_cpp.server  # noqa: F401  # lazy: optional (llama-cpp-python); only to say what is missing before starting a process
    except ImportError as exc:
        return error(f"llama.cpp's server is not installed ({exc}): {LLAMA_CPP_INSTALL}", USAGE)
    cmd = llama_cpp_server_command(args.model, args.host, args.port, args.n_ctx, args.n_threads)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    url = server_url(args.host, args.port)
    name = served_name(args.model)
    logger.info("starting: %s (log: %s)", " ".join(cmd), log_path)
    with open(log_path, "ab") as log:
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    stopping = {"signal": None}

    def _stop(signum: int, _frame: object) -> None:
        stopping["signal"] = signum

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        try:
            wait_for_server(url, name, args.timeout_s, poll_s=0.5,
                            alive=lambda: server.poll() is None and stopping["signal"] is None)
        except ServerError as exc:
            if stopping["signal"] is not None:
                logger.info("stopped before the server answered")
                return 0
            tail = log_path.read_text(errors="replace")[-3000:]
            return error(exc, FAILED, detail=f"--- end of {log_path} ---\n{tail}")
        print(f"ready: {url} serves {name} (clients: --backend openai --base_url {url} --model {name}); "
              "Ctrl-C stops it", flush=True)
        if args.ready_file:
            atomic_write_text(args.ready_file, url + "\n")
        while stopping["signal"] is None and server.poll() is None:
            time.sleep(0.2)
        if server.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            return error(f"the server exited by itself (status {server.returncode})", FAILED,
                         detail=f"--- end of {log_path} ---\n{tail}")
        logger.info("stopping the server (signal %s)", stopping["signal"])
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if args.ready_file:
            Path(args.ready_file).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
