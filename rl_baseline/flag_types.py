"""What the flags of scripts.main (:mod:`rl_baseline.sf.cfg`) and of the paper's baselines
(:mod:`rl_baseline.baselines.flags`) share: the error a flag check raises, the list-flag reader and the
environment and meta-policy names the checks compare against. Below both (at the top of rl_baseline,
under sf and the baselines' wing), so that cfg can import the baselines' flags and those can name these
without an import circle.
"""
from __future__ import annotations

import ast
from typing import Any

SKILL_ENV = "nle_skill"
MOTIF_ENV = "nle_fixed_eat_action"
META_POLICY_KINDS = ("code", "llm")  # who picks the next skill in evaluation: generated code or a language model


class ConfigError(ValueError):
    """A flag value that cannot work; reported in the main process before workers start."""


def parse_list_flag(value: Any, flag: str) -> list:
    """Reads a list flag such as ``"['a', 'b']"``, ``"[a,b]"``, ``"[0.95,0.85]"``, ``"a"`` or ``"0.5"``.

    Accepts Python/JSON list literals (the release's README spreads them over several
    lines), bare comma-separated items inside brackets, and single values.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (int, float)):
        return [value]
    text = " ".join(str(value).split())
    if not text:
        return []
    if text.startswith("[") or text.startswith("("):
        try:
            parsed = ast.literal_eval(text)
            return list(parsed) if isinstance(parsed, (list, tuple)) else [parsed]
        except (ValueError, SyntaxError):
            inner = text.strip("[]() ")
            if not inner:
                return []
            return [item.strip().strip("'\"") for item in inner.split(",") if item.strip()]
    try:
        return [ast.literal_eval(text)]
    except (ValueError, SyntaxError):
        return [text]
