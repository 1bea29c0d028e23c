"""Settings of phase 0 (observation datasets): what is collected, how, and the flags the dataset
builders share (``scripts.collect_dataset``, ``scripts.import_ttyrecs``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from common.flag_checks import FlagError, worker_count
from common.vocabulary import SKILLS, skill_index

POLICIES: tuple[str, ...] = ("random", "explorer", "checkpoint")
DEFAULT_CHARACTER = "mon-hum-neu-mal"


class CollectError(ValueError):
    """Bad collection settings (unknown policy, bad mix, missing checkpoint, ...)."""



def parse_policy_mix(text: str) -> dict[str, float]:
    """``"explorer:0.8,random:0.2"`` -> normalised weights; a bare name means weight 1."""
    if not text or not text.strip():
        raise CollectError("empty policy mix; use e.g. 'explorer:0.8,random:0.2'")
    mix: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, weight = part.partition(":")
        name = name.strip()
        if name not in POLICIES:
            raise CollectError(f"unknown policy {name!r} in mix {text!r}; valid: {', '.join(POLICIES)}")
        try:
            w = float(weight) if weight.strip() else 1.0
        except ValueError:
            raise CollectError(f"bad weight {weight!r} for policy {name!r} in mix {text!r}") from None
        if not np.isfinite(w) or w < 0:
            raise CollectError(f"weight of policy {name!r} must be a finite number >= 0, got {weight!r}")
        mix[name] = mix.get(name, 0.0) + w
    total = sum(mix.values())
    if total <= 0:
        raise CollectError(f"policy mix {text!r} has no positive weight")
    return {name: w / total for name, w in sorted(mix.items()) if w > 0}


@dataclass
class ExplorerConfig:
    """Knobs of the scripted explorer."""

    epsilon: float = 0.05  # share of uniformly random actions
    min_level_steps: int = 100  # time spent on a level before heading for the stairs ...
    max_level_steps: int = 700  # ... drawn uniformly from [min, max]
    descend_prob: float = 0.8  # when leaving a level: down (else up, where possible)
    search_turns: int = 15  # searches when nothing is left to explore and no stairs are known
    replan_every: int = 6  # steps a cached path is followed before planning again
    kick_locked_prob: float = 0.5  # kick a locked door open instead of giving up on it
    altar_drops: int = 3  # items dropped on each altar visited (their curse status shows)
    shop_drop_prob: float = 0.1  # per step in a shop: drop an item (the shopkeeper offers to buy it)
    shop_steps: int = 40  # steps after a shop greeting that count as "in a shop"
    sell_prob: float = 0.7  # answer a shopkeeper's offer with yes


@dataclass
class CollectConfig:
    """What :func:`collect_dataset` collects and how."""

    skill: str
    num_pairs: int
    policy_mix: dict[str, float] = field(default_factory=lambda: {"explorer": 0.8, "random": 0.2})
    seed: int = 0
    num_workers: int = 1
    checkpoint: Optional[str] = None  # train_dir/skill_policy/EXP for the checkpoint policy
    train_dir: Optional[str] = None  # defaults to the checkpoint's parent folder
    device: str = "cpu"  # where the checkpoint policy runs: cpu or cuda
    max_episode_steps: int = 5000
    sample_prob: float = 0.1  # chance that a step becomes a sample
    uninformative_keep_prob: float = 0.1  # ... times this when no message and only HP changed
    level_change_prob: float = 1.0  # chance that a step that changes the depth becomes a sample
    max_samples_per_episode: int = 200
    character: str = DEFAULT_CHARACTER
    explorer: ExplorerConfig = field(default_factory=ExplorerConfig)
    progress: bool = True

    def validate(self) -> None:
        skill_index(self.skill)  # raises with the list of valid skills
        if int(self.num_pairs) <= 0:
            raise CollectError(f"--num_pairs must be > 0, got {self.num_pairs}")
        try:
            worker_count("num_workers", self.num_workers, "collection worker processes")
        except FlagError as exc:
            raise CollectError(str(exc)) from None
        if not self.policy_mix or any(p not in POLICIES for p in self.policy_mix):
            raise CollectError(f"bad policy mix {self.policy_mix}; valid policies: {', '.join(POLICIES)}")
        if self.device not in ("cpu", "cuda"):
            raise CollectError(f"--device must be cpu or cuda, got {self.device!r}")
        if "checkpoint" in self.policy_mix and not self.checkpoint:
            raise CollectError("policy 'checkpoint' needs --checkpoint DIR (train_dir/skill_policy/EXPERIMENT)")
        for name in ("sample_prob", "uninformative_keep_prob", "level_change_prob"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise CollectError(f"--{name} must be in [0, 1], got {value}")
        if float(self.sample_prob) <= 0:
            raise CollectError("--sample_prob must be > 0")
        if int(self.max_episode_steps) <= 0 or int(self.max_samples_per_episode) <= 0:
            raise CollectError("--max_episode_steps and --max_samples_per_episode must be > 0")


def add_dataset_args(p: Any, defaults: Any, unit: str) -> None:
    """Flags shared by the dataset builders (``scripts.collect_dataset``, ``scripts.import_ttyrecs``):
    the skill and size, the output, and which steps become samples. ``defaults`` holds the
    sampling defaults; ``unit`` names where samples come from ("episode" or "game")."""
    p.add_argument("--skill", required=True,
                   help=f"skill the dataset is for; names the output file ({', '.join(SKILLS)})")
    p.add_argument("--num_pairs", type=int, required=True, help="pairs to build (2 samples each)")
    p.add_argument("--out", default="og_dataset",
                   help="output folder; the file is {out}/{skill}.npz (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--sample_prob", type=float, default=defaults.sample_prob,
                   help="probability that a step becomes a sample (default: %(default)s)")
    p.add_argument("--uninformative_keep_prob", type=float, default=defaults.uninformative_keep_prob,
                   help="extra factor on --sample_prob for steps without any message whose depth, gold, "
                        "XP level and hunger did not change (default: %(default)s)")
    p.add_argument("--level_change_prob", type=float, default=defaults.level_change_prob,
                   help="probability that a step that changes the depth becomes a sample (default: %(default)s)")
    p.add_argument(f"--max_samples_per_{unit}", type=int, default=getattr(defaults, f"max_samples_per_{unit}"),
                   help=f"cap on samples from one {unit} (default: %(default)s)")


def check_dataset_args(skill: str, num_pairs: int) -> None:
    """Raises :class:`CollectError` for an unknown skill or a non-positive size."""
    if skill not in SKILLS:
        raise CollectError(f"--skill {skill!r}: unknown skill; valid skills: {', '.join(SKILLS)}")
    if num_pairs <= 0:
        raise CollectError(f"--num_pairs must be > 0, got {num_pairs}")
