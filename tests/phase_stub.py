"""A pipeline phase for tests: ``python -m tests.phase_stub OUT [FAIL_IF]`` writes OUT (and counts its runs in
OUT.runs), or exits 1 without writing when the file FAIL_IF exists."""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    out = Path(sys.argv[1])
    if len(sys.argv) > 2 and Path(sys.argv[2]).exists():
        print("failing, as asked")
        sys.exit(1)
    out.write_text("output\n")
    runs = out.with_name(out.name + ".runs")
    runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
