"""The arithmetic precision of the policy network's forward passes (``scripts.main --precision``).

``fp32`` is the release's (and sample-factory's): everything in float32. ``bf16`` runs the policy network's
encoder and recurrent core under ``torch.autocast`` to bfloat16 (weights, gradients and the optimizer's state
stay float32; the heads, the losses, V-trace, the advantages and the value targets are computed in float32);
it pays on processors with bfloat16 instructions (AVX-512 BF16, AMX) and on GPUs that have them. ``auto``
takes ``bf16`` on a CPU run where the processor has them and ``fp32`` everywhere else (GPU runs keep the
release's fp32), with a one-line note saying why.

:func:`resolve_precision` turns the flag into the precision a run uses; an explicit ``bf16`` that the
processor or GPU cannot run raises :class:`PrecisionError` (the command line exits with status 2). Torch-free:
the CPU is read from ``/proc/cpuinfo`` (torch is imported only to ask about a GPU, or where that file is
missing), so the pipeline's plan can show the choice without loading torch. :data:`CPUINFO_ENV` names a file
read in its place: the way to see (and test) what this project does on a processor it does not run on, such as
one without bfloat16 instructions. It changes this project's choice only, not torch's kernels.

:func:`runnable_precision` is the benches' form: the precision a bench can time, fp32 with a note where the
requested one cannot run here.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

#: values of ``--precision``
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16")
#: ``/proc/cpuinfo`` flags of processors with bfloat16 arithmetic (AVX-512 BF16, Intel AMX)
CPU_BF16_FLAGS: tuple[str, ...] = ("avx512_bf16", "amx_bf16")
CPUINFO = Path("/proc/cpuinfo")
#: environment variable naming a file read in place of :data:`CPUINFO` (same format: ``flags : ...`` lines);
#: ``MAESTROMOTIF_CPUINFO=/dev/null`` is a processor without bfloat16 instructions
CPUINFO_ENV = "MAESTROMOTIF_CPUINFO"


class PrecisionError(ValueError):
    """``--precision bf16`` where it cannot run; the message names the flag."""


@dataclass(frozen=True)
class PrecisionChoice:
    precision: str  # "fp32" or "bf16"
    reason: str  # one line: why (printed in the run's log, saved in its configuration)


def cpu_bf16_flags(cpuinfo: Path | None = None) -> tuple[str, ...]:
    """The :data:`CPU_BF16_FLAGS` this processor has (``()`` when it has none): from ``cpuinfo``, else the file
    :data:`CPUINFO_ENV` names, else ``/proc/cpuinfo``, else torch's answer. A file named by :data:`CPUINFO_ENV`
    that cannot be read raises :class:`PrecisionError` (a mask that silently fell back would test nothing)."""
    masked = os.environ.get(CPUINFO_ENV) if cpuinfo is None else None
    path = Path(masked) if masked else (CPUINFO if cpuinfo is None else cpuinfo)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        if masked:
            raise PrecisionError(f"{CPUINFO_ENV}={masked}: cannot be read ({exc.strerror or exc})") from None
        return _torch_cpu_bf16_flags()
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line:
            flags.update(line.split(":", 1)[1].split())
    return tuple(f for f in CPU_BF16_FLAGS if f in flags)


def _torch_cpu_bf16_flags() -> tuple[str, ...]:
    try:
        import torch  # lazy: only where /proc/cpuinfo cannot be read (not Linux)

        found = []
        if torch.cpu._is_avx512_bf16_supported():
            found.append("avx512_bf16")
        if torch.cpu._is_amx_tile_supported():
            found.append("amx_bf16")
        return tuple(found)
    except Exception:  # noqa: BLE001 - private torch helpers: no answer means no bf16
        return ()


def cpu_supports_bf16() -> bool:
    """Whether this processor has bfloat16 instructions (:data:`CPU_BF16_FLAGS`)."""
    return bool(cpu_bf16_flags())


def gpu_supports_bf16() -> bool:
    """Whether the first CUDA GPU runs bfloat16 (Ampere and later)."""
    try:
        import torch  # lazy: only for a GPU run

        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    except Exception:  # noqa: BLE001 - no CUDA: no bf16 on it
        return False


def bf16_missing(device: str) -> str | None:
    """Why ``device`` (sample-factory's ``cpu`` or ``gpu``) cannot run bfloat16, in words; None where it can."""
    if device == "gpu":
        return None if gpu_supports_bf16() else "this GPU has no bfloat16 support (torch.cuda.is_bf16_supported() is False)"
    if cpu_bf16_flags():
        return None
    return (f"this processor has no bfloat16 instructions (none of {', '.join(CPU_BF16_FLAGS)} in "
            f"{os.environ.get(CPUINFO_ENV) or CPUINFO})")


def resolve_precision(requested: str, device: str) -> PrecisionChoice:
    """The precision a run on ``device`` (sample-factory's ``cpu`` or ``gpu``) uses for ``--precision requested``.

    Raises :class:`PrecisionError` for an unknown value, or for ``bf16`` on a processor or GPU without bfloat16.
    """
    if requested not in PRECISIONS:
        raise PrecisionError(f"--precision {requested!r}: expected one of {', '.join(PRECISIONS)}")
    if requested == "fp32":
        return PrecisionChoice("fp32", "fp32 (--precision fp32, the release's)")
    if device == "gpu":
        if requested == "auto":
            return PrecisionChoice("fp32", "fp32 (--precision auto on a GPU keeps the release's fp32)")
        missing = bf16_missing(device)
        if missing:
            raise PrecisionError(f"--precision bf16: {missing}; use --precision fp32")
        return PrecisionChoice("bf16", "bf16 autocast on the GPU (--precision bf16)")
    flags = cpu_bf16_flags()
    if flags:
        return PrecisionChoice("bf16", f"bf16 autocast on the CPU (--precision {requested}; the processor has "
                                       f"{' and '.join(flags)})")
    if requested == "auto":
        return PrecisionChoice("fp32", f"fp32 (--precision auto: the processor has no bfloat16 instructions, none of "
                                       f"{', '.join(CPU_BF16_FLAGS)})")
    raise PrecisionError(f"--precision bf16: {bf16_missing(device)}; use --precision auto (fp32 here) or fp32")


def runnable_precision(requested: str, device: str) -> tuple[str, str | None]:
    """What a bench times for ``--precision requested`` on ``device``: ``(requested, None)`` where this machine
    runs it (``auto`` is left to the run to resolve), else ``("fp32", note)``, the note one line saying why."""
    if requested not in PRECISIONS:
        raise PrecisionError(f"--precision {requested!r}: expected one of {', '.join(PRECISIONS)}")
    missing = bf16_missing(device) if requested == "bf16" else None
    return ("fp32", f"timing fp32 in place of bf16: {missing}") if missing else (requested, None)
