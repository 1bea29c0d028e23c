"""The paper's baselines and ablations as pipeline phases: one registry, filled by the modules that
define them, read by :mod:`orchestration.pipeline` (after MaestroMotif's own phases, before the report).

A provider is a function ``(cfg: PipelineConfig) -> list[Phase]`` registered under a name with
:func:`register`; ``--baselines a,b`` (or ``all``) on ``scripts.pipeline`` selects them. Each
provider builds its phases for the small presets and for the paper plan (``cfg.preset == "paper"``),
writing under ``{cfg.out_dir}/baselines/{name}/`` so the report finds one column per baseline.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # the pipeline imports this module, not the other way round at run time
    from orchestration.pipeline import Phase, PipelineConfig

Provider = Callable[["PipelineConfig"], list["Phase"]]

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


def _load_providers() -> None:
    """Imports the modules that register baselines (their import registers them)."""
    import orchestration.baselines_llm  # noqa: F401  (llm_policy, llm_policy_equivalent, hierarchical_llm)
    import orchestration.baselines_rl  # noqa: F401  (the RL baselines and the ablations)


def available() -> dict[str, str]:
    _load_providers()
    return {name: desc for name, (_, desc) in PROVIDERS.items()}


def baseline_phases(cfg: "PipelineConfig") -> list["Phase"]:
    """The phases of the baselines ``cfg.baselines`` selects, in registry order."""
    _load_providers()
    unknown = [b for b in cfg.baselines if b not in PROVIDERS]
    if unknown:
        from orchestration.pipeline import PipelineError

        raise PipelineError(f"unknown baseline(s) {', '.join(unknown)}; valid: {', '.join(PROVIDERS) or 'none yet'}")
    out: list[Phase] = []
    for name, (provider, _) in PROVIDERS.items():
        if name in cfg.baselines:
            out += provider(cfg)
    return out
