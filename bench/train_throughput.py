"""Skill-training throughput of ``python -m scripts.main``: this tree against a baseline commit, or one policy
encoder against the other in this tree, in one run.

Both versions train the same skill policy with the same settings (those of
``scripts.pipeline --preset smoke``: ``--num_workers`` rollout workers, ``--num_envs_per_worker`` envs each,
batch 512, rollout 32, the exploration policy over skills, five reward models) on the same
five tiny reward models, one after the other on this machine. The baseline is checked out
with ``git worktree`` (``--baseline_ref``, default the commit on which the throughput work
started) and runs with the same Python environment. With ``--baseline_encoder_arch`` the baseline is
this tree itself, trained with that ``--encoder_arch`` (no worktree): ``--encoder_arch release
--baseline_encoder_arch project`` compares the release's network with the project's under the
same settings. With ``--baseline_precision`` the baseline is this tree trained with that ``--precision``:
``--encoder_arch release --precision bf16 --baseline_precision fp32`` pairs bfloat16 autocast against float32
on the release's network (both flags can be given together). With ``--baseline_ref_with_these_flags`` the
baseline commit runs with this tree's ``--encoder_arch``, ``--precision`` and ``--worker_num_splits``: a change to
the bf16 path measured against the commit before it.

For each run it prints the sustained env steps/s (sample-factory's 10-second FPS reports
after ``--warmup_reports``, averaged) and the memory of every process of the run, sampled
every second: the peak resident set size of the rollout workers (the processes that load
NetHack games, told apart through ``/proc/PID/maps`` on Linux), of the other processes, and how much each rollout worker grew between
the second and the last quarter of the run (medians) (a leak shows as growth on long runs: use
``--steps`` to run for as long as you want to watch).

Each run's CPU time (user + system of all its processes, start-up included) is printed too: unlike
env steps/s it hardly depends on what else the machine runs (``cpu_ms_per_step`` in the JSON).

The CPU time is also split by process (``cpu_ms_per_step_by_role``: learner, inference worker, rollout
workers, the rest), each process's as last sampled, told apart by sample-factory's log lines naming their pids.

It ends with one JSON line (``train_speedup``, ``baseline_fps``, ``fps``, ``cpu_ms_per_step``, ``peak_rss_mb``,
...) for scripts to read. ``--device gpu`` runs the learner and inference on the GPU (both versions).

Usage::

    python -m bench.train_throughput [--steps 40000] [--baseline_ref 9de1a54] [--num_envs_per_worker 4]
    python -m bench.train_throughput --long_run_config --steps 300000 --repeats 2   # the long runs' configuration
        # beside the smoke preset's settings, CPU per env step by part (bench.long_run)
    python -m bench.train_throughput --no_baseline --device gpu     # only this tree, on a GPU
    python -m bench.train_throughput --encoder_arch release --baseline_encoder_arch project \\
        --num_envs_per_worker 8 --max_episode_steps 500 --repeats 2    # the two encoders, smoke preset
    python -m bench.train_throughput --encoder_arch release --precision bf16 --baseline_precision fp32 \\
        --num_envs_per_worker 8 --max_episode_steps 500 --repeats 3    # bf16 against fp32, smoke preset
    python -m bench.train_throughput --encoder_arch release --precision bf16 --worker_num_splits 1 \\
        --baseline_worker_num_splits 2 --num_envs_per_worker 8 --max_episode_steps 500 --repeats 2  # inference batching
    python -m bench.train_throughput --encoder_arch release --precision bf16 --baseline_precision bf16 \\
        --num_envs_per_worker 16 --baseline_num_envs_per_worker 8 --max_episode_steps 500 --repeats 2  # games per worker
    python -m bench.train_throughput --encoder_arch release --precision bf16 --baseline_precision bf16 \\
        --worker_num_splits 1 --num_envs_per_worker 16 --num_workers 3 --baseline_num_workers 2 \\
        --max_episode_steps 500 --repeats 3    # rollout workers

With a same-tree pair the JSON line also holds ``baseline_precision`` (and the baseline's other flags) and
``cpu_ratio`` (the baseline's CPU ms per env step over this tree's: the speed-up that does not depend on the
machine's other load); when the two precisions differ, ``precision_speedup`` too (the env steps/s ratio, same as
``train_speedup``).

A ``--precision`` or ``--baseline_precision`` this machine cannot run (bf16 on a processor without bfloat16
instructions) is timed as fp32, said in one line and in the JSON line's ``precision_note``; a pair that then
differs in nothing (bf16 against fp32) times this tree alone.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench import long_run
from bench.fixtures import machine_description
from common.precision import PrecisionError, runnable_precision

#: values of scripts.main's --encoder_arch (rl_baseline.models.cdgpt5.ENCODER_ARCHS; not imported: that pulls torch in)
ENCODER_ARCHS = ("project", "release")
PRECISIONS = ("auto", "fp32", "bf16")  # scripts.main's --precision (common.precision.PRECISIONS)

REPO = Path(__file__).resolve().parents[1]
FPS_RE = re.compile(r"Fps is \(10 sec: ([0-9.nan]+)")
#: an FPS report's time and the env steps collected by then
REPORT_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[\d+\] Fps is .*?Total num frames: (\d+)")
#: sample-factory's last line: env steps collected and the rate over the whole run
OVERALL_FPS_RE = re.compile(r"Collected \{0: \d+\}, FPS: ([0-9.]+)")
# sample-factory's line naming each worker process: "LearnerWorker_p0\tpid 123\tparent 100"
WORKER_PID_RE = re.compile(r"(LearnerWorker|InferenceWorker|ROLLOUT worker)[^\t\n]*\tpid (\d+)")
ROLES = {"LearnerWorker": "learner", "InferenceWorker": "inference", "ROLLOUT worker": "rollout"}
# the commit whose skill training was profiled when the throughput work started (LSTM core, 275-460 steps/s)
DEFAULT_BASELINE = "9de1a54"


@dataclass
class RunResult:
    label: str
    fps: float
    reports: int
    wall_s: float
    cpu_s: float  # user + system time of the run's processes, start-up included
    rollout_peak_mb: list[float] = field(default_factory=list)
    rollout_growth_mb: list[float] = field(default_factory=list)
    other_peak_mb: list[float] = field(default_factory=list)
    # CPU seconds by role (learner, inference, rollout, other: the main process and the rest), as last sampled
    cpu_by_role: dict[str, float] = field(default_factory=dict)
    # the steady window: from the FPS report after the warm-up to the last one (start-up and shutdown left out):
    # its env steps, its CPU seconds by role and, with a parts folder, by common.part_times part
    steady_steps: int = 0
    steady_cpu_by_role: dict[str, float] = field(default_factory=dict)
    steady_parts: dict[str, float] = field(default_factory=dict)


def build_reward_dirs(code_dir: Path, root: Path) -> list[str]:
    """Five tiny reward models written by ``code_dir``'s own code (so that version reads them): its
    ``bench.fixtures``, or where an older commit kept the builder (its test suite)."""
    script = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, '.')\n"
        "try:\n    from bench.fixtures import build_tiny_reward_dirs\n"
        "except ImportError:\n    from tests.test_training import build_tiny_reward_dirs\n"
        f"print(json.dumps(build_tiny_reward_dirs(Path({str(root)!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=code_dir, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"building the reward models failed in {code_dir}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class MemorySampler(threading.Thread):
    """Samples the resident memory of every process below ``pid`` once a second."""

    def __init__(self, pid: int, parts_folder: Path | None = None) -> None:
        super().__init__(daemon=True)
        self.parts_folder = parts_folder
        # (wall clock, CPU seconds by pid, the rollout workers' parts) once a second: the steady window's ends
        self.snapshots: list[tuple[float, dict[int, float], dict[str, float]]] = []
        import psutil  # lazy: comes with sample-factory, not a requirement of its own; only while a run is sampled

        self.root = psutil.Process(pid)
        self.samples: dict[int, list[tuple[float, float]]] = {}
        self.games: dict[int, int] = {}  # NetHack library segments mapped by each process (Linux)
        self.cpu: dict[int, float] = {}  # user + system CPU seconds of each process, as last sampled
        # the isolated children that run the policy over skills (bubblewrap and the program inside), told apart by
        # their command line when first seen
        self.sandboxed: set[int] = set()
        self._seen: set[int] = set()
        self.stop = threading.Event()

    @staticmethod
    def _games(proc) -> int:
        # NLE loads a private in-memory copy of libnethack ("memfd:nle.so") for every game it runs:
        # only rollout workers have any (the other processes build no game, or only import NLE)
        try:
            with open(f"/proc/{proc.pid}/maps") as fh:
                return sum(1 for line in fh if "memfd:nle" in line)
        except OSError:
            return 0

    def run(self) -> None:
        import psutil  # lazy: comes with sample-factory, as above

        while not self.stop.is_set():
            now = time.monotonic()
            try:
                children = self.root.children(recursive=True)
                times = self.root.cpu_times()
                self.cpu[self.root.pid] = times.user + times.system  # the runner (main) process
            except psutil.Error:
                break
            for proc in children:
                try:
                    if proc.pid not in self._seen:
                        self._seen.add(proc.pid)
                        words = " ".join(proc.cmdline())
                        if "bwrap" in words or "policy_host" in words:
                            self.sandboxed.add(proc.pid)
                    rss = proc.memory_info().rss / 2**20
                    times = proc.cpu_times()
                    self.cpu[proc.pid] = times.user + times.system
                    if len(self.samples.get(proc.pid, ())) % 10 == 0:  # workers start their games lazily
                        self.games[proc.pid] = max(self.games.get(proc.pid, 0), self._games(proc))
                except psutil.Error:
                    continue
                self.samples.setdefault(proc.pid, []).append((now, rss))
            parts = long_run.read_rollout_parts(self.parts_folder) if self.parts_folder is not None else {}
            self.snapshots.append((time.time(), dict(self.cpu), parts))
            self.stop.wait(1.0)

    def cpu_by_role(self, log_text: str, cpu: dict[int, float] | None = None) -> dict[str, float]:
        """CPU seconds per role, the processes told apart by sample-factory's log lines naming their pids."""
        role_of = {int(pid): ROLES[kind] for kind, pid in WORKER_PID_RE.findall(log_text)}
        role_of.update({pid: "generated_code" for pid in self.sandboxed})
        out = {"learner": 0.0, "inference": 0.0, "rollout": 0.0, "generated_code": 0.0, "other": 0.0}
        for pid, seconds in (self.cpu if cpu is None else cpu).items():
            out[role_of.get(pid, "other")] += seconds
        return out

    def steady(self, log_text: str, warmup_reports: int) -> tuple[int, dict[str, float], dict[str, float]]:
        """Env steps, CPU seconds by role and by part between the FPS report after the warm-up and the last one
        (each end the last snapshot taken before it); zeros where the run made too few reports."""
        reports = report_times(log_text)
        if len(reports) < warmup_reports + 2 or not self.snapshots:
            return 0, {}, {}

        def at(when: float) -> tuple[dict[int, float], dict[str, float]]:
            before = [snap for snap in self.snapshots if snap[0] <= when] or self.snapshots[:1]
            return before[-1][1], before[-1][2]

        (t0, frames0), (t1, frames1) = reports[warmup_reports], reports[-1]
        (cpu0, parts0), (cpu1, parts1) = at(t0), at(t1)
        delta = {pid: seconds - cpu0.get(pid, 0.0) for pid, seconds in cpu1.items()}
        parts = {part: seconds - parts0.get(part, 0.0) for part, seconds in parts1.items()}
        return frames1 - frames0, self.cpu_by_role(log_text, delta), parts

    def summary(self) -> tuple[list[float], list[float], list[float]]:
        rollout_peak, growth, other = [], [], []
        for pid, series in self.samples.items():
            values = [rss for _, rss in series]
            if len(values) < 3:
                continue
            if self.games.get(pid, 0) > 0:
                rollout_peak.append(max(values))
                # medians of the second and the last quarter: the final samples of a worker that is
                # shutting down (memory already freed) or starting up do not count as a trend
                n = len(values)
                early, late = values[n // 4 : n // 2] or values[:1], values[3 * n // 4 :] or values[-1:]
                growth.append(float(np.median(late) - np.median(early)))
            else:
                other.append(max(values))
        return sorted(rollout_peak), growth, sorted(other)


def train_run(label: str, code_dir: Path, reward_dirs: list[str], args: argparse.Namespace, workdir: Path,
              num_envs_per_worker: int = 4, encoder_arch: str | None = None, precision: str | None = None,
              worker_num_splits: int | None = None, num_workers: int = 2,
              config: list[str] | None = None, parts_folder: Path | None = None) -> RunResult:
    """One training run of ``args.steps`` env steps; ``config``: a whole configuration's ``scripts.main`` flags
    (``--long_run_config``) in place of this bench's settings, the run's folder and length set here."""
    if config is not None:
        for flag, value in (("--train_dir", str(workdir)), ("--experiment", label),
                            ("--train_for_env_steps", str(args.steps))):
            config = long_run.with_flag(config, flag, value)
        cmd = [sys.executable, "-m", "scripts.main", *config, "--restart_behavior", "overwrite"]  # its checkpoints and best-model saves as the configuration's
    else:
        cmd = [
            sys.executable, "-m", "scripts.main", "--algo", "APPO", "--device", args.device,
            "--num_workers", str(num_workers), "--num_envs_per_worker", str(num_envs_per_worker),
            "--batch_size", "512", "--rollout", "32", "--reward_scale", "0.1", "--obs_scale", "255.0",
            "--max_episode_steps", str(args.max_episode_steps), "--seed", "2", "--code_seed", "42",
            "--reward_dir", repr(reward_dirs), "--extrinsic_reward", "0.0", "--llm_reward", "0.1",
            "--train_for_env_steps", str(args.steps), "--train_dir", str(workdir), "--experiment", label,
            "--restart_behavior", "overwrite", "--save_every_sec", "100000", "--experiment_summaries_interval", "1000",
        ]
    if encoder_arch is not None:  # only when asked: older baseline commits do not know the flag
        cmd += ["--encoder_arch", encoder_arch]
    if precision is not None:  # likewise
        cmd += ["--precision", precision]
    if worker_num_splits is not None:  # sample-factory's own flag (its default: 2)
        cmd += ["--worker_num_splits", str(worker_num_splits)]
    log = workdir / f"{label}.log"
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cpu0 = _children_cpu_s()
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, cwd=code_dir, stdout=fh, stderr=subprocess.STDOUT)
        sampler = MemorySampler(proc.pid, parts_folder)
        sampler.start()
        rc = proc.wait()
        sampler.stop.set()
        sampler.join()
    wall = time.perf_counter() - t0
    cpu = _children_cpu_s() - cpu0
    text = log.read_text()
    if rc != 0:
        sys.stderr.write(text[-4000:])
        raise SystemExit(f"{label}: training run failed with status {rc} (log {log})")
    fps = [float(x) for x in FPS_RE.findall(text) if x != "nan"]
    sustained = fps[args.warmup_reports:] or fps
    if sustained:
        rate = float(np.mean(sustained))
    else:  # ended before sample-factory's first 10-second report: its whole-run figure, start-up included
        overall = OVERALL_FPS_RE.findall(text)
        rate = float(overall[-1]) if overall else float("nan")
        print(f"{label}: no 10-second FPS report (a run this short ends before one); env steps/s is sample-factory's "
              f"figure over the whole run, start-up included: use a larger --steps for a sustained rate", flush=True)
    peak, growth, other = sampler.summary()
    steady_steps, steady_roles, steady_parts = sampler.steady(text, args.warmup_reports)
    return RunResult(label, rate, len(sustained), wall, cpu, peak, growth, other, sampler.cpu_by_role(text),
                     steady_steps, steady_roles, steady_parts)


def report_times(log_text: str) -> list[tuple[float, int]]:
    """(wall-clock time, env steps so far) of each of sample-factory's FPS reports in a run's log."""
    out = []
    for stamp, frames in REPORT_RE.findall(log_text):
        when = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as logged
        out.append((when, int(frames)))
    return out


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of every finished descendant process so far: a run's cost that does not
    depend on what else the machine runs (its env steps/s does)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _by_role(runs: list[RunResult], steps: int) -> dict[str, float]:
    """Median CPU ms per env step of each role over ``runs``."""
    return {k: round(1000 * float(np.median([r.cpu_by_role.get(k, 0.0) for r in runs])) / steps, 3)
            for k in ("learner", "inference", "rollout", "other")}


def _mb(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values) if values else "n/a"


def _flag_words(encoder_arch: str | None, precision: str | None, worker_num_splits: int | None) -> list[str]:
    """The scripts.main flags a run is given beyond the shared settings, as the bench's labels name them."""
    return (([f"--encoder_arch {encoder_arch}"] if encoder_arch else [])
            + ([f"--precision {precision}"] if precision else [])
            + ([f"--worker_num_splits {worker_num_splits}"] if worker_num_splits else []))


def fit_precisions_to_machine(args: argparse.Namespace) -> str | None:
    """Puts fp32 in place of a ``--precision`` or ``--baseline_precision`` this machine cannot run
    (:func:`common.precision.runnable_precision`); a same-tree pair left with nothing to compare (it differed in
    precision alone) becomes this tree alone. Returns the one-line note saying so, None when nothing changed."""
    asked = (args.precision, args.baseline_precision)
    notes: list[str] = []
    for flag in ("precision", "baseline_precision"):
        value = getattr(args, flag)
        if value is not None:
            runnable, note = runnable_precision(value, args.device)
            if note:
                setattr(args, flag, runnable)
                notes.append(note)
    if not notes:
        return None
    note = notes[0]
    current = args.precision or "fp32"  # scripts.main's default
    if args.baseline_precision == current and (asked[0] or "fp32") != asked[1]:
        args.baseline_precision = None  # a precision pair of fp32 and fp32
        others = ((args.baseline_encoder_arch, args.encoder_arch), (args.baseline_worker_num_splits,
                  args.worker_num_splits), (args.baseline_num_envs_per_worker, args.num_envs_per_worker),
                  (args.baseline_num_workers, args.num_workers))
        if all(base is None or base == current for base, current in others):
            args.no_baseline = True
            args.baseline_encoder_arch = args.baseline_worker_num_splits = None
            args.baseline_num_envs_per_worker = args.baseline_num_workers = None
            note += "; the pair would time the same runs twice, so this tree is timed alone"
    return note


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40_000, help="env steps per training run (default: %(default)s)")
    p.add_argument("--baseline_ref", type=str, default=DEFAULT_BASELINE,
                   help="git commit or branch to compare with, checked out in a temporary worktree "
                        "(default: %(default)s, where the throughput work started)")
    p.add_argument("--no_baseline", action="store_true", help="measure this tree only")
    p.add_argument("--baseline_ref_with_these_flags", action="store_true",
                   help="run the --baseline_ref commit with this tree's --encoder_arch, --precision and "
                        "--worker_num_splits too (a commit that knows them): two commits at the same settings, "
                        "such as a change to the bf16 path measured against the commit before it")
    p.add_argument("--encoder_arch", type=str, default=None, choices=ENCODER_ARCHS,
                   help="policy encoder of this tree's runs (default: scripts.main's default)")
    p.add_argument("--baseline_encoder_arch", type=str, default=None, choices=ENCODER_ARCHS,
                   help="compare two policy encoders instead of two commits: the baseline runs are this tree "
                        "with --encoder_arch set to this value (no git worktree; --baseline_ref is not used), "
                        "with the same settings, alternated with this tree's runs")
    p.add_argument("--precision", type=str, default=None, choices=PRECISIONS,
                   help="scripts.main's --precision for this tree's runs (default: its default, fp32)")
    p.add_argument("--baseline_precision", type=str, default=None, choices=PRECISIONS,
                   help="compare two precisions: the baseline runs are this tree with --precision set to this "
                        "value (no git worktree), alternated with this tree's runs; may go with "
                        "--baseline_encoder_arch")
    p.add_argument("--worker_num_splits", type=int, default=None,
                   help="sample-factory's --worker_num_splits for this tree's runs: how many groups each rollout "
                        "worker's games are split into, each sending its own inference request (default: "
                        "sample-factory's, 2). 1 sends all of a worker's games in one request: larger inference "
                        "batches, no overlap of stepping and inference")
    p.add_argument("--baseline_worker_num_splits", type=int, default=None,
                   help="--worker_num_splits of the baseline's runs; given, the baseline is this tree with it "
                        "(--worker_num_splits 1 --baseline_worker_num_splits 2 pairs the two)")
    p.add_argument("--repeats", type=int, default=1,
                   help="runs of each version, alternated; medians are reported (default: %(default)s)")
    p.add_argument("--num_workers", type=int, default=2,
                   help="rollout worker processes of this tree's runs (default: %(default)s)")
    p.add_argument("--baseline_num_workers", type=int, default=None,
                   help="rollout worker processes of the baseline's runs (default: --num_workers); on this tree "
                        "alone, add a same-tree flag such as --baseline_precision equal to --precision")
    p.add_argument("--num_envs_per_worker", type=int, default=4,
                   help="environments per rollout worker of this tree's runs (default: %(default)s; the smoke "
                        "preset uses 16)")
    p.add_argument("--baseline_num_envs_per_worker", type=int, default=None,
                   help="environments per rollout worker of the baseline's runs (default: --num_envs_per_worker; "
                        "4 was the smoke preset's at 9de1a54, so --num_envs_per_worker 8 "
                        "--baseline_num_envs_per_worker 4 compares the smoke preset then and now; on this tree "
                        "alone, add a same-tree flag such as --baseline_precision equal to --precision)")
    p.add_argument("--max_episode_steps", type=int, default=2000, help="episode step limit (default: %(default)s)")
    p.add_argument("--warmup_reports", type=int, default=2,
                   help="10-second FPS reports skipped as warm-up (default: %(default)s)")
    p.add_argument("--device", type=str, default="cpu", choices=("cpu", "gpu"),
                   help="learner and inference device of both runs (default: %(default)s)")
    p.add_argument("--long_run_config", action="store_true",
                   help="time the long runs' configuration (the learn preset, 10,000-step episodes, the three levers, "
                        "five reward models of the release's network) beside the smoke preset's settings, "
                        "alternated --repeats times, with each env step's CPU time split by part (bench.long_run); "
                        "the other flags but --steps, --repeats, --warmup_reports and --device do not apply")
    p.add_argument("--long_run_in_process", action="store_true",
                   help="with --long_run_config: time a third configuration, the long one with the policy over "
                        "skills in-process (--trust_generated_code True): what its sandbox costs a training run")
    p.add_argument("--long_run_games_apart", action="store_true",
                   help="with --long_run_config: time one more configuration, the long one with each game its own "
                        "environment (--num_envs_per_worker 16 --games_per_env 1, one request to the sandbox a game "
                        "and step): what stepping a worker's games together gives")
    return p


def main() -> None:
    p = build_parser()
    args = p.parse_args()
    if args.steps < 5000:
        p.error("--steps must be at least 5000 (a few FPS reports are needed)")
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    for extra in ("long_run_in_process", "long_run_games_apart"):
        if getattr(args, extra) and not args.long_run_config:
            p.error(f"--{extra} adds a configuration to --long_run_config: give both")
    if args.long_run_config:
        long_run.run(args, train_run, build_reward_dirs, REPO)
        return
    if args.baseline_encoder_arch is not None and args.no_baseline:
        p.error("--baseline_encoder_arch names the baseline's encoder: it cannot go with --no_baseline")
    if args.baseline_precision is not None and args.no_baseline:
        p.error("--baseline_precision names the baseline's precision: it cannot go with --no_baseline")
    if args.baseline_worker_num_splits is not None and args.no_baseline:
        p.error("--baseline_worker_num_splits names the baseline's splits: it cannot go with --no_baseline")
    for flag in ("worker_num_splits", "baseline_worker_num_splits"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            p.error(f"--{flag} must be at least 1")
    try:
        precision_note = fit_precisions_to_machine(args)
    except PrecisionError as exc:  # MAESTROMOTIF_CPUINFO names a file that cannot be read
        p.error(str(exc))
    if precision_note:
        print(f"note: {precision_note}", flush=True)
    same_tree = (args.baseline_encoder_arch is not None or args.baseline_precision is not None
                 or args.baseline_worker_num_splits is not None)
    if args.baseline_ref_with_these_flags and (same_tree or args.no_baseline):
        p.error("--baseline_ref_with_these_flags runs the --baseline_ref commit: it cannot go with --no_baseline or a "
                "--baseline_* flag that makes this tree the baseline")
    # a same-tree baseline differs in what its --baseline_* flags say and shares this tree's other flags
    base_arch = (args.baseline_encoder_arch or args.encoder_arch) if same_tree else args.baseline_encoder_arch
    base_precision = (args.baseline_precision or args.precision) if same_tree else args.baseline_precision
    base_splits = (args.baseline_worker_num_splits or args.worker_num_splits) if same_tree else None
    baseline_name = " ".join(_flag_words(base_arch, base_precision, base_splits)) if same_tree else args.baseline_ref
    if args.baseline_ref_with_these_flags:  # the commit, with this tree's flags
        base_arch, base_precision, base_splits = args.encoder_arch, args.precision, args.worker_num_splits
        same_flags = " ".join(_flag_words(base_arch, base_precision, base_splits))
        baseline_name = f"{args.baseline_ref} ({same_flags})" if same_flags else args.baseline_ref

    base_envs = args.baseline_num_envs_per_worker or args.num_envs_per_worker
    base_workers = args.baseline_num_workers or args.num_workers
    # a same-tree pair of game or worker counts: they are part of what it compares, so both labels name them
    pairs_games = same_tree and base_envs != args.num_envs_per_worker
    pairs_workers = same_tree and base_workers != args.num_workers
    if pairs_games:
        baseline_name = f"{baseline_name} --num_envs_per_worker {base_envs}".strip()
    if pairs_workers:
        baseline_name = f"{baseline_name} --num_workers {base_workers}".strip()
    if base_envs < 1 or args.num_envs_per_worker < 1:
        p.error("--num_envs_per_worker and --baseline_num_envs_per_worker must be at least 1")
    if base_workers < 1 or args.num_workers < 1:
        p.error("--num_workers and --baseline_num_workers must be at least 1")
    current_flags = _flag_words(args.encoder_arch, args.precision, args.worker_num_splits)
    if pairs_games:
        current_flags.append(f"--num_envs_per_worker {args.num_envs_per_worker}")
    if pairs_workers:
        current_flags.append(f"--num_workers {args.num_workers}")
    current_name = f" ({' '.join(current_flags)})" if current_flags else ""
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        tmp_path = Path(tmp)
        baseline_dir = None
        try:
            if same_tree:
                baseline_dir = REPO
            elif not args.no_baseline:
                baseline_dir = tmp_path / "baseline"
                out = subprocess.run(["git", "worktree", "add", "--detach", str(baseline_dir), args.baseline_ref],
                                     cwd=REPO, capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"--baseline_ref {args.baseline_ref}: git worktree failed: {out.stderr.strip()}")
            # reward models written by the oldest code read by every version
            dirs = build_reward_dirs(baseline_dir or REPO, tmp_path / "rewards")
            for rep in range(args.repeats):  # alternated, so a change of machine load hits both
                if baseline_dir is not None:
                    print(f"baseline {baseline_name}: training {args.steps} env steps ...", flush=True)
                    results.append(train_run("baseline", baseline_dir, dirs, args, tmp_path / "runs", base_envs,
                                             base_arch, base_precision, base_splits, base_workers))
                print(f"this tree{current_name}: training {args.steps} env steps ...", flush=True)
                results.append(train_run("current", REPO, dirs, args, tmp_path / "runs", args.num_envs_per_worker,
                                         args.encoder_arch, args.precision, args.worker_num_splits,
                                         args.num_workers))
        finally:
            if baseline_dir is not None and not same_tree:
                subprocess.run(["git", "worktree", "remove", "--force", str(baseline_dir)], cwd=REPO,
                               capture_output=True)

    machine = machine_description()
    envs = (f"{args.num_envs_per_worker} envs" if base_envs == args.num_envs_per_worker else
            f"{args.num_envs_per_worker} envs (baseline {base_envs})")
    workers = (f"{args.num_workers} workers" if base_workers == args.num_workers else
               f"{args.num_workers} workers (baseline {base_workers})")
    print(f"\nmachine: {machine}; {envs} x {workers}, batch 512, rollout 32, episodes of at most "
          f"{args.max_episode_steps} steps, device {args.device}")
    if same_tree:
        print(f"baseline: this tree with {baseline_name or 'the defaults'}; current: this tree with "
              f"{' '.join(current_flags) or 'the defaults'}")
    print("| run | env steps/s | FPS reports | wall s | CPU s | rollout worker peak RSS MB | growth MB | "
          "other processes MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.label} | {r.fps:,.0f} | {r.reports} | {r.wall_s:.0f} | {r.cpu_s:.0f} | {_mb(r.rollout_peak_mb)} | "
              f"{_mb(r.rollout_growth_mb)} | {_mb(r.other_peak_mb)} |")
    print("\nCPU ms per env step by process (sampled every second; start-up included):")
    print("| run | learner | inference | rollout workers | other |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r.label} | " + " | ".join(f"{1000 * r.cpu_by_role.get(k, 0.0) / args.steps:.2f}"
                                             for k in ("learner", "inference", "rollout", "other")) + " |")
    current_runs = [r for r in results if r.label == "current"]
    baseline_runs = [r for r in results if r.label == "baseline"]
    current = current_runs[-1]
    fps = float(np.median([r.fps for r in current_runs]))
    figures = {
        "machine": machine, "device": args.device, "num_workers": args.num_workers,
        "num_envs_per_worker": args.num_envs_per_worker,
        "steps": args.steps, "repeats": args.repeats, "max_episode_steps": args.max_episode_steps,
        "encoder_arch": args.encoder_arch, "precision": args.precision, "worker_num_splits": args.worker_num_splits,
        "precision_note": precision_note,
        "fps": round(fps, 1),
        "cpu_ms_per_step": round(1000 * float(np.median([r.cpu_s for r in current_runs])) / args.steps, 3),
        "cpu_ms_per_step_by_role": _by_role(current_runs, args.steps),
        "peak_rss_mb": round(max(current.rollout_peak_mb), 1) if current.rollout_peak_mb else None,
        "rss_growth_mb": round(max(current.rollout_growth_mb), 1) if current.rollout_growth_mb else None,
    }
    if baseline_runs:
        base = float(np.median([r.fps for r in baseline_runs]))
        speedup = fps / base
        print(f"speed-up over {baseline_name} (medians of {args.repeats} run(s) each): x{speedup:.2f}")
        base_cpu = 1000 * float(np.median([r.cpu_s for r in baseline_runs])) / args.steps
        figures.update(baseline_cpu_ms_per_step_by_role=_by_role(baseline_runs, args.steps))
        # each alternated pair's ratio: how much the machine's changing load moved the medians
        pairs = [round(c.fps / b.fps, 3) for b, c in zip(baseline_runs, current_runs)]
        print(f"env steps/s ratio of each alternated pair: {', '.join(f'x{r:.2f}' for r in pairs)}")
        figures.update(pair_speedups=pairs)
        figures.update(baseline_fps=round(base, 1), train_speedup=round(speedup, 3),
                       baseline_cpu_ms_per_step=round(base_cpu, 3),
                       baseline_num_envs_per_worker=base_envs, baseline_num_workers=base_workers,
                       cpu_ratio=round(base_cpu / figures["cpu_ms_per_step"], 3))
        if same_tree:
            figures.update(baseline_encoder_arch=base_arch, baseline_precision=base_precision,
                           baseline_worker_num_splits=base_splits)
            # the precision ratio only when the pair differs in precision (a same-precision baseline
            # is also how two game counts are paired on this tree)
            if args.baseline_precision is not None and base_precision != args.precision:
                figures.update(precision_speedup=round(speedup, 3))
        else:
            figures.update(baseline_ref=args.baseline_ref)
            if args.baseline_ref_with_these_flags:
                figures.update(baseline_encoder_arch=base_arch, baseline_precision=base_precision,
                               baseline_worker_num_splits=base_splits)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
