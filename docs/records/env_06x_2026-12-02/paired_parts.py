"""What each part of the skill environment costs a game step, 16 games stepped together, paired: each part is
switched off and on in turn in one process, on the same games (a measuring script only: switching a part off
changes what the environment computes). Usage, from the repository root:
python docs/records/env_06x_2026-12-02/paired_parts.py [in]"""
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
from code_generation.isolation import Reply  # noqa: E402
from rl_baseline.skills import intrinsic_reward, meta_policy, runtime  # noqa: E402
from rl_baseline.tasks import skill_measures  # noqa: E402


class _NoHost:
    def request_many(self, batch):
        return [Reply([None], []) for _ in batch]


class _NoDecision:  # the policy over skills' calls left out: no skill ever ends
    host = _NoHost()
    sent: list = []
    policy = type("P", (), {"handle": 0})()

    def run(self):
        return (False, False), False, None

    def finish(self, reply):
        return (False, False), False, None


PARTS = {
    "skill measures": (skill_measures.SkillMeasures, "update", lambda self, *a, **k: None),
    "policy observation's view": (runtime._ModelObservation, "_write_view", lambda self, o, s, n: None),
    "reward models (the intrinsic reward)": (intrinsic_reward.IntrinsicReward, "intrinsic", lambda self, *a: 0.0),
    "policy over skills' calls (request, sandbox, reply)": (meta_policy.MetaPolicy, "decision_request",
                                                             lambda self, *a: _NoDecision()),
}
env = _skill_games(Path(tempfile.mkdtemp()), 10000, 16, trust_generated_code=sys.argv[1:] == ["in"])
_measure_together(env, 4000, 99)
for name, (owner, attribute, off) in PARTS.items():
    on = getattr(owner, attribute)
    with_part, without = [], []
    for repeat in range(5):
        setattr(owner, attribute, on)
        with_part.append(1e6 / _measure_together(env, 8000, repeat))
        setattr(owner, attribute, off)
        without.append(1e6 / _measure_together(env, 8000, repeat))
    setattr(owner, attribute, on)
    costs = np.array(with_part) - np.array(without)
    print(f"{name}: {np.median(costs):.1f} us a game step (paired differences {np.round(costs, 1).tolist()}; "
          f"the whole step {np.median(with_part):.1f} us)", flush=True)
