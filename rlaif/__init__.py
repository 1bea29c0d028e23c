"""Phase 1 of MaestroMotif: datasets, captions, LLM annotation and reward models.

Nothing in this package imports NLE or sample-factory at module import time,
so annotation can run in an environment that only has vLLM installed.
"""
from rlaif import heuristic as _heuristic  # noqa: F401,E402  (registers the heuristic backend of common.llm)
