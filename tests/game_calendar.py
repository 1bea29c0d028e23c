"""NetHack's calendar, pinned for the test suite.

NetHack reads the real date at the start of every game: on a full moon the hero starts with
Luck +1 and the message "You are lucky!  Full moon tonight.", on a new moon "Be careful!  New
moon tonight." is shown, on Friday the 13th Luck is -1. A seeded game therefore plays differently
on about a quarter of the days of a month, and tests that compare a seeded game with a recording
(the skill environment's trace, the ttyrec import, the explorer's descents) would pass or fail with
the calendar.

The suite runs with a small preloaded library (``LD_PRELOAD``) that replaces the C library's
``time()``: it starts at ``PINNED_DATE`` (an ordinary day at noon, UTC) and advances with the real
clock, so timeouts still expire. NetHack's game clock comes from ``time()``; Python's clocks read
``clock_gettime`` and are left alone. ``tests/conftest.py`` builds the library with the C compiler
and re-runs pytest with it once; without a compiler the suite runs on the real date and says so.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PINNED_DATE = dt.datetime(2026, 11, 17, 12, 0, 0, tzinfo=dt.timezone.utc)  # a waxing moon, a Tuesday
PINNED_VAR = "MAESTROMOTIF_PINNED_GAME_DATE"  # set in the re-run process: the pin is in place

_SOURCE = r"""
/* time() starting at a fixed date and advancing with the real clock (see tests/game_calendar.py). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>

static long long offset;
static int ready;

time_t time(time_t *out) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (!ready) {
        const char *pinned = getenv("%(var)s");
        offset = (pinned ? atoll(pinned) : (long long) now.tv_sec) - (long long) now.tv_sec;
        ready = 1;
    }
    time_t value = (time_t) ((long long) now.tv_sec + offset);
    if (out) *out = value;
    return value;
}
"""


def source() -> str:
    return _SOURCE % {"var": PINNED_VAR}


def build_library() -> Path | None:
    """The preload library, compiled once per source into the temp folder; None without a C compiler."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    text = source()
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"maestromotif-game-calendar-{os.getuid()}-{digest}.so"
    if target.exists():
        return target
    work = Path(tempfile.mkdtemp(prefix="game-calendar-"))
    try:
        (work / "calendar.c").write_text(text)
        built = work / "calendar.so"
        result = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(work / "calendar.c")],
                                capture_output=True, text=True)
        if result.returncode != 0:
            return None
        os.replace(built, target)  # atomic: concurrent builders never see half a file
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def pinned_environment(library: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(p for p in (str(library), env.get("LD_PRELOAD", "")) if p)
    env[PINNED_VAR] = str(int(PINNED_DATE.timestamp()))
    env["TZ"] = "UTC"  # NetHack reads local time: the pinned noon is noon
    return env


def is_pinned() -> bool:
    return PINNED_VAR in os.environ


def moon_phase(when: dt.datetime) -> int:
    """NetHack 3.6's phase_of_the_moon(): 0 new moon, 4 full moon (hacklib.c)."""
    day_of_year = when.timetuple().tm_yday - 1
    golden = ((when.year - 1900) % 19) + 1
    epact = (11 * golden + 18) % 30
    if (epact == 25 and golden > 11) or epact == 24:
        epact += 1
    return ((((day_of_year + epact) * 6) + 11) % 177) // 22 & 7


def is_special_day(when: dt.datetime) -> bool:
    """A day on which NetHack changes a new game: full moon, new moon or Friday the 13th."""
    return moon_phase(when) in (0, 4) or (when.weekday() == 4 and when.day == 13)


def rerun_pinned() -> None:
    """Re-run this process's own command with the calendar pinned; returns only if it cannot be pinned
    (already pinned, MAESTROMOTIF_NO_CALENDAR_PIN set, or no C compiler)."""
    if is_pinned() or os.environ.get("MAESTROMOTIF_NO_CALENDAR_PIN"):
        return
    library = build_library()
    if library is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # sys.orig_argv keeps "-m module": the re-run imports from the same places
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], pinned_environment(library))
