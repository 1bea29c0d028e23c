"""One learner step of skill training, timed in this process: sample-factory's ``Learner.train`` on a batch
of made-up experience, with this project's learner (:class:`rl_baseline.sf.learner.MaestroLearner`) and
network, fp32 against bf16 (``--precision``), alternated.

The batch is what the batcher hands the learner (``--batch_size`` samples in trajectories of ``--rollout``
steps, plus the step after each): random crops of printable characters, messages of 0 to 60 bytes, random
skills, rewards and actions. One step is ``Learner.train``: the values of the last steps, V-trace, the
losses, backward and the Adam update. The learner runs one thread, as in training (sample-factory's
``init_torch_runtime``).

Usage::

    python -m bench.learner_step [--repeats 5] [--batch_size 512] [--rollout 32] [--encoder_arch release]

It ends with one JSON line (``fp32_ms``, ``bf16_ms`` wall-time medians, ``fp32_cpu_ms``, ``bf16_cpu_ms`` CPU-time
medians, ``bf16_speedup`` and ``bf16_cpu_speedup``) for scripts to read; on a shared machine the CPU times are
the steadier figures. On a processor without bfloat16 instructions it times fp32 alone, says so in one line,
and its JSON line holds null for the bf16 figures and the reason as ``precision_note``.
:func:`build_learner` and :func:`synthetic_batch` are shared with the tests.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench.fixtures import machine_description
from common.precision import PrecisionError, runnable_precision


def build_learner(argv: Sequence[str], train_dir: str | Path) -> Any:
    """An initialised :class:`rl_baseline.sf.learner.MaestroLearner` for ``scripts.main``'s flags ``argv``
    (skill environment, on the CPU unless ``argv`` says otherwise), writing nothing until asked to save."""
    import torch  # lazy: the bench's --help stays light
    from sample_factory.algo.utils.model_sharing import ParameterServer  # lazy: as above
    from sample_factory.cfg.arguments import preprocess_cfg  # lazy: as above

    from rl_baseline.models.cdgpt5 import register_cdgpt5  # lazy: imports torch
    from rl_baseline.sf.cfg import check_machine, parse_cfg  # lazy: imports sample-factory
    from rl_baseline.sf.learner import MaestroLearner  # lazy: imports torch

    cfg = parse_cfg(["--device", "cpu", "--train_dir", str(train_dir), "--experiment", "learner_step",
                     "--restart_behavior", "overwrite", *argv])
    check_machine(cfg)  # a learner that runs here: a --precision bf16 this processor lacks is refused, not fp32
    register_cdgpt5()
    env_info = learner_env_info(cfg)
    if not preprocess_cfg(cfg, env_info):  # what the runner does before it starts the learner
        raise ValueError(f"sample-factory refuses the configuration {list(argv)}")
    versions = torch.zeros(1, dtype=torch.int32)
    learner = MaestroLearner(cfg, env_info, versions, 0, ParameterServer(0, versions, serial_mode=True))
    learner.init()
    return learner


def learner_env_info(cfg: Any) -> Any:
    """sample-factory's description of the skill environment's spaces for ``cfg`` (what its runner gets by
    building an environment)."""
    import gymnasium as gym  # lazy: the bench's --help stays light
    from sample_factory.algo.utils.env_info import EnvInfo  # lazy: as above

    from common.nethack.actions import ACTIONS  # lazy: imports NLE
    from rl_baseline.models.obs import model_observation_space  # lazy: imports NLE

    return EnvInfo(obs_space=model_observation_space(int(cfg.num_skills)),
                   action_space=gym.spaces.Discrete(len(ACTIONS)), num_agents=1, gpu_actions=False,
                   gpu_observations=False, action_splits=None, all_discrete=None, frameskip=1)


def synthetic_batch(learner: Any, seed: int = 0, reward_scale: float = 0.1) -> Any:
    """A batch as sample-factory's batcher gives it to ``learner.train`` (``--batch_size`` samples of
    ``--rollout`` steps, plus the step after each), made up: random crops and stats, messages of 0 to 60
    bytes, random skills and actions, rewards ``reward_scale`` times a standard normal, the behaviour
    policy's log-probabilities those of uniform logits, every step valid."""
    import torch  # lazy: the bench's --help stays light
    from sample_factory.algo.utils.tensor_dict import TensorDict  # lazy: as above
    from sample_factory.model.model_utils import get_rnn_size  # lazy: as above

    cfg = learner.cfg
    t = int(cfg.rollout)
    n = int(cfg.batch_size) // t
    skills = int(cfg.num_skills)
    actions = int(learner.env_info.action_space.n)
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 61, (n, t + 1), generator=g) * (torch.rand(n, t + 1, generator=g) < 0.5)
    message = torch.randint(32, 127, (n, t + 1, 256), generator=g, dtype=torch.uint8)
    message[torch.arange(256).expand(n, t + 1, 256) >= lengths.unsqueeze(-1)] = 0
    skill = torch.randint(0, skills, (n, t + 1), generator=g)
    obs = {
        "crop_chars": torch.randint(32, 127, (n, t + 1, 12, 12), generator=g, dtype=torch.uint8),
        "crop_colors": torch.randint(0, 16, (n, t + 1, 12, 12), generator=g, dtype=torch.uint8),
        "blstats": torch.randint(0, 30, (n, t + 1, 27), generator=g).float(),
        "message": message,
        "skill_onehot": torch.nn.functional.one_hot(skill, skills).float(),
        "skill_id": skill.float().unsqueeze(-1),
        "monk_features": torch.zeros(n, t + 1, 3),
    }
    # the dtypes of sample-factory's trajectory buffers (alloc_trajectory_tensors)
    return TensorDict({
        "obs": TensorDict(obs),
        "rnn_states": torch.zeros(n, t + 1, get_rnn_size(cfg)),
        "values": torch.zeros(n, t + 1),
        "valids": torch.ones(n, t + 1, dtype=torch.bool),
        "policy_id": torch.zeros(n, t, dtype=torch.int32),
        "policy_version": torch.zeros(n, t),
        "actions": torch.randint(0, actions, (n, t, 1), generator=g).float(),
        "log_prob_actions": torch.full((n, t), -float(np.log(actions))),
        "action_logits": torch.zeros(n, t, actions),
        "rewards": reward_scale * torch.randn(n, t, generator=g),
        "dones": torch.rand(n, t, generator=g) < 0.01,
        "time_outs": torch.zeros(n, t, dtype=torch.bool),
    })


def time_steps(learner: Any, repeats: int, seed: int = 0) -> list[tuple[float, float]]:
    """(wall ms, CPU ms) of ``repeats`` calls of ``learner.train`` on fresh synthetic batches. The CPU time (this
    process's, the learner running one thread) hardly depends on what else the machine runs; the wall time does."""
    out = []
    for i in range(repeats):
        batch = synthetic_batch(learner, seed=seed + i)
        t0, c0 = time.perf_counter(), time.process_time()
        learner.train(batch)
        out.append((1000 * (time.perf_counter() - t0), 1000 * (time.process_time() - c0)))
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="timed steps per precision, alternated (default %(default)s)")
    p.add_argument("--batch_size", type=int, default=512, help="samples per learner step (default %(default)s)")
    p.add_argument("--rollout", type=int, default=32, help="trajectory length (default %(default)s)")
    p.add_argument("--encoder_arch", type=str, default="release", choices=("project", "release"),
                   help="policy network (default %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (training's learner uses 1)")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    p = build_parser()
    args = p.parse_args(argv)
    if args.repeats < 1 or args.batch_size < args.rollout or args.rollout < 2:
        p.error("--repeats must be at least 1, --rollout at least 2 and --batch_size at least --rollout")
    import torch  # lazy: --help stays light

    torch.set_num_threads(args.threads)
    flags = ["--batch_size", str(args.batch_size), "--rollout", str(args.rollout), "--encoder_arch",
             args.encoder_arch]
    try:
        _, note = runnable_precision("bf16", "cpu")  # no bfloat16 here: fp32 alone, not a refusal
    except PrecisionError as exc:  # MAESTROMOTIF_CPUINFO names a file that cannot be read
        p.error(str(exc))
    if note:
        print(f"note: {note}", flush=True)
    times: dict[str, list[tuple[float, float]]] = {"fp32": []} if note else {"fp32": [], "bf16": []}
    with tempfile.TemporaryDirectory(prefix="bench_learner_") as tmp:
        learners = {p: build_learner(flags + ["--precision", p], tmp) for p in times}
        for precision, learner in learners.items():
            time_steps(learner, 1)  # warm-up (oneDNN picks its kernels)
        for rep in range(args.repeats):  # alternated, so a change of machine load hits both
            for precision, learner in learners.items():
                times[precision] += time_steps(learner, 1, seed=rep + 1)
    wall = {k: float(np.median([w for w, _ in v])) for k, v in times.items()}
    cpu = {k: float(np.median([c for _, c in v])) for k, v in times.items()}
    print(f"machine: {machine_description()}; {args.encoder_arch} network, batch {args.batch_size}, rollout "
          f"{args.rollout}, {args.threads} thread(s)")
    for k, v in times.items():
        print(f"{k}: median {wall[k]:.0f} ms wall, {cpu[k]:.0f} ms CPU per learner step (wall/CPU: "
              f"{', '.join(f'{w:.0f}/{c:.0f}' for w, c in v)})")
    figures = {"machine": machine_description(), "encoder_arch": args.encoder_arch,
               "batch_size": args.batch_size, "rollout": args.rollout, "threads": args.threads,
               "fp32_ms": round(wall["fp32"], 1), "bf16_ms": None, "fp32_cpu_ms": round(cpu["fp32"], 1),
               "bf16_cpu_ms": None, "bf16_speedup": None, "bf16_cpu_speedup": None, "precision_note": note}
    if "bf16" in times:
        print(f"bf16 / fp32 speed-up: x{wall['fp32'] / wall['bf16']:.2f} wall, x{cpu['fp32'] / cpu['bf16']:.2f} CPU")
        figures.update(bf16_ms=round(wall["bf16"], 1), bf16_cpu_ms=round(cpu["bf16"], 1),
                       bf16_speedup=round(wall["fp32"] / wall["bf16"], 3),
                       bf16_cpu_speedup=round(cpu["fp32"] / cpu["bf16"], 3))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
