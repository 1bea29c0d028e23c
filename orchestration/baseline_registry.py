"""The registry of the baselines' phase providers, below the modules that fill it
(:mod:`orchestration.baselines_llm`, :mod:`orchestration.baselines_rl`) and the one that reads it
(:mod:`orchestration.baselines`), and what a baseline's phases share: their folder and the GPUs a
phase's job asks for.

A provider is a function ``(cfg: PipelineConfig) -> list[Phase]`` registered under a name with
:func:`register`.
"""
from __future__ import annotations

from typing import Callable

from orchestration.phases import Phase, PipelineConfig, flag_value

Provider = Callable[[PipelineConfig], list[Phase]]

#: name -> (provider, one-line description shown by --help and the plan)
PROVIDERS: dict[str, tuple[Provider, str]] = {}
BASELINES_DIR = "baselines"


def register(name: str, description: str) -> Callable[[Provider], Provider]:
    def add(fn: Provider) -> Provider:
        if name in PROVIDERS:
            raise ValueError(f"baseline {name!r} registered twice")
        PROVIDERS[name] = (fn, description)
        return fn

    return add


def baseline_gpus(phase: Phase) -> int:
    """GPUs a baseline phase's job asks for (and its cost counts): vLLM annotation its tensor-parallel size,
    training and evaluation on ``--device gpu`` one, reward training one unless ``--device cpu`` (as the skills'
    reward jobs), data and cost none. Here so that the slurm jobs (:mod:`orchestration.slurm`) and the
    baselines' cost phase agree on what a GPU hour is."""
    if phase.stage == "baseline_annotate":
        return int(flag_value(phase, "--num-gpus", "--num_gpus") or 1) if flag_value(phase, "--backend") == "vllm" else 0
    if phase.stage in ("baseline_train", "baseline_eval"):
        return 1 if flag_value(phase, "--device") == "gpu" else 0
    if phase.stage == "baseline_reward":  # scripts.train_reward's --device auto takes the GPU when there is one
        return 0 if flag_value(phase, "--device") == "cpu" else 1
    return 0
