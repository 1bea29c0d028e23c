"""Training throughput of ``python -m scripts.main``: intrinsic reward on vs off, next to raw NLE.

Runs three measurements on this machine and prints env steps per second:

1. raw NLE stepping (the Monk env, random actions, one process);
2. ``scripts.main`` with 2 workers, the CDGPT5 model and the five skill reward models on;
3. the same run with ``--llm_reward 0`` (no reward model is consulted).

For 2-3 the rate is sample-factory's 10-second FPS reports after a warm-up, averaged
(sustained rate, start-up excluded). The ratio (2)/(3) is the cost of the intrinsic
reward (target >= 0.9).

Usage: ``python -m bench.train_throughput [--steps 20000] [--reward_dirs "[...]"]``.
Without ``--reward_dirs`` tiny reward models are trained on a synthetic dataset first.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FPS_RE = re.compile(r"Fps is \(10 sec: ([0-9.nan]+)")


def raw_nle_rate(steps: int) -> float:
    from rl_baseline.sf.env import make_base_env

    env = make_base_env(max_episode_steps=10_000)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    n = env.action_space.n
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(int(rng.integers(n)))
        if term or trunc:
            env.reset()
    rate = steps / (time.perf_counter() - t0)
    env.close()
    return rate


def tiny_reward_dirs(root: Path) -> list[str]:
    """Five tiny reward models trained briefly on a synthetic message dataset."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.test_training import build_tiny_reward_dirs

    return build_tiny_reward_dirs(root)


def training_rate(reward_dirs: list[str], llm_reward: float, steps: int, warmup_reports: int, workdir: Path,
                  device: str) -> tuple[float, int]:
    exp = f"bench_llm{llm_reward}"
    cmd = [
        sys.executable, "-m", "scripts.main", "--num_workers", "2", "--num_envs_per_worker", "8",
        "--batch_size", "1024", "--rollout", "32", "--train_for_env_steps", str(steps), "--device", device,
        "--train_dir", str(workdir), "--experiment", exp, "--restart_behavior", "overwrite",
        "--reward_dir", repr(reward_dirs), "--llm_reward", str(llm_reward), "--extrinsic_reward", "0.1",
        "--max_episode_steps", "2000", "--save_every_sec", "100000", "--experiment_summaries_interval", "1000",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"training run failed ({' '.join(cmd)})")
    fps = [float(x) for x in FPS_RE.findall(proc.stdout + proc.stderr) if x != "nan"]
    sustained = fps[warmup_reports:] or fps
    return (float(np.mean(sustained)) if sustained else float("nan")), len(sustained)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20_000, help="env steps per training run")
    p.add_argument("--raw_steps", type=int, default=20_000, help="env steps of the raw NLE measurement")
    p.add_argument("--warmup_reports", type=int, default=2, help="10-second FPS reports skipped as warm-up")
    p.add_argument("--reward_dirs", type=str, default=None, help="five reward directories as a list literal")
    p.add_argument("--device", type=str, default="cpu", help="learner device (cpu or gpu)")
    args = p.parse_args()

    from rl_baseline.intrinsic_reward import parse_reward_dirs

    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        tmp_path = Path(tmp)
        dirs = parse_reward_dirs(args.reward_dirs) if args.reward_dirs else tiny_reward_dirs(tmp_path / "rewards")
        raw = raw_nle_rate(args.raw_steps)
        print(f"raw NLE stepping (Monk env, random actions): {raw:,.0f} steps/s")
        on, n_on = training_rate(dirs, 0.1, args.steps, args.warmup_reports, tmp_path / "runs", args.device)
        print(f"scripts.main, 2 workers, CDGPT5, reward models on:  {on:,.0f} env steps/s ({n_on} reports)")
        off, n_off = training_rate(dirs, 0.0, args.steps, args.warmup_reports, tmp_path / "runs", args.device)
        print(f"scripts.main, 2 workers, CDGPT5, --llm_reward 0:    {off:,.0f} env steps/s ({n_off} reports)")
        print(f"ratio reward on / off: {on / off:.3f} (target >= 0.9)")
        print(f"training / raw NLE: {on / raw:.4f}")


if __name__ == "__main__":
    main()
