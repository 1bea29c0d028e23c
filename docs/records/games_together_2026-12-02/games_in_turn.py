"""16 skill environments stepped in turn, each its own round trip (the layout before --games_per_env), against raw
NLE's 16 games in turn; run with the tree to measure on sys.path (argv[1])."""
import sys, os, time, tempfile, json
sys.path.insert(0, sys.argv[1])
os.sched_setaffinity(0, {1})
import torch; torch.set_num_threads(1)
from pathlib import Path
import numpy as np
import gymnasium as gym, nle
from bench.env_throughput import _skill_env
G = 16
def in_turn(envs, steps, seed):
    rng = np.random.default_rng(seed); n = envs[0].action_space.n
    for i, e in enumerate(envs): e.reset(seed=seed * G + i)
    rounds = steps // G
    t = time.perf_counter()
    for _ in range(rounds):
        for e in envs:
            _, _, te, tr, _ = e.step(int(rng.integers(n)))
            if te or tr: e.reset()
    return rounds * G / (time.perf_counter() - t)
tmp = Path(tempfile.mkdtemp())
raws = [gym.make("NetHackScore-v0") for _ in range(G)]
skills = [_skill_env(tmp, 10000) for _ in range(G)]
r, s = [], []
for rep in range(3):
    r.append(in_turn(raws, 16000, rep)); s.append(in_turn(skills, 16000, rep))
print(json.dumps({"tree": sys.argv[1], "raw_nle_games": round(float(np.median(r)), 1), "skill_env_games_apart": round(float(np.median(s)), 1), "ratio": round(float(np.median(s) / np.median(r)), 3)}))
