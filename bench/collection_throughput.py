"""Collection speed of ``scripts.collect_dataset`` on this machine.

For each policy (random, explorer) and worker count (1, 2 by default) it collects a
small dataset with the default sampling settings and prints game steps per second,
kept samples per second, and the speed-up of more workers over one. Time includes
process start-up, so short runs understate the steady rate.

Usage: ``python -m bench.collection_throughput [--pairs 300] [--workers 1,2] [--policies random,explorer]``.
"""
from __future__ import annotations

import argparse
import time

from rl_baseline.collect.config import CollectConfig
from rl_baseline.collect.rollouts import collect_dataset


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    p = argparse.ArgumentParser(description="Measure collection throughput (steps/s, samples/s).")
    p.add_argument("--pairs", type=int, default=300, help="pairs collected per measurement (default: %(default)s)")
    p.add_argument("--workers", default="1,2", help="comma-separated worker counts (default: %(default)s)")
    p.add_argument("--policies", default="random,explorer", help="comma-separated policies (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="collection seed (default: %(default)s)")
    return p


def main() -> None:
    p = build_parser()
    args = p.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    rows = []
    for policy in args.policies.split(","):
        base = None
        for n in workers:
            config = CollectConfig(skill="discoverer", num_pairs=args.pairs, policy_mix={policy: 1.0},
                                   seed=args.seed, num_workers=n, progress=False)
            start = time.perf_counter()
            ds = collect_dataset(config)
            seconds = time.perf_counter() - start
            steps, samples = ds.meta["steps"], len(ds)
            base = base or samples / seconds
            rows.append((policy, n, seconds, steps / seconds, samples / seconds, samples / seconds / base,
                         ds.meta["episodes"], ds.meta["level_changes"]))
    print(f"{'policy':<10}{'workers':>8}{'seconds':>9}{'steps/s':>10}{'samples/s':>11}{'speed-up':>10}"
          f"{'episodes':>10}{'lvl chg':>9}")
    for r in rows:
        print(f"{r[0]:<10}{r[1]:>8}{r[2]:>9.1f}{r[3]:>10.0f}{r[4]:>11.1f}{r[5]:>10.2f}{r[6]:>10}{r[7]:>9}")


if __name__ == "__main__":
    main()
