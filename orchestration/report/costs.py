"""What each method cost: one row per ``cost.json`` a baseline wrote (``baselines/{name}/cost.json``, by
:mod:`orchestration.baseline_cost` or :mod:`rl_baseline.baselines.llm_policy.cost`), and MaestroMotif's own row
measured the same way from the pipeline's phase records (:func:`orchestration.baseline_cost.pipeline_cost`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestration.baseline_cost import pipeline_cost

from .shared import COST_FILE, find_inputs, read_cost


def find_costs(root: str | Path) -> list[dict[str, Any]]:
    """MaestroMotif's cost in a pipeline run under ``root`` (when its phase records are there), then every
    baseline's ``cost.json``; unreadable files are skipped with a warning."""
    out: list[dict[str, Any]] = []
    own = pipeline_cost(root)
    if own is not None:
        out.append(own)
    for path in find_inputs(root, f"baselines/*/{COST_FILE}"):
        data = read_cost(path)
        if data is not None:
            out.append({**data, "method": str(data.get("method") or path.parent.name)})
    return out


def _hours(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else "n/a"


def _tokens(value: Any) -> str:
    if value is None:
        return "not measured (stand-in)"
    return f"{int(value):,}" if isinstance(value, (int, float)) else "n/a"


def cost_table(costs: list[dict[str, Any]]) -> str:
    """Markdown: method, label, LLM tokens, CPU-hours, GPU-hours, env steps, and how each was measured."""
    head = ["method", "label", "LLM tokens", "CPU-hours", "GPU-hours", "env steps", "measured as"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for c in costs:
        steps = c.get("env_steps")
        row = [str(c.get("method", "")), str(c.get("label", "")), _tokens(c.get("llm_tokens")),
               _hours(c.get("cpu_hours")), _hours(c.get("gpu_hours")),
               f"{int(steps):,}" if isinstance(steps, (int, float)) else "n/a",
               str(c.get("measured", "")).replace("|", "/")]
        if c.get("training_env_steps"):
            row[5] += f" (+{int(c['training_env_steps']):,} training, shared)"
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "CPU- and GPU-hours are the measured hours of each method's own phases on the machine that ran "
                  "them (see each row's definition); a stand-in annotator or policy uses no language model, so "
                  "its tokens are not measured."]
    return "\n".join(lines)
