"""The sustained figure of a training run from its FPS reports: env steps between the first and the last report over
the seconds between them, and the same per 5-minute window.

usage: python sustained.py FPS_REPORTS.txt   (lines as sample-factory logs them: "[date time][pid] Fps is (...).
Total num frames: N. ..."; grep "Fps is" from a run's log)"""
from __future__ import annotations

import re
import sys
from datetime import datetime

LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\].*Fps is .*Total num frames: (\d+)\.")


def main(path: str, window_s: float = 300.0) -> None:
    points = []
    for line in open(path, encoding="utf-8"):
        match = LINE.search(line)
        if match:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            points.append((when, int(match.group(2))))
    (t0, f0), (t1, f1) = points[0], points[-1]
    print(f"{f1 - f0:,} env steps in {t1 - t0:,.0f} s between the first and last of {len(points)} FPS reports: "
          f"{(f1 - f0) / (t1 - t0):,.0f} env steps/s")
    windows, start = [], points[0]
    for point in points[1:]:
        if point[0] - start[0] >= window_s - 1e-6:
            windows.append((point[1] - start[1]) / (point[0] - start[0]))
            start = point
    print(f"{window_s / 60:.0f}-minute windows: " + ", ".join(f"{w:,.0f}" for w in windows))


if __name__ == "__main__":
    main(sys.argv[1])
