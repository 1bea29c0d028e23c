"""NetHack's clock, pinned, so that a report or an evaluation plays the same games whenever it runs.

NetHack (inside NLE, unchanged) reads the machine's local time: under a full moon every game starts with Luck +1,
under a new moon cockatrices are deadlier, on a Friday the 13th Luck is -1, and at night (22:00 to 05:59) and
midnight (00:00 to 00:59) some monsters hit harder. The same seeds therefore give other games on another date or
hour (docs/reliability.md). A pinned clock runs the process under libfaketime (PyPI's ``libfaketime`` bundles the
library): the process is executed again with the library preloaded and ``FAKETIME="@{when}"``, so its clock starts
at ``when`` and ticks from there. It is the whole process's clock: log times show the pinned date too. The library
preloaded is a copy of the bundled one with ``read_config_file`` made local (:func:`preload_library`): NetHack has a
function of that name, and the bundled library's would stand in for it.

``--game_clock real`` keeps the machine's clock (what the authors' release does).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Optional, Sequence

from common.atomic_io import atomic_write_bytes, user_cache_dir
from common.cli import MissingPackageError

#: the machine's own clock (the release's behaviour)
REAL = "real"
#: the default pin of the comparison tools: a Wednesday noon, moon phase 2 of 0-7 (neither new nor full)
DEFAULT_PINNED = "2026-11-18 12:00:00"
CLOCK_FORMAT = "%Y-%m-%d %H:%M:%S"
#: set in the re-executed process: the pin it runs under
ACTIVE_VAR = "MAESTROMOTIF_GAME_CLOCK"
#: a pinned process whose clock reads further than this from the pin did not get the library
_TOLERANCE = timedelta(hours=12)

FLAG_HELP = (f"NetHack's clock: '{REAL}' (the machine's) or a local time 'YYYY-MM-DD HH:MM:SS' that the process's "
             "clock starts from (libfaketime; the process is executed again under it, and its log times show that "
             "date). The moon phase, Friday the 13th and the hour change Luck and monsters, so the same seeds play "
             "other games on another date or hour")


def parse_game_clock(value: str, flag: str = "--game_clock") -> Optional[datetime]:
    """``None`` for :data:`REAL`, else the pinned local time; ``ValueError`` naming ``flag``."""
    if value == REAL:
        return None
    try:
        return datetime.strptime(value.strip(), CLOCK_FORMAT)
    except ValueError:
        raise ValueError(f"{flag} {value!r}: expected '{REAL}' or a local time 'YYYY-MM-DD HH:MM:SS' "
                         f"(for example '{DEFAULT_PINNED}')") from None


def moon_phase(when: datetime) -> int:
    """NetHack's ``phase_of_the_moon()`` (hacklib.c): 0 new moon, 4 full moon, 0-7."""
    day_of_year = when.timetuple().tm_yday - 1
    golden = ((when.year - 1900) % 19) + 1
    epact = (11 * golden + 18) % 30
    if (epact == 25 and golden > 11) or epact == 24:
        epact += 1
    return ((((day_of_year + epact) * 6) + 11) % 177 // 22) & 7


def describe(when: datetime) -> str:
    """What NetHack makes of ``when``: the moon, Friday the 13th, night and midnight."""
    phase = moon_phase(when)
    moon = {0: "new moon", 4: "full moon (Luck +1)"}.get(phase, f"moon phase {phase} of 0-7, neither new nor full")
    parts = [when.strftime(CLOCK_FORMAT), when.strftime("%A"), moon]
    if when.day == 13 and when.weekday() == 4:
        parts.append("Friday the 13th (Luck -1)")
    if when.hour == 0:
        parts.append("midnight")
    elif when.hour < 6 or when.hour >= 22:
        parts.append("night")
    return ", ".join(parts)


def _bundled_library() -> Path:
    """The libfaketime shared library bundled in PyPI's ``libfaketime`` package (found without importing it)."""
    spec = importlib.util.find_spec("libfaketime")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackageError("a pinned --game_clock needs the libfaketime package: pip install libfaketime==2.1.0 "
                                  f"(or pass --game_clock {REAL})")
    if not sys.platform.startswith("linux"):
        raise MissingPackageError(f"a pinned --game_clock preloads a Linux library; on {sys.platform} pass "
                                  f"--game_clock {REAL}")
    library = Path(list(spec.submodule_search_locations)[0]) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"
    if not library.is_file():
        raise MissingPackageError(f"the libfaketime package has no {library}; reinstall it: pip install "
                                  "--force-reinstall libfaketime==2.1.0")
    return library


#: a function libfaketime exports that NetHack defines too (files.c: it reads the options file); preloaded, the
#: library's would stand in for NetHack's, and the game would start without its options ("Who are you?")
CLASHING_SYMBOLS = (b"read_config_file",)
_SHT_DYNSYM, _STB_LOCAL, _STV_HIDDEN = 11, 0, 2


def hide_dynamic_symbols(elf: bytes, names: Sequence[bytes]) -> bytes:
    """``elf`` (an x86-64 shared library) with ``names`` made local and hidden in its dynamic symbol table: the
    dynamic linker then binds them inside the library only (its own calls still reach them) and never lends them
    to other objects. ``ValueError`` if one is missing."""
    data = bytearray(elf)
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    u16 = lambda at: int.from_bytes(data[at:at + 2], "little")  # noqa: E731
    u32 = lambda at: int.from_bytes(data[at:at + 4], "little")  # noqa: E731
    u64 = lambda at: int.from_bytes(data[at:at + 8], "little")  # noqa: E731
    shoff, shentsize, shnum = u64(0x28), u16(0x3A), u16(0x3C)
    sections = [shoff + i * shentsize for i in range(shnum)]
    found: set[bytes] = set()
    for sh in sections:
        if u32(sh + 4) != _SHT_DYNSYM:
            continue
        symbols, size, entsize = u64(sh + 0x18), u64(sh + 0x20), u64(sh + 0x38)
        strings = u64(sections[u32(sh + 0x28)] + 0x18)
        for sym in range(symbols, symbols + size, entsize):
            start = strings + u32(sym)
            name = bytes(data[start:data.index(0, start)])
            if name in names:
                data[sym + 4] = (_STB_LOCAL << 4) | (data[sym + 4] & 0xF)
                data[sym + 5] = (data[sym + 5] & ~0x3) | _STV_HIDDEN
                found.add(name)
    missing = [n.decode() for n in names if n not in found]
    if missing:
        raise ValueError(f"no dynamic symbol {', '.join(missing)}")
    return bytes(data)


def preload_library() -> Path:
    """A copy of the bundled libfaketime whose :data:`CLASHING_SYMBOLS` are hidden, cached by the original's
    content under the temporary folder (the installed package is left as it is)."""
    bundled = _bundled_library()
    original = bundled.read_bytes()
    digest = hashlib.sha1(original).hexdigest()[:10]
    target = user_cache_dir() / "libfaketime" / digest / "libfaketime.so.1"
    if not target.is_file():
        try:
            patched = hide_dynamic_symbols(original, CLASHING_SYMBOLS)
        except ValueError as exc:
            raise MissingPackageError(f"{bundled}: {exc}; install libfaketime==2.1.0") from exc
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, patched)
    return target


def pinned_environment(when: datetime, environ: Optional[dict] = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the library preloaded and its clock starting at ``when``."""
    env = dict(os.environ if environ is None else environ)
    library = str(preload_library())
    env["LD_PRELOAD"] = ":".join(p for p in (library, env.get("LD_PRELOAD", "")) if p)
    env["FAKETIME"] = "@" + when.strftime(CLOCK_FORMAT)
    # timeouts and sample-factory's timers keep the real monotonic clock (both names: old and new libfaketime)
    env["FAKETIME_DONT_FAKE_MONOTONIC"] = env["DONT_FAKE_MONOTONIC"] = "1"
    env[ACTIVE_VAR] = when.strftime(CLOCK_FORMAT)
    return env


def runs_under(when: datetime) -> bool:
    """Whether this process already runs on the clock pinned at ``when``. ``RuntimeError`` when it was started to
    (:data:`ACTIVE_VAR` says so) but its clock reads otherwise: the library did not load."""
    if os.environ.get(ACTIVE_VAR) != when.strftime(CLOCK_FORMAT):
        return False
    now = datetime.now()
    if not when <= now + timedelta(seconds=5) <= when + _TOLERANCE:
        raise RuntimeError(f"the process was started with its clock pinned at {when:{CLOCK_FORMAT}}, but it reads "
                           f"{now:{CLOCK_FORMAT}}: libfaketime did not load (LD_PRELOAD={os.environ.get('LD_PRELOAD')})")
    return True


def active_game_clock() -> str:
    """The clock this process's games are played on, for results files: ``pinned at ...`` (--game_clock) or
    ``real: ...`` (the machine's, at the time of the call), each with what NetHack makes of it."""
    pinned = os.environ.get(ACTIVE_VAR)
    if pinned:
        return f"pinned at {describe(datetime.strptime(pinned, CLOCK_FORMAT))}"
    return f"{REAL}: {describe(datetime.now().replace(microsecond=0))}"


def rerun_under(when: datetime, module: str, argv: Optional[Sequence[str]]) -> int:
    """Runs this command again with its clock pinned at ``when``.

    From the command line (``argv`` None) the process replaces itself (``os.execve``; signals reach the new one
    directly) and this never returns. Called in-process with ``argv`` (a test, another script), it runs
    ``python -m {module} {argv}`` and returns its exit status."""
    env = pinned_environment(when)
    print(f"NetHack's clock pinned at {describe(when)} (--game_clock; libfaketime): running the command again "
          "under it", flush=True)
    if argv is None:
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    return subprocess.run([sys.executable, "-m", module, *argv], env=env).returncode
