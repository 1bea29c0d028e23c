"""What an agreement run is asked to do: the flags that apply (:class:`AnnotatorSettings` for the
annotator backend, :class:`AgreementConfig` for the rest), their valid values, the error every
bad input raises (:class:`AgreementError`) and :func:`check_config`, the checks that need nothing
loaded."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from common.flag_checks import output_folder
from common.llm import BACKENDS, DEFAULT_MODEL, served_instead
from common.vocabulary import SKILLS

COLLECT_MODES: tuple[str, ...] = ("skill", "exploration")
PAIR_SAMPLINGS: tuple[str, ...] = ("uniform", "collector")
#: backends that are language models (the others are stand-ins: rules or coin flips)
LLM_BACKENDS: tuple[str, ...] = ("vllm", "openai", "hf", "transformers", "hf-local", "llamacpp")
OUT_DIRNAME = "reward_agreement"


class AgreementError(ValueError):
    """Bad input for the agreement run; the message names the flag or file."""


@dataclass
class AnnotatorSettings:
    """How the pairs are labelled: the flags of ``scripts.annotate_pairs`` that apply here."""

    backend: str = "heuristic"
    model: Optional[str] = None  # None: the annotation default (common.llm.DEFAULT_MODEL)
    base_url: Optional[str] = None
    num_gpus: int = 1
    temperature: float = 0.1
    top_p: float = 0.95
    top_k: int = 50
    max_tokens: int = 512
    prompt: Optional[str] = None
    batch_size: int = 64
    concurrency: int = 16
    timeout: float = 120.0
    max_retries: int = 5
    device_map: Optional[str] = None
    log_conversations: bool = True


@dataclass
class AgreementConfig:
    """One agreement run (see the module docstring)."""

    skill: str
    policy_dir: str
    annotator: AnnotatorSettings = field(default_factory=AnnotatorSettings)
    collect_mode: str = "skill"
    episodes: int = 10
    max_steps: Optional[int] = None  # per episode; None: the experiment's --max_episode_steps
    num_envs: int = 4
    num_pairs: int = 500
    pair_sampling: str = "uniform"
    seed: int = 0
    reward_dir: Optional[str] = None  # None: the experiment's reward dir of the skill
    relabel_offline: bool = False
    deterministic: bool = False
    device: str = "cpu"  # policy and reward model: cpu, cuda or auto
    out_dir: Optional[str] = None  # None: {policy_dir}/reward_agreement
    progress: bool = True

    @property
    def output_dir(self) -> Path:
        return Path(self.out_dir) if self.out_dir else Path(self.policy_dir) / OUT_DIRNAME

    @property
    def stem(self) -> str:
        return f"{self.skill}_{self.annotator.backend}"


def check_config(cfg: AgreementConfig) -> None:
    """The flags that can be checked without loading anything; :class:`AgreementError`."""
    if cfg.skill not in SKILLS:
        raise AgreementError(f"--skill {cfg.skill!r}: unknown skill; valid skills: {', '.join(SKILLS)}")
    if cfg.annotator.backend not in BACKENDS and cfg.annotator.backend != "hf-local":
        raise AgreementError(f"--backend {cfg.annotator.backend!r}: unknown backend; valid backends: "
                             f"{', '.join(BACKENDS)}")
    if cfg.annotator.backend == "vllm":
        raise AgreementError(served_instead("--", cfg.annotator.model or DEFAULT_MODEL, cfg.annotator.num_gpus))
    if cfg.collect_mode not in COLLECT_MODES:
        raise AgreementError(f"--collect_mode {cfg.collect_mode!r}: expected one of {', '.join(COLLECT_MODES)}")
    if cfg.pair_sampling not in PAIR_SAMPLINGS:
        raise AgreementError(f"--pair_sampling {cfg.pair_sampling!r}: expected one of {', '.join(PAIR_SAMPLINGS)}")
    for name in ("episodes", "num_envs", "num_pairs"):
        if int(getattr(cfg, name)) < 1:
            raise AgreementError(f"--{name} must be at least 1, got {getattr(cfg, name)}")
    if cfg.max_steps is not None and int(cfg.max_steps) < 1:
        raise AgreementError(f"--max_steps must be at least 1 step per episode, got {cfg.max_steps}")
    if cfg.device not in ("cpu", "cuda", "auto"):
        raise AgreementError(f"--device {cfg.device!r}: expected cpu, cuda or auto")
    policy_dir = Path(cfg.policy_dir)
    if not policy_dir.is_dir():
        raise AgreementError(f"--policy_dir {policy_dir}: no such folder; expected {{train_dir}}/{{experiment}} "
                             "written by python -m scripts.main")
    if not (policy_dir / "config.json").is_file():
        raise AgreementError(f"--policy_dir {policy_dir}: no config.json there; expected the folder of a trained "
                             "experiment, {train_dir}/{experiment}, as written by python -m scripts.main")
    output_folder("--out_dir", cfg.output_dir, AgreementError)
