"""What stepping the games in three rounds (every game's NetHack move, then every game's bookkeeping, then the
decisions: rl_baseline.skills.skill_games) saves against one round (each game's move and bookkeeping back to back,
as before), paired: the two orders alternate in one process on the same 16 games. Both orders compute the same
(tests/test_skill_games.py); only the order of the work differs. Usage, from the repository root:
python docs/records/env_06x_2026-12-02/paired_rounds.py [in]"""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.getcwd())
os.sched_setaffinity(0, {1})
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)
from bench.env_throughput import _measure_together, _skill_games  # noqa: E402
from rl_baseline.skills import skill_games  # noqa: E402

THREE_ROUNDS = skill_games.SkillGames.step


def one_round(self, actions):
    """SkillGames.step with each game's move followed at once by its bookkeeping (the order before)."""
    results = [None] * self.num_agents
    waiting, requests = [], []
    for i, (game, action) in enumerate(zip(self.games, actions)):
        parts = game.step_parts(action, None, pause_after_game=True)
        next(parts)
        try:
            requests.append(next(parts))
            waiting.append((i, parts))
        except StopIteration as end:
            results[i] = end.value
    for (i, parts), decided in zip(waiting, skill_games.decide_together(requests)):
        try:
            parts.send(decided)
        except StopIteration as end:
            results[i] = end.value
    out = [], [], [], [], []
    for game, (o, reward, term, trunc, info) in zip(self.games, results):
        if term or trunc:
            o, info["reset_info"] = game.reset()
        for column, value in zip(out, (o, reward, term, trunc, info)):
            column.append(value)
    return out


env = _skill_games(Path(tempfile.mkdtemp()), 10000, 16, trust_generated_code=sys.argv[1:] == ["in"])
_measure_together(env, 4000, 99)
three, one = [], []
for repeat in range(7):
    skill_games.SkillGames.step = THREE_ROUNDS
    three.append(1e6 / _measure_together(env, 8000, repeat))
    skill_games.SkillGames.step = one_round
    one.append(1e6 / _measure_together(env, 8000, repeat))
saved = np.array(one) - np.array(three)
print(f"three rounds save {np.median(saved):.1f} us a game step, {np.median(saved / np.array(one)):.1%} of one "
      f"round's {np.median(one):.1f} us (paired differences {np.round(saved, 1).tolist()})", flush=True)
