"""Writes one sbatch job per pipeline phase from the templates of this folder.

Example: python -m slurm.render --out slurm_jobs --workdir /path/to/checkout --setup "source venv/bin/activate"
(the same jobs as ``python -m scripts.pipeline --preset paper --write_slurm slurm_jobs``).
"""
from __future__ import annotations

import sys

from common.skill_files import activate_from_argv

if __name__ == "__main__":  # --skills before orchestration reads the skill set (as scripts/__init__.py does)
    activate_from_argv()

from orchestration.slurm import build_parser, main  # noqa: E402

__all__ = ["build_parser", "main"]  # build_parser: the docs' commands are checked against it

if __name__ == "__main__":
    sys.exit(main())
