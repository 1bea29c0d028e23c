"""What online annotation (ONI) costs training: env steps/s with ``--llm_reward_type online_cls`` against
``--llm_reward_type none``, in one run.

Both runs train the same policy on ``NetHackScoreExtendedActions-v1`` (2 rollout workers,
``--num_envs_per_worker`` envs each, batch 512, rollout 32, CPU), alternated ``--repeats`` times; the
online run talks to the project's rule-based stand-in server on 127.0.0.1, which answers at once,
so what is measured is the annotation machinery itself: the spools, the label tailing, the annotator
process and its HTTP round trips. The goal is at most 10% fewer env steps/s.

Ends with one JSON line (``oni_overhead``: 1 - online/none, ``fps_online``, ``fps_none``, labels).

    python -m bench.oni_overhead --steps 40000 --repeats 2
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.fixtures import free_port, machine_description
from bench.train_throughput import FPS_RE

REPO = Path(__file__).resolve().parents[1]
MODEL = "stand-in"


def run(kind: str, port: int, args: argparse.Namespace, workdir: Path, label: str) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "scripts.main", "--root_env", "NetHackScoreExtendedActions-v1",
           "--num_workers", "2", "--num_envs_per_worker", str(args.num_envs_per_worker), "--batch_size", "512",
           "--rollout", "32", "--device", "cpu", "--train_for_env_steps", str(args.steps), "--seed", "1",
           "--train_dir", str(workdir), "--experiment", label, "--restart_behavior", "overwrite",
           "--save_every_sec", "100000", "--extrinsic_reward_coeff", "0.1"]
    if kind == "none":
        cmd += ["--llm_reward_type", "none", "--llm_reward_coeff", "0"]
    else:
        cmd += ["--llm_reward_type", "online_cls", "--llm_reward_coeff", "0.4", "--llm_model", MODEL,
                "--llm_server_addr", "127.0.0.1", "--llm_server_port", str(port), "--llm_server_wait_s", "30"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        sys.stderr.write(text[-4000:])
        raise SystemExit(f"{label}: training failed with status {out.returncode}")
    fps = [float(x) for x in FPS_RE.findall(text) if x != "nan"][args.warmup_reports:]
    labels = 0
    stats = workdir / label / "oni" / "stats.json"
    if stats.is_file():
        labels = int(json.loads(stats.read_text()).get("labels", 0))
    return (float(np.mean(fps)) if fps else float("nan")), labels


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40_000, help="env steps per run (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=2, help="runs of each kind, alternated (default: %(default)s)")
    p.add_argument("--num_envs_per_worker", type=int, default=8, help="envs per rollout worker (default: %(default)s)")
    p.add_argument("--warmup_reports", type=int, default=2, help="10-second FPS reports skipped (default: %(default)s)")
    return p


def main() -> None:
    p = build_parser()
    args = p.parse_args()
    if args.steps < 5000 or args.repeats < 1:
        p.error("--steps must be at least 5000 and --repeats at least 1")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "scripts.serve_stand_in_llm", "--port", str(port), "--model", MODEL],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rates: dict[str, list[float]] = {"none": [], "online_cls": []}
    labels = 0
    try:
        time.sleep(1.0)
        with tempfile.TemporaryDirectory(prefix="bench_oni_") as tmp:
            for rep in range(args.repeats):
                for kind in ("none", "online_cls"):
                    print(f"{kind}: training {args.steps} env steps ...", flush=True)
                    fps, n = run(kind, port, args, Path(tmp), f"{kind}_{rep}")
                    rates[kind].append(fps)
                    labels = max(labels, n)
    finally:
        server.kill()
        server.wait()
    none, online = (float(np.median(rates[k])) for k in ("none", "online_cls"))
    machine = machine_description()
    print(f"\nmachine: {machine}; {args.num_envs_per_worker} envs x 2 workers, batch 512, rollout 32, CPU")
    print("| reward | env steps/s (each run) | median |")
    print("|---|---|---|")
    for kind, values in rates.items():
        print(f"| {kind} | {', '.join(f'{v:,.0f}' for v in values)} | {np.median(values):,.0f} |")
    overhead = 1.0 - online / none
    print(f"online annotation costs {100 * overhead:.1f}% of env steps/s ({labels} messages labelled per run)")
    print(json.dumps({"machine": machine, "fps_none": round(none, 1), "fps_online": round(online, 1),
                      "oni_overhead": round(overhead, 4), "labels": labels, "steps": args.steps,
                      "repeats": args.repeats}))


if __name__ == "__main__":
    main()
