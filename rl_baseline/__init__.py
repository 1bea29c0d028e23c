"""Phase 4 of MaestroMotif: the NetHack environment, tasks, skills and sample-factory glue.

Layered like NLE: ``nethack`` (game mechanics) below ``envs`` (gym layer) below ``tasks`` and ``skills``.
"""
