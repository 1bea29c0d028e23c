"""Policy network (CDGPT5 encoder), its observation, and glyph rendering.

Import the submodules directly; this package file imports nothing heavy so that
``rl_baseline.models.render`` can be used without sample-factory.
"""
