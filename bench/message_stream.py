"""What the skill rewards read: the message stream of the skill environment and the reward of a descent.

Plays seeded episodes through the skill environment of training, with the actions of the dataset
collection's explorer (it walks to known staircases and takes them; ``--policy random``: uniformly random
actions, prayer left out) (exploration policy over skills, the reward models of ``--reward_dir``) and reports:

* the share of steps whose observed message is empty, and a wall message ("It's a wall." /
  "It's solid stone.");
* for every walk down the stairs (the depth grew and NetHack said "You descend the stairs."): the
  message the step observed, and the skill reward paid on that step and on the next one (the
  release's timing pays the descent's observation one step later).

It uses only interfaces that older checkouts have too (``build_skill_env``, ``SkillEnvConfig``), so the
same file measures an older commit on the same games::

    python -m bench.message_stream --reward_dir "[...]" --episodes 20
    git worktree add /tmp/before ef56736
    PYTHONPATH=/tmp/before python bench/message_stream.py --reward_dir "[...]" --episodes 20

Ends with one JSON line.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import random

import numpy as np

from common.nethack.messages import decode_message
from common.vocabulary import NUM_SKILLS
from rl_baseline.collect.config import ExplorerConfig
from rl_baseline.sf.cfg import DEFAULT_QUANTILES, SkillEnvConfig, parse_quantiles, parse_reward_dirs

WALL_MESSAGES = ("It's a wall.", "It's solid stone.")
DESCENT = "You descend the stairs."


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reward_dir", default="[]", help="reward model directories in skill order (list literal); "
                                                          "none: no skill reward, messages only")
    parser.add_argument("--episodes", type=int, default=20, help="episodes to play")
    parser.add_argument("--max_episode_steps", type=int, default=1000, help="episode step limit")
    parser.add_argument("--seed", type=int, default=0, help="seed of the games and the actions")
    parser.add_argument("--skill_reward_timing", default=None,
                        help="release or after_action (default: the checkout's default; older checkouts have none)")
    parser.add_argument("--policy", choices=("explorer", "random"), default="explorer",
                        help="who acts: the dataset collection's explorer, or uniformly random actions without prayer")
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()

    from common.nethack.actions import ACTION_NAMES  # lazy: pulls in NLE; --help stays light
    from rl_baseline.collect.explorer import ExplorerPolicy  # lazy: pulls in NLE
    from rl_baseline.sf.env import build_skill_env  # lazy: pulls in NLE and torch

    dirs = parse_reward_dirs(args.reward_dir)
    config = SkillEnvConfig(max_episode_steps=args.max_episode_steps, reward_dirs=tuple(dirs),
                            quantiles=tuple(parse_quantiles(DEFAULT_QUANTILES, NUM_SKILLS)) if dirs else (),
                            llm_reward=0.1 if dirs else 0.0)
    if args.skill_reward_timing is not None:
        config = dataclasses.replace(config, reward_timing=args.skill_reward_timing)
    actions = [i for i, name in enumerate(ACTION_NAMES) if name != "pray"]
    env = build_skill_env(config)
    steps = empty = wall = 0
    descent_messages: collections.Counter = collections.Counter()
    on_step, next_step, descent_skills = [], [], collections.Counter()
    try:
        for k in range(args.episodes):
            rng = np.random.default_rng([args.seed, k])
            random.seed(args.seed * 100_003 + k)  # the training policy's per-episode draws (depth, Mines)
            explorer = ExplorerPolicy(rng, ExplorerConfig()) if args.policy == "explorer" else None
            _, info = env.reset(seed=args.seed * 100_003 + k)
            depth, pending, done = info.get("depth", 1), False, False
            while not done:
                action = explorer.act(env.last_obs) if explorer is not None else rng.choice(actions)
                obs, _, terminated, truncated, info = env.step(int(action))
                done = terminated or truncated
                steps += 1
                text = decode_message(obs["message"])
                empty += not text
                wall += text in WALL_MESSAGES
                if pending:
                    next_step.append(float(info.get("intrinsic_reward", 0.0)))
                    pending = False
                if info.get("depth", 0) > depth and DESCENT in info.get("messages", ()):
                    descent_messages[text] += 1
                    on_step.append(float(info.get("intrinsic_reward", 0.0)))
                    descent_skills[info.get("skill", "?")] += 1
                    pending = not done
                if info.get("depth", 0) > 0:
                    depth = info["depth"]
    finally:
        env.close()
    result = {
        "policy": args.policy, "timing": getattr(config, "reward_timing", "after_action (older checkout)"),
        "episodes": args.episodes, "steps": steps, "empty_message_share": empty / max(steps, 1),
        "wall_message_share": wall / max(steps, 1), "descents": len(on_step),
        "descent_step_messages": dict(descent_messages),
        "skill_reward_on_descent_step": float(np.mean(on_step)) if on_step else None,
        "skill_reward_on_step_after_descent": float(np.mean(next_step)) if next_step else None,
        "skill_chosen_on_arrival": dict(descent_skills),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
