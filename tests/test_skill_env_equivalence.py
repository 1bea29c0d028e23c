"""The skill environment's behaviour is pinned by a recorded trace.

A fixed seeded wizard-mode game with an altar and a ring wished for at the start of every fourth episode
(NLE's core/display seeds, Python's ``random`` for the training
policy's draws) is played with a fixed random action sequence through the full skill
environment: the Monk env, the exploration policy over skills, the intrinsic reward
(deterministic stand-in scorers, so the trace does not depend on float rounding in
torch), the skill runtime and the policy observation. Every step's observation arrays,
reward, skill, termination and skill statistics are hashed; the digests must equal those
recorded in ``tests/data/skill_env_trace.json``. Speed work on the environment must keep
this test green (same observations, rewards and skill choices).

Re-record only for an intended behaviour change (the command pins NetHack's calendar as the suite
does, see ``tests/game_calendar.py``)::

    python -m tests.test_skill_env_equivalence --write
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

TRACE = Path(__file__).resolve().parent / "data" / "skill_env_trace.json"
STEPS = 3000
CORE_SEED, DISP_SEED, ACTION_SEED = 12345, 678, 9


class MessageScorer:
    """A deterministic reward model: a fixed function of the message bytes and depth change."""

    def __init__(self, salt: int) -> None:
        self.weights = np.random.default_rng(salt).normal(size=256)

    def score(self, messages: np.ndarray, depth_change: np.ndarray) -> np.ndarray:
        msgs = np.asarray(messages, dtype=np.float64)
        return (np.tanh(msgs @ self.weights / 2000.0) + 0.5 * np.asarray(depth_change)).astype(np.float32)


def build_env():
    from common.vocabulary import SKILLS
    from rl_baseline.envs import make_monk_env
    from rl_baseline.skills import meta_policy
    from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache
    from rl_baseline.skills.runtime import SkillRuntime

    # threshold 0: about half the messages pay, so thresholding and the count division both show
    reward = IntrinsicReward([MessageScorer(i) for i in range(len(SKILLS))], [0.0] * len(SKILLS), beta=3.0,
                             llm_coef=0.1, extrinsic_coef=0.0, cache=ScoreCache())
    game = make_monk_env(max_episode_steps=600, wizard=True)
    return SkillRuntime(game, lambda: meta_policy.load("exploration", 42), reward)


def action_sampler(rng: np.random.Generator):
    """Random actions without prayer (an angry god ends the game within steps) and with many rests,
    so the discoverer's time budget runs out and the policy over skills moves on."""
    from common.nethack.actions import ACTION_NAMES, action_index

    allowed = [i for i, name in enumerate(ACTION_NAMES) if name != "pray"]
    wait = action_index("wait")

    def sample() -> int:
        return wait if rng.random() < 0.3 else int(allowed[rng.integers(len(allowed))])

    return sample


def _digest(*parts: object) -> str:
    h = hashlib.sha1()
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(str(part.dtype).encode())
            h.update(np.ascontiguousarray(part).tobytes())
        else:
            h.update(repr(part).encode())
    return h.hexdigest()[:16]


def record(steps: int = STEPS) -> list[str]:
    """One digest per step (and per reset) of everything the skill environment hands out."""
    env = build_env()
    try:
        random.seed(0)
        next_action = action_sampler(np.random.default_rng(ACTION_SEED))
        episode = 0

        def reset():
            # NLE seeds one game at a time: every episode gets its own fixed seeds
            env.env.seed(CORE_SEED + episode, DISP_SEED + episode, reseed=False)
            out = env.reset()
            if episode % 4 == 1:
                # an altar under the hero and an item to drop on it: the worshipper's start check
                # fires once the hero steps off the altar
                env.env.wizard_wish("altar")
                env.env.wizard_wish("uncursed ring of adornment")
            return out

        obs, info = reset()
        out = [_digest(*[obs[k] for k in sorted(obs)], info["skill"])]
        for _ in range(steps):
            obs, reward, terminated, truncated, info = env.step(next_action())
            extra = info.get("episode_extra_stats")
            parts = [*[obs[k] for k in sorted(obs)], float(reward), info["skill"], bool(terminated), bool(truncated)]
            if extra is not None:
                parts.append(sorted((k, round(float(v), 9)) for k, v in extra.items()))
            out.append(_digest(*parts))
            if terminated or truncated:
                episode += 1
                obs, info = reset()
                out.append(_digest(*[obs[k] for k in sorted(obs)], info["skill"]))
        return out
    finally:
        env.close()


@pytest.mark.game_calendar
def test_skill_env_matches_the_recorded_trace():
    expected = json.loads(TRACE.read_text())
    got = record(expected["steps"])
    first = next((i for i, (a, b) in enumerate(zip(got, expected["digests"])) if a != b), None)
    assert first is None and len(got) == len(expected["digests"]), (
        f"the skill environment's output differs from the recorded trace from entry {first} on "
        f"(of {len(expected['digests'])}); re-record only for an intended behaviour change"
    )


def main() -> None:
    from tests.game_calendar import is_pinned, rerun_pinned

    rerun_pinned()
    if not is_pinned():
        raise SystemExit("NetHack's calendar could not be pinned (no C compiler): the trace would depend on today's date")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"record the trace into {TRACE}")
    parser.add_argument("--steps", type=int, default=STEPS, help="env steps in the trace")
    args = parser.parse_args()
    digests = record(args.steps)
    if args.write:
        TRACE.parent.mkdir(parents=True, exist_ok=True)
        TRACE.write_text(json.dumps({"steps": args.steps, "digests": digests}, indent=0) + "\n")
        print(f"wrote {len(digests)} digests to {TRACE}")
    else:
        print(f"{len(digests)} digests; first {digests[:3]}")


if __name__ == "__main__":
    main()
