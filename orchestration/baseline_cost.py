"""What a baseline cost, measured from the phases that ran: ``{out_dir}/baselines/{name}/cost.json``.

How each figure is measured:

* ``cpu_hours`` / ``gpu_hours``: wall-clock time of each of the baseline's phases, from the markers the
  runner leaves (``{out_dir}/.pipeline/{phase}.json``, written by :func:`orchestration.pipeline.run_plan`
  with the seconds the phase took; under slurm the baseline jobs append one line per run -- requeues and
  array tasks included -- to ``{phase}.slurm.jsonl``). A phase on ``gpu:N`` adds its hours x N to
  ``gpu_hours``; a CPU phase adds its hours to ``cpu_hours``. These are wall-clock hours of the phase's
  allocation, not core-hours. Phases shared with MaestroMotif's own run (data collection, the skills' reward
  models, code generation) are not counted again.
* ``env_steps``: the env steps of the newest checkpoint of every training run under the baseline's folder,
  summed (sample-factory names checkpoints ``checkpoint_{iteration}_{env_steps}.pth``).
* ``llm_tokens``: 0 for a method that calls no LLM; null where the LLM's part was played by a stand-in (the
  heuristic annotator: no tokens exist to count); otherwise estimated from the annotation conversation logs
  under the baseline's folder as characters / 4 (prompts and replies; ``llm_tokens_method`` says so).
"""
from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Sequence

from common.atomic_io import atomic_write_json

logger = logging.getLogger(__name__)

STATE_DIR = ".pipeline"  # orchestration.pipeline.STATE_DIR (not imported: the runner's module is not needed here)
LLM_MODES = ("none", "stand_in", "logs")
CHARS_PER_TOKEN = 4
_CHECKPOINT = re.compile(r"checkpoint_\d+_(\d+)\.pth$")


class CostError(ValueError):
    """A bad phase/device specification."""


@dataclass
class PhaseCost:
    name: str
    device: str  # "cpu" or "gpu:N"
    seconds: Optional[float]  # None: no record of the phase having run
    runs: int

    @property
    def gpus(self) -> int:
        return int(self.device.split(":", 1)[1]) if self.device.startswith("gpu") else 0


def parse_phase_spec(spec: str) -> tuple[str, str]:
    """``NAME=cpu`` or ``NAME=gpu:N`` -> (name, device)."""
    name, sep, device = spec.rpartition("=")
    if not sep or not name:
        raise CostError(f"--phase {spec!r}: expected NAME=cpu or NAME=gpu:N")
    if device != "cpu" and not re.fullmatch(r"gpu:[1-9]\d*", device):
        raise CostError(f"--phase {spec!r}: the device is cpu or gpu:N (N GPUs), got {device!r}")
    return name, device


def marker_stem(out_dir: str | Path, phase: str) -> Path:
    return Path(out_dir) / STATE_DIR / phase.replace("/", "__")


def phase_seconds(out_dir: str | Path, phase: str) -> tuple[Optional[float], int]:
    """Seconds the phase ran (all its records summed) and how many records there were."""
    stem = marker_stem(out_dir, phase)
    seconds, runs = 0.0, 0
    marker = stem.with_suffix(".json")
    if marker.is_file():
        try:
            seconds += float(json.loads(marker.read_text()).get("seconds", 0.0))
            runs += 1
        except (ValueError, TypeError, AttributeError):
            logger.warning("%s: unreadable phase marker, not counted", marker)
    slurm = Path(str(stem) + ".slurm.jsonl")
    if slurm.is_file():
        for line in slurm.read_text().splitlines():
            try:
                seconds += float(json.loads(line)["seconds"])
                runs += 1
            except (ValueError, KeyError, TypeError):
                logger.warning("%s: unreadable line %r, not counted", slurm, line[:80])
    return (seconds if runs else None), runs


def env_steps_under(folder: str | Path) -> int:
    """Sum over the training runs under ``folder`` of their newest checkpoint's env steps."""
    total = 0
    for ckpt_dir in sorted(Path(folder).rglob("checkpoint_p0")):
        steps = [int(m.group(1)) for p in ckpt_dir.glob("checkpoint_*.pth") if (m := _CHECKPOINT.search(p.name))]
        total += max(steps, default=0)
    return total


def logged_llm_chars(folder: str | Path) -> int:
    """Characters of every prompt and reply in the annotation conversation logs under ``folder``."""
    chars = 0
    for log in sorted(Path(folder).rglob("annotation_logs/*.jsonl")):
        with log.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a killed run
                if "pair" in record:
                    chars += len(record.get("prompt", "")) + sum(len(r) for r in record.get("replies", []))
                elif "system" in record:
                    chars += len(record.get("system") or "")
    return chars


def eval_results(folder: str | Path) -> list[str]:
    """The evaluation JSONs under ``folder`` (relative paths), one per (run, task)."""
    base = Path(folder)
    return sorted(str(p.relative_to(base)) for p in base.rglob("eval/*.json"))


def measure_cost(out_dir: str | Path, name: str, label: str, phases: Sequence[tuple[str, str]], llm: str) -> dict:
    """The content of ``cost.json`` (module docstring)."""
    if llm not in LLM_MODES:
        raise CostError(f"--llm {llm!r}: expected one of {', '.join(LLM_MODES)}")
    folder = Path(out_dir) / "baselines" / name
    if not folder.is_dir() or not any(folder.iterdir()):
        raise CostError(f"{folder}: no run of the baseline {name!r} there ({'empty' if folder.is_dir() else 'missing'}); "
                        "give the --out_dir of the pipeline run that trained it (its baselines/NAME folder), or run the "
                        "baseline first")
    costs = []
    for phase, device in phases:
        seconds, runs = phase_seconds(out_dir, phase)
        costs.append(PhaseCost(phase, device, seconds, runs))
    missing = [c.name for c in costs if c.seconds is None]
    if missing:
        logger.warning("no record of %d phase(s) having run (not counted): %s", len(missing), ", ".join(missing))
    cpu = sum(c.seconds or 0.0 for c in costs if c.gpus == 0) / 3600.0
    gpu = sum((c.seconds or 0.0) * c.gpus for c in costs) / 3600.0
    if llm == "none":
        tokens: Optional[int] = 0
        method = "the method calls no language model"
    elif llm == "stand_in":
        tokens = None
        method = "not measured: a rule-based stand-in played the LLM's part (no tokens exist)"
    else:
        chars = logged_llm_chars(folder)
        tokens = int(math.ceil(chars / CHARS_PER_TOKEN))
        method = f"estimate: {chars} characters of logged prompts and replies / {CHARS_PER_TOKEN}"
    return {
        "method": name,
        "label": label,
        "llm_tokens": tokens,
        "cpu_hours": round(cpu, 6),
        "gpu_hours": round(gpu, 6),
        "env_steps": env_steps_under(folder),
        "llm_tokens_method": method,
        "measured": ("wall-clock hours of this baseline's phases (pipeline/slurm markers) by device, GPU hours x GPUs; "
                     "env steps of the newest checkpoint of each training run; shared MaestroMotif phases not counted"),
        "phases": [asdict(c) for c in costs],
        "missing_phases": missing,
        "eval_results": eval_results(folder),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_cost(out_dir: str | Path, name: str, label: str, phases: Sequence[tuple[str, str]], llm: str) -> Path:
    cost = measure_cost(out_dir, name, label, phases, llm)
    path = Path(out_dir) / "baselines" / name / "cost.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, cost, sort_keys=False)
    return path


def _gpus_of(command: str) -> int:
    """GPUs a pipeline phase's command used: vLLM's tensor-parallel size, one for ``--device gpu``."""
    if "--backend vllm" in command:
        m = re.search(r"--num[-_]gpus[ =](\d+)", command)
        return int(m.group(1)) if m else 1
    return 1 if re.search(r"--device[ =](gpu|cuda)\b", command) else 0


def _own_phase_records(out_dir: str | Path) -> Optional[list[tuple[float, str]]]:
    """(seconds, command) of every MaestroMotif phase marker (``.pipeline/*.json`` outside ``baselines/``);
    None when ``out_dir`` holds no pipeline markers. Unreadable markers are skipped with a warning."""
    state = Path(out_dir) / STATE_DIR
    markers = sorted(p for p in state.glob("*.json") if not p.name.startswith("baselines__")) if state.is_dir() else []
    if not markers:
        return None
    records = []
    for marker in markers:
        try:
            record = json.loads(marker.read_text())
            records.append((float(record.get("seconds", 0.0)), str(record.get("command", ""))))
        except (OSError, ValueError, TypeError, AttributeError):
            logger.warning("%s: unreadable phase marker, not counted", marker)
    return records


def _is_stand_in_annotation(command: str) -> bool:
    return "scripts.annotate_pairs" in command and "--backend heuristic" in command


def annotation_model(out_dir: str | Path) -> Optional[str]:
    """The ``--model`` that annotated a pipeline run's skills when a language model did (its phase markers say
    so), with its ``--answer_mode`` when that is not the paper's ("smollm2-135m, constrained answers"); None when
    the heuristic stand-in did, or the run has no annotation markers."""
    for _, command in _own_phase_records(out_dir) or ():
        if "scripts.annotate_pairs" in command and not _is_stand_in_annotation(command):
            words = command.split()
            if "--model" in words[:-1]:
                model = words[words.index("--model") + 1]
                mode = words[words.index("--answer_mode") + 1] if "--answer_mode" in words[:-1] else "release"
                return model if mode == "release" else f"{model}, {mode} answers"
    return None


def stand_in_annotated(out_dir: str | Path) -> bool:
    """Whether a pipeline run's skills were annotated by the heuristic stand-in (its phase markers say so)."""
    return any(_is_stand_in_annotation(command) for _, command in _own_phase_records(out_dir) or ())


def pipeline_cost(out_dir: str | Path) -> Optional[dict]:
    """MaestroMotif's own cost in a pipeline run, measured as the baselines' is: wall-clock hours of its
    phases (every ``.pipeline/*.json`` marker outside ``baselines/``) by device, the env steps of its skill
    training, and the tokens of its annotation logs (None when the heuristic stand-in annotated). None when
    ``out_dir`` holds no pipeline markers."""
    records = _own_phase_records(out_dir)
    if records is None:
        return None
    cpu = gpu = 0.0
    stand_in = False
    for seconds, command in records:
        gpus = _gpus_of(command)
        if gpus:
            gpu += seconds * gpus / 3600.0
        else:
            cpu += seconds / 3600.0
        stand_in |= _is_stand_in_annotation(command)
    steps = sum(env_steps_under(d) for d in sorted(Path(out_dir).glob("*skill_policy*")) if d.is_dir())
    chars = 0 if stand_in else logged_llm_chars(Path(out_dir))
    return {
        "method": "MaestroMotif",
        "label": "MaestroMotif (this run's own phases)" + (
            ", heuristic stand-in annotator (rules, not an LLM)" if stand_in else ""),
        "stand_in": stand_in,
        "llm_tokens": None if stand_in else int(math.ceil(chars / CHARS_PER_TOKEN)),
        "cpu_hours": round(cpu, 6),
        "gpu_hours": round(gpu, 6),
        "env_steps": steps,
        "measured": "wall-clock hours of the pipeline's own phases (markers) by device; env steps of the skill training",
    }
