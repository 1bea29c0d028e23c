"""Converts the authors' released skill reward checkpoints into our reward directories.

The release trains one reward model per skill with its ``scripts/train_reward.py`` and keeps,
under its ``train_dir/skill_rewards``::

    llama3_{skill}_default/checkpoint_p0/checkpoint_{iter}.pth     (iteration not zero padded)
    llama3_{skill}_default/reward_metrics/train_norm_quantiles.csv  (header 0.05..0.95, one row per save)

A checkpoint is a dict ``tot_num_iter``, ``model`` (the RewardSharedWeights state dict),
``optimizer`` (Adam), ``reward_mean``, ``reward_var`` (0-d tensors). Its network is our
``release`` architecture (:class:`rlaif.reward_arch.ReleaseRewardModel`); the parameter names
are mapped by :data:`rlaif.reward_arch.RELEASE_TO_OURS`. The release's learner drops any
``action``/``critic`` entries of old reward checkpoints before loading; so does this converter.

Output, per skill, read by ``--reward_dir`` like a reward directory we trained::

    {out_dir}/{name}/checkpoint_p0/checkpoint_{iter:09d}.pth    (our checkpoint layout, arch "release")
    {out_dir}/{name}/reward_metrics/train_norm_quantiles.csv    (the release's rows, our header format)

``{name}`` is ``--name_template`` filled with the skill (default ``llama3_{skill}_default``, the
folder names the ``--reward_dir`` of docs/phases.md uses). Every input is
read and checked before anything is written: a file that is not a release reward checkpoint
(a policy checkpoint, a missing entry, a tensor of the wrong shape) stops the conversion with
an error naming the file and the first mismatching tensor. Files are written to a temporary
name and renamed; an existing output is only replaced with ``overwrite``.
"""
from __future__ import annotations

import csv
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from tqdm import tqdm

from common.atomic_io import atomic_write
from common.torch_files import load_error_reason, plain_numbers, safe_load
from common.vocabulary import SKILL_INDEX, SKILLS, skill_from_experiment, skill_index
from rlaif.reward_arch import RELEASE_TO_OURS, ReleaseRewardModel
from rlaif.reward_model import (
    CHECKPOINT_DIRNAME,
    METRICS_DIRNAME,
    QUANTILES_CSV,
    RewardCheckpointError,
    RewardModelConfig,
    list_checkpoints,
)

logger = logging.getLogger(__name__)

RELEASE_CHECKPOINT_RE = re.compile(r"^checkpoint_(\d+)\.pth$")
RELEASE_KEYS = ("model", "reward_mean", "reward_var")
DROPPED_WORDS = ("action", "critic")  # entries the release's learner removes from old reward checkpoints
DEFAULT_NAME_TEMPLATE = "llama3_{skill}_default"


class ReleaseCheckpointError(RewardCheckpointError):
    """A file that cannot be converted as a release reward checkpoint; the message names it."""


@dataclass
class ConvertedReward:
    """One skill's converted checkpoint, held in memory until every input has been checked."""

    skill: str
    source: Path
    iteration: int
    payload: dict[str, Any]
    quantile_header: list[str] | None
    quantile_rows: list[list[str]] | None
    quantile_source: Path | None


# ----------------------------------------------------------------------------- reading

def release_shapes() -> dict[str, tuple[int, ...]]:
    """The release's parameter names and shapes, in its state-dict order."""
    ours = ReleaseRewardModel(RewardModelConfig(arch="release")).state_dict()
    return {theirs: tuple(ours[mine].shape) for theirs, mine in RELEASE_TO_OURS.items()}


def read_release_checkpoint(path: str | Path) -> dict[str, Any]:
    """Loads a checkpoint with torch's safe loader (numpy scalars allowed, nothing else)."""
    path = Path(path)
    if not path.is_file():
        raise ReleaseCheckpointError(f"{path}: checkpoint file not found")
    try:
        state = safe_load(path)
    except Exception as exc:
        raise ReleaseCheckpointError(
            f"{path}: cannot be read as a release reward checkpoint ({type(exc).__name__}: {load_error_reason(exc)})"
        ) from exc
    return state


def _number(path: Path, state: dict[str, Any], key: str) -> float:
    value = state[key]
    try:
        number = float(value.reshape(-1)[0]) if isinstance(value, torch.Tensor) and value.numel() == 1 else float(value)
    except (TypeError, ValueError, RuntimeError):
        raise ReleaseCheckpointError(f"{path}: {key} is not a number (found {type(value).__name__})") from None
    if not math.isfinite(number):
        raise ReleaseCheckpointError(f"{path}: {key} is {number}")
    return number


def convert_state_dict(path: Path, release_model: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Our ``release`` model state dict from the release's, or an error naming the first mismatch.

    Entries whose name holds ``action`` or ``critic`` are dropped first, as the release does."""
    if not isinstance(release_model, dict):
        raise ReleaseCheckpointError(f"{path}: 'model' is a {type(release_model).__name__}, not a state dict")
    kept = {k: v for k, v in release_model.items() if not any(w in k for w in DROPPED_WORDS)}
    dropped = sorted(set(release_model) - set(kept))
    if dropped:
        logger.info("%s: dropping %d action/critic entries as the release's learner does (%s, ...)",
                    path, len(dropped), dropped[0])
    converted: dict[str, torch.Tensor] = {}
    for name, shape in release_shapes().items():
        if name not in kept:
            hint = ""
            if any(k.startswith(("stats_mlp.", "message_cnn.")) for k in kept):
                hint = "; its names are ours: it is already converted"
            elif any(k.startswith("encoder.") for k in kept) and "reward_fn.1.weight" not in kept:
                hint = "; it looks like a policy network, not a reward model"
            raise ReleaseCheckpointError(
                f"{path}: not a release reward checkpoint: tensor {name!r} is missing (expected shape "
                f"{shape}){hint}"
            )
        tensor = kept[name]
        if not isinstance(tensor, torch.Tensor):
            raise ReleaseCheckpointError(f"{path}: {name!r} is a {type(tensor).__name__}, expected a tensor of "
                                         f"shape {shape}")
        if tuple(tensor.shape) != shape:
            raise ReleaseCheckpointError(
                f"{path}: not a release reward checkpoint: tensor {name!r}: expected shape {shape}, found "
                f"{tuple(tensor.shape)}"
            )
        converted[RELEASE_TO_OURS[name]] = tensor.detach().to("cpu", torch.float32).contiguous()
    extra = [k for k in kept if k not in RELEASE_TO_OURS]
    if extra:
        raise ReleaseCheckpointError(
            f"{path}: not a release reward checkpoint: unexpected tensor {extra[0]!r} "
            f"(shape {tuple(getattr(kept[extra[0]], 'shape', ()))}); {len(extra)} unexpected in all"
        )
    return converted


def _fresh_optimizer_state(model: torch.nn.Module) -> dict[str, Any]:
    return torch.optim.Adam(model.parameters(), lr=1e-5).state_dict()


def convert_optimizer(path: Path, optimizer: Any, model: torch.nn.Module) -> tuple[dict[str, Any], bool]:
    """The release's Adam state when it lines up with our parameters (same order), else a fresh one.

    Returns ``(state, carried)``. Used only if training is resumed from the converted file."""
    params = list(model.parameters())
    try:
        groups = optimizer["param_groups"]
        ok = len(groups) == 1 and list(groups[0]["params"]) == list(range(len(params)))
        for idx, entry in optimizer["state"].items():
            for key in ("exp_avg", "exp_avg_sq"):
                ok = ok and tuple(entry[key].shape) == tuple(params[int(idx)].shape)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError):
        ok = False
    if ok:
        return optimizer, True
    logger.info("%s: its optimizer state does not line up with the reward model's parameters; a fresh Adam "
                "state is stored instead (it only matters to resume training)", path)
    return _fresh_optimizer_state(model), False


def release_quantile_csv(checkpoint: Path) -> Path:
    """Where the release keeps the quantile CSV of a run, given one of its checkpoints."""
    return checkpoint.parent.parent / METRICS_DIRNAME / QUANTILES_CSV


def read_release_quantiles(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header (formatted ``0.05``) and value rows of a release quantile CSV.

    The release appends one row per save and writes the header on its first save; a header
    written again by a restarted run is dropped."""
    with path.open(newline="") as fh:
        rows = [row for row in csv.reader(fh) if row]
    if len(rows) < 2:
        raise ReleaseCheckpointError(f"{path}: expected a header of quantiles and at least one row, got {len(rows)}")
    try:
        header_values = [float(v) for v in rows[0]]
        values = [[float(v) for v in row] for row in rows[1:]]
    except ValueError as exc:
        raise ReleaseCheckpointError(f"{path}: non-numeric entry ({exc})") from None
    body = []
    for raw, row in zip(rows[1:], values):
        if row == header_values:
            continue
        if len(row) != len(header_values):
            raise ReleaseCheckpointError(f"{path}: a row has {len(row)} values for {len(header_values)} quantiles")
        body.append([v.strip() for v in raw])
    if not body:
        raise ReleaseCheckpointError(f"{path}: no row of values after the header")
    return [f"{q:.2f}" for q in header_values], body


def convert_checkpoint(path: str | Path, skill: str) -> ConvertedReward:
    """Reads and checks one release checkpoint (and its quantile CSV when present); writes nothing."""
    path = Path(path)
    skill_index(skill)
    state = read_release_checkpoint(path)
    if not isinstance(state, dict):
        raise ReleaseCheckpointError(f"{path}: not a release reward checkpoint (a {type(state).__name__}, not a dict)")
    missing = [k for k in RELEASE_KEYS if k not in state]
    if missing:
        hint = ""
        if "train_step" in state or "env_steps" in state:
            hint = "; it has train_step/env_steps: this is a policy checkpoint, not a reward model"
        raise ReleaseCheckpointError(
            f"{path}: not a release reward checkpoint: missing {', '.join(missing)} (found keys "
            f"{sorted(map(str, state))}){hint}"
        )
    weights = convert_state_dict(path, state["model"])
    mean = _number(path, state, "reward_mean")
    var = _number(path, state, "reward_var")
    if var < 0:
        raise ReleaseCheckpointError(f"{path}: reward_var is negative ({var})")
    config = RewardModelConfig(arch="release")
    model = ReleaseRewardModel(config)
    model.load_state_dict(weights)
    optimizer, _ = convert_optimizer(path, state.get("optimizer"), model)
    match = RELEASE_CHECKPOINT_RE.match(path.name)
    iteration = int(state["tot_num_iter"]) if "tot_num_iter" in state else int(match.group(1)) if match else 0

    csv_path = release_quantile_csv(path)
    header = rows = None
    if csv_path.is_file():
        header, rows = read_release_quantiles(csv_path)
    payload = {
        "model": model.state_dict(), "optimizer": optimizer, "reward_mean": mean, "reward_var": var,
        "tot_num_iter": iteration, "model_config": config.to_dict(), "skill": skill,
        "skill_index": SKILL_INDEX[skill], "experiment": path.parent.parent.name,
        "converted_from": str(path), "finished": True,
    }
    if header is not None:
        payload["quantiles"] = dict(zip(header, (float(v) for v in rows[-1])))
    return ConvertedReward(skill, path, iteration, plain_numbers(payload), header, rows,
                           csv_path if header is not None else None)


def find_release_checkpoints(release_dir: str | Path, checkpoint_num: int = 0,
                             skills: Sequence[str] | None = None) -> dict[str, Path]:
    """``{skill: checkpoint}`` for every skill run found in the release's ``skill_rewards`` folder.

    Runs are folders whose name has the skill as a ``_``-separated part (``llama3_{skill}_default``);
    ``checkpoint_num`` 0 takes each run's latest checkpoint, as the release's learner does, another
    value that iteration. Skills in the order of :data:`common.vocabulary.SKILLS`."""
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        raise ReleaseCheckpointError(f"release directory not found: {release_dir}")
    runs: dict[str, list[Path]] = {}
    for sub in sorted(p for p in release_dir.iterdir() if p.is_dir()):
        try:
            runs.setdefault(skill_from_experiment(sub.name), []).append(sub)
        except ValueError:
            continue
    wanted = list(skills) if skills else list(SKILLS)
    found: dict[str, Path] = {}
    for skill in wanted:
        candidates = runs.get(skill, [])
        if len(candidates) > 1:
            exact = [c for c in candidates if c.name == f"llama3_{skill}_default"]
            if len(exact) != 1:
                raise ReleaseCheckpointError(
                    f"{release_dir}: several runs for {skill} ({', '.join(c.name for c in candidates)}); "
                    "convert one with --checkpoint FILE --skill NAME"
                )
            candidates = exact
        if not candidates:
            continue
        ckpt_dir = candidates[0] / CHECKPOINT_DIRNAME
        numbered = []
        if ckpt_dir.is_dir():
            numbered = sorted((int(m.group(1)), p) for p in ckpt_dir.iterdir()
                              if p.is_file() and (m := RELEASE_CHECKPOINT_RE.match(p.name)))
        if not numbered:
            raise ReleaseCheckpointError(f"{ckpt_dir}: no checkpoint_*.pth for {skill}")
        if checkpoint_num:
            chosen = [p for it, p in numbered if it == checkpoint_num]
            if not chosen:
                raise ReleaseCheckpointError(f"{ckpt_dir}: no checkpoint_{checkpoint_num}.pth (found "
                                             f"{', '.join(p.name for _, p in numbered)})")
            found[skill] = chosen[0]
        else:
            found[skill] = numbered[-1][1]
    if not found:
        raise ReleaseCheckpointError(
            f"{release_dir}: no reward run found (expected folders llama3_{{skill}}_default/checkpoint_p0 for "
            f"skills {', '.join(wanted)})"
        )
    return found


# ----------------------------------------------------------------------------- writing

def output_dir(out_dir: str | Path, skill: str, name_template: str = DEFAULT_NAME_TEMPLATE) -> Path:
    return Path(out_dir) / name_template.format(skill=skill)


def _existing_outputs(target: Path) -> list[Path]:
    found = [p for _, p in list_checkpoints(target / CHECKPOINT_DIRNAME)]
    csv_path = target / METRICS_DIRNAME / QUANTILES_CSV
    return found + ([csv_path] if csv_path.exists() else [])


def write_converted(converted: Sequence[ConvertedReward], out_dir: str | Path, overwrite: bool = False,
                    name_template: str = DEFAULT_NAME_TEMPLATE) -> list[Path]:
    """Writes converted checkpoints (and quantile CSVs); refuses existing outputs unless ``overwrite``.

    With ``overwrite``, other checkpoints in the target folder are removed after the new one is in
    place (the newest checkpoint is the one loaded), and a quantile CSV is replaced (or removed when
    the release run had none: it would describe another model)."""
    targets = {c.skill: output_dir(out_dir, c.skill, name_template) for c in converted}
    if not overwrite:
        clashes = [p for t in targets.values() for p in _existing_outputs(t)]
        if clashes:
            raise ReleaseCheckpointError(
                f"output exists: {clashes[0]} ({len(clashes)} existing file(s)); pass --overwrite to replace, or "
                "choose another --out_dir"
            )
    written: list[Path] = []
    for item in converted:
        target = targets[item.skill]
        ckpt = target / CHECKPOINT_DIRNAME / f"checkpoint_{item.iteration:09d}.pth"
        atomic_write(ckpt, lambda tmp, payload=item.payload: torch.save(payload, tmp))
        written.append(ckpt)
        for _, old in list_checkpoints(ckpt.parent):
            if old != ckpt:
                old.unlink()
                logger.info("removed the older checkpoint %s (--overwrite)", old)
        csv_out = target / METRICS_DIRNAME / QUANTILES_CSV
        if item.quantile_rows is not None:
            def write_csv(tmp: Path, item: ConvertedReward = item) -> None:
                with tmp.open("w", newline="") as fh:
                    w = csv.writer(fh)
                    w.writerow(item.quantile_header)
                    w.writerows(item.quantile_rows)
            atomic_write(csv_out, write_csv)
            written.append(csv_out)
        elif csv_out.exists():
            csv_out.unlink()
            logger.warning("removed %s: it belonged to the replaced model", csv_out)
        logger.info("%s: wrote %s (iteration %d, reward mean %.4f, var %.4f) from %s%s", item.skill, ckpt,
                    item.iteration, item.payload["reward_mean"], item.payload["reward_var"], item.source,
                    f" and {csv_out}" if item.quantile_rows is not None else "")
        if item.quantile_rows is None:
            logger.warning("%s: no quantile CSV next to %s (expected %s); --reward_dir %s needs %s before RL "
                           "training can read its thresholds", item.skill, item.source,
                           release_quantile_csv(item.source), target, csv_out)
    return written


def convert_release_rewards(
    out_dir: str | Path,
    release_dir: str | Path | None = None,
    checkpoint: str | Path | None = None,
    skill: str | None = None,
    checkpoint_num: int = 0,
    skills: Sequence[str] | None = None,
    overwrite: bool = False,
    name_template: str = DEFAULT_NAME_TEMPLATE,
    progress: bool = True,
) -> list[Path]:
    """Converts a release ``skill_rewards`` folder (every skill found) or one ``checkpoint`` file.

    With ``checkpoint``, ``skill`` is required unless the file sits in a run folder named after
    its skill (``.../llama3_{skill}_default/checkpoint_p0/checkpoint_N.pth``). Returns the paths
    written. Nothing is written unless every input converts."""
    if (release_dir is None) == (checkpoint is None):
        raise ValueError("give either a release directory or a single checkpoint file")
    if "{skill}" not in name_template:
        raise ValueError(f"name template {name_template!r} must contain {{skill}}")
    try:
        name_template.format(skill="x")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"name template {name_template!r}: only {{skill}} can be filled in ({exc!r})") from None
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        if skill is None:
            try:
                skill = skill_from_experiment(checkpoint.resolve().parent.parent.name)
            except ValueError:
                raise ValueError(f"cannot tell the skill of {checkpoint} from its folder; pass --skill") from None
        sources = {skill: checkpoint}
    else:
        sources = find_release_checkpoints(release_dir, checkpoint_num, skills)
        missing = [s for s in (skills or SKILLS) if s not in sources]
        if missing:
            logger.warning("%s: no run for %s; converting %s", release_dir, ", ".join(missing), ", ".join(sources))
    converted = []
    for name, path in tqdm(list(sources.items()), desc="release rewards", unit="skill", disable=not progress):
        converted.append(convert_checkpoint(path, name))
    return write_converted(converted, out_dir, overwrite, name_template)


__all__ = [
    "ConvertedReward",
    "ReleaseCheckpointError",
    "convert_checkpoint",
    "convert_release_rewards",
    "convert_state_dict",
    "find_release_checkpoints",
    "read_release_checkpoint",
    "read_release_quantiles",
    "release_shapes",
    "write_converted",
]
