"""What NLE's observation arrays cost: raw NLE's 16 games in turn (NetHackScore-v0, random actions) with the Monk
environment's arrays, with training's (rl_baseline.envs.TRAINING_OBSERVATION_KEYS), and with each of three more
left out. Usage, from the repository root: python docs/records/env_06x_2026-12-02/nle_arrays.py"""
import os
import sys
import warnings

warnings.filterwarnings("ignore")  # NLE warns at every env that asks for "internal"
sys.path.insert(0, os.getcwd())
os.sched_setaffinity(0, {1})
import gymnasium as gym  # noqa: E402
import nle  # noqa: E402,F401
import numpy as np  # noqa: E402

from bench.env_throughput import _measure_games  # noqa: E402
from rl_baseline.envs import OBSERVATION_KEYS, TRAINING_OBSERVATION_KEYS  # noqa: E402

NLE_OWN = ("program_state", "internal")  # the Monk environment asks for both
SETS = {
    "the Monk environment's arrays (evaluations)": OBSERVATION_KEYS + NLE_OWN,
    "training's arrays": TRAINING_OBSERVATION_KEYS + NLE_OWN,
    "training's without inv_strs": tuple(k for k in TRAINING_OBSERVATION_KEYS if k != "inv_strs") + NLE_OWN,
    "training's without glyphs": tuple(k for k in TRAINING_OBSERVATION_KEYS if k != "glyphs") + NLE_OWN,
    "training's without tty_chars": tuple(k for k in TRAINING_OBSERVATION_KEYS if k != "tty_chars") + NLE_OWN,
}
games = {name: [gym.make("NetHackScore-v0", observation_keys=keys) for _ in range(16)] for name, keys in SETS.items()}
times: dict = {name: [] for name in SETS}
for repeat in range(3):
    for name, envs in games.items():
        times[name].append(1e6 / _measure_games(envs, 16000, repeat))
for name in SETS:
    print(f"{name}: {np.median(times[name]):.1f} us a game step (repeats {np.round(times[name], 1).tolist()})")
