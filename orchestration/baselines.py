"""The paper's baselines and ablations as pipeline phases: the registry (:mod:`orchestration.baseline_registry`)
filled by the modules that define them, read by :mod:`orchestration.pipeline` (after MaestroMotif's own phases,
before the report).

``--baselines a,b`` (or ``all``) on ``scripts.pipeline`` selects them. Each provider builds its phases for
the small presets and for the paper plan (``cfg.preset == "paper"``), writing under
``{cfg.out_dir}/baselines/{name}/`` so the report finds one column per baseline.
"""
from __future__ import annotations

# imported for what they register, in this order (the registry's order is the plan's and the report's)
import orchestration.baselines_llm  # noqa: F401  (llm_policy, llm_policy_equivalent, hierarchical_llm)
import orchestration.baselines_rl  # noqa: F401  (the RL baselines and the ablations)
from orchestration.baseline_registry import PROVIDERS
from orchestration.phases import Phase, PipelineConfig, PipelineError


def available() -> dict[str, str]:
    return {name: desc for name, (_, desc) in PROVIDERS.items()}


def baseline_phases(cfg: PipelineConfig) -> list[Phase]:
    """The phases of the baselines ``cfg.baselines`` selects, in registry order."""
    unknown = [b for b in cfg.baselines if b not in PROVIDERS]
    if unknown:
        raise PipelineError(f"unknown baseline(s) {', '.join(unknown)}; valid: {', '.join(PROVIDERS) or 'none yet'}")
    out: list[Phase] = []
    for name, (provider, _) in PROVIDERS.items():
        if name in cfg.baselines:
            out += provider(cfg)
    return out
