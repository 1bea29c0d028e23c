"""Phase 1a: annotate observation pairs with preferences from an LLM (the Motif method).

Pair ``k`` of ``{directory}/{goal_key}.{npz,pkl}`` is samples ``2k`` and ``2k+1``. Each
pair is captioned (:mod:`rlaif.captions`), put into the skill's judge prompt
(:mod:`rlaif.prompts`), sent to a backend (:mod:`common.llm`), and the reply is
parsed into a preference code (0 first, 1 second, 2 tie/neither, 3 unknown). A reply
without a parseable answer gets one retry prompt; if that fails too the pair stays 3.

Chunks (for slurm arrays and parallel servers): with ``n_chunks = n``, chunk ``i`` owns
pairs ``[i*P//n, (i+1)*P//n)`` and writes only its own files in ``preference_dir``:

* ``{annotator}.chunk{i}of{n}.npy``: int32 labels over the chunk's pairs only (its
  length is the chunk size; entry ``j`` is pair ``start + j``), initialised to 3;
* ``{annotator}.chunk{i}of{n}.json``: the chunk's bounds, the dataset size and
  fingerprint, and ``complete`` (every pair of the chunk was attempted).

Both are saved atomically (temp file + rename) every ``flushing_freq`` batches, at the
end and when the run stops on an error, so a killed run loses at most the batches since
the last flush. A rerun resumes: pairs labelled 0-2 are skipped, 3s are tried again.
When every chunk of the run is complete, the chunks are concatenated into
``{annotator}.npy`` (the last chunk to finish does it; ``merge=True`` does only that).
Conversations are appended to ``{logdir}/{annotator}.chunk{i}.jsonl`` (one JSON object
per pair: pair index, user prompt, replies, label; the first line of a new file holds
the system prompt).

``ignore_existing`` starts a chunk over (fresh 3s); it never deletes the final file, which
is replaced only when the new run merges. In a slurm array started with it, a chunk that
finishes before another has even started may merge with that chunk's older complete file;
run ``merge=True`` (``--merge``) once the whole array is done to be sure.
``{annotator}.meta.json`` (written by the merge) records the dataset size and fingerprint
of the final file, so a rerun on a different dataset of the same size is refused too.

Test-only: the environment variable ``RLAIF_ANNOTATE_TEST_DELAY`` (seconds) makes the
loop sleep after every batch, so tests can kill a run at a known point. Leave it unset.

One module on purpose (about 550 lines): chunking, resume, merge and the request loop share one
run state and its file layout; each part is a separate function.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _json_str
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from common.atomic_io import atomic_write_json
from common.llm import DEFAULT_MODEL, Backend, BackendError, check_backend_name, make_backend
from common.nethack.messages import MESSAGE_LEN, decode_message
from common.vocabulary import skill_index
from rlaif.captions import caption_from_values
from rlaif.dataset import STAT_FIELDS, DatasetError, ObservationDataset, find_dataset, load_dataset
from rlaif.preferences import (
    UNDECIDED_WARNING,
    UNKNOWN,
    PreferenceError,
    compare_with_release,
    label_counts,
    label_shares,
    load_preferences,
    save_preferences,
)
from rlaif.prompts import PromptBuilder, load_template, parse_answer, retry_conversation

logger = logging.getLogger(__name__)

TEST_DELAY_ENV = "RLAIF_ANNOTATE_TEST_DELAY"
CAPTION_CACHE_SIZE = 200_000
STATS_BYTES = 2 * len(STAT_FIELDS) * 4  # int32 [2, 6] per sample


class AnnotationError(ValueError):
    """Bad input for an annotation run (dataset, chunking, existing files)."""


@dataclass
class AnnotationConfig:
    """Settings of one annotation run (one chunk). Defaults follow the paper."""

    goal_key: str = "discoverer"
    directory: str = "og_dataset"
    preference_dir: str = "preference"
    logdir: str = "annotation_logs"
    custom_annotator_string: str | None = None
    backend: str = "vllm"
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    num_gpus: int = 1
    temperature: float = 0.1
    top_p: float = 0.95
    top_k: int = 50
    max_tokens: int = 512
    seed: int | None = 0
    prompt: str | None = None
    n_chunks: int = 1
    chunk_number: int = 0
    batch_size: int = 64
    flushing_freq: int = 10
    ignore_existing: bool = False
    merge: bool = False
    log_conversations: bool = True
    retry_unparseable: bool = True
    concurrency: int = 16
    timeout: float = 120.0
    max_retries: int = 5
    progress: bool = True
    backend_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def annotator(self) -> str:
        return self.custom_annotator_string or f"llama3_{self.goal_key}_default"


@dataclass
class AnnotationSummary:
    """What one run did; ``merged`` holds the final labels when the run produced them."""

    annotator: str
    chunk: str
    num_pairs: int
    chunk_pairs: int
    annotated: int
    retried: int
    unparseable: int
    seconds: float
    counts: dict[str, int]
    final_path: str | None = None
    merged: np.ndarray | None = field(default=None, repr=False)
    skill: str = ""

    @property
    def pairs_per_second(self) -> float:
        return self.annotated / self.seconds if self.seconds > 0 else 0.0

    @property
    def unparseable_rate(self) -> float:
        return self.unparseable / self.annotated if self.annotated else 0.0

    def text(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        lines = [
            f"annotator {self.annotator} ({self.chunk}): {self.annotated} pairs annotated in this run "
            f"of {self.chunk_pairs} in the chunk ({self.num_pairs} in the dataset)",
            f"labels in the chunk: {counts}",
            f"unparseable after retry: {self.unparseable} ({100 * self.unparseable_rate:.1f}% of this run); "
            f"retried {self.retried}",
            f"speed: {self.pairs_per_second:.1f} pairs/s over {self.seconds:.2f}s",
        ]
        lines.append(f"final file: {self.final_path}" if self.final_path else "final file: not merged yet (chunks remain)")
        if self.merged is not None:
            lines.append("all chunks, " + compare_with_release(self.skill, self.merged))
            shares = label_shares(self.merged)
            undecided = shares["tie"] + shares["unknown"]
            if undecided > UNDECIDED_WARNING:
                lines.append(f"WARNING: {100 * undecided:.0f}% of the pairs are ties or unknown "
                             f"(the release's files have 2-6%, 26% for the ascender): check the prompt and the parser")
        return "\n".join(lines)


# --------------------------------------------------------------------------- files


def chunk_bounds(num_pairs: int, n_chunks: int, chunk_number: int) -> tuple[int, int]:
    """Pairs ``[start, end)`` owned by a chunk."""
    if n_chunks < 1:
        raise AnnotationError(f"--n_chunks must be >= 1, got {n_chunks}")
    if not 0 <= chunk_number < n_chunks:
        raise AnnotationError(f"--chunk_number {chunk_number} is out of range for --n_chunks {n_chunks} (use 0..{n_chunks - 1})")
    return chunk_number * num_pairs // n_chunks, (chunk_number + 1) * num_pairs // n_chunks


def final_path(preference_dir: str | os.PathLike, annotator: str) -> Path:
    return Path(preference_dir) / f"{annotator}.npy"


def final_meta_path(preference_dir: str | os.PathLike, annotator: str) -> Path:
    """Sidecar of the final file written by the merge: which dataset it annotates."""
    return Path(preference_dir) / f"{annotator}.meta.json"


def chunk_path(preference_dir: str | os.PathLike, annotator: str, chunk_number: int, n_chunks: int) -> Path:
    return Path(preference_dir) / f"{annotator}.chunk{chunk_number}of{n_chunks}.npy"


def chunk_meta_path(preference_dir: str | os.PathLike, annotator: str, chunk_number: int, n_chunks: int) -> Path:
    return Path(preference_dir) / f"{annotator}.chunk{chunk_number}of{n_chunks}.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    """An annotation metadata file, None when it does not exist.

    A file that exists but cannot be read is an error, not "absent": the metadata is what
    tells labels of one dataset from another's, and ignoring it would disable that check."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AnnotationError(
            f"{path}: unreadable annotation metadata ({type(exc).__name__}: {exc}); it says which dataset the "
            "labels next to it belong to. Restore it, or re-annotate with --ignore_existing (the labels are "
            "replaced only when the new run finishes)"
        ) from exc
    if not isinstance(data, dict):
        raise AnnotationError(f"{path}: annotation metadata must be a JSON object, found {type(data).__name__}; "
                              "re-annotate with --ignore_existing")
    return data


def dataset_fingerprint(dataset: ObservationDataset) -> str:
    """Short hash of the messages and stats: tells whether chunk files belong to this dataset."""
    h = hashlib.blake2b(digest_size=12)
    h.update(np.int64(len(dataset)).tobytes())
    h.update(memoryview(dataset.messages).cast("B"))
    h.update(memoryview(dataset.stats).cast("B"))
    return h.hexdigest()


def load_annotation_dataset(directory: str | os.PathLike, goal_key: str) -> tuple[ObservationDataset, Path]:
    """The skill's dataset, checked for an even, non-zero number of samples."""
    try:
        path = find_dataset(directory, goal_key)
        dataset = load_dataset(path)
    except DatasetError as exc:
        raise AnnotationError(f"--directory {directory}: {exc}") from exc
    n = len(dataset)
    if n == 0:
        raise AnnotationError(f"{path}: the dataset is empty")
    if n % 2:
        raise AnnotationError(f"{path}: {n} samples is an odd number; pairs are samples 2k and 2k+1")
    return dataset, path


def merge_chunks(
    preference_dir: str | os.PathLike,
    annotator: str,
    n_chunks: int,
    num_pairs: int,
    fingerprint: str | None = None,
    require_complete: bool = True,
) -> np.ndarray | None:
    """Concatenates the chunks into ``{annotator}.npy`` when every chunk is complete.

    Returns the merged labels, or ``None`` when a chunk is missing or unfinished (with
    ``require_complete=False``, unfinished-but-present chunks are merged anyway)."""
    parts = []
    for i in range(n_chunks):
        start, end = chunk_bounds(num_pairs, n_chunks, i)
        meta = _read_json(chunk_meta_path(preference_dir, annotator, i, n_chunks))
        path = chunk_path(preference_dir, annotator, i, n_chunks)
        if meta is None or not path.exists():
            logger.info("merge: chunk %d of %d not there yet (%s)", i, n_chunks, path)
            return None
        if meta.get("num_pairs") != num_pairs or (fingerprint and meta.get("fingerprint") != fingerprint):
            raise AnnotationError(
                f"{path} belongs to another dataset (num_pairs {meta.get('num_pairs')} vs {num_pairs}); "
                "rerun that chunk with --ignore_existing"
            )
        if require_complete and not meta.get("complete"):
            logger.info("merge: chunk %d of %d is not complete yet", i, n_chunks)
            return None
        try:
            parts.append(load_preferences(path, end - start))
        except PreferenceError as exc:
            raise AnnotationError(str(exc)) from exc
    labels = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    out = final_path(preference_dir, annotator)
    save_preferences(out, labels)
    atomic_write_json(final_meta_path(preference_dir, annotator),
                       {"annotator": annotator, "num_pairs": num_pairs, "fingerprint": fingerprint, "n_chunks": n_chunks,
                        "label_counts": label_counts(labels), "label_shares": label_shares(labels)}, sort_keys=True)
    logger.info("merged %d chunks into %s (%s)", n_chunks, out, label_counts(labels))
    return labels


# --------------------------------------------------------------------------- the run


def _initial_labels(cfg: AnnotationConfig, num_pairs: int, start: int, end: int, fingerprint: str) -> np.ndarray:
    """Labels to resume from: the chunk file, else the slice of a matching final file, else 3s."""
    size = end - start
    fresh = np.full(size, UNKNOWN, dtype=np.int32)
    pdir, ann = cfg.preference_dir, cfg.annotator
    fpath = final_path(pdir, ann)
    cpath = chunk_path(pdir, ann, cfg.chunk_number, cfg.n_chunks)
    mpath = chunk_meta_path(pdir, ann, cfg.chunk_number, cfg.n_chunks)
    final_labels = None
    if fpath.exists():
        try:
            final_labels = load_preferences(fpath)
        except PreferenceError as exc:
            if not cfg.ignore_existing:
                raise AnnotationError(f"{exc}; pass --ignore_existing to annotate again") from exc
        if final_labels is not None and len(final_labels) != num_pairs and not cfg.ignore_existing:
            raise AnnotationError(
                f"{fpath} has {len(final_labels)} labels but the dataset now has {num_pairs} pairs; pass "
                "--ignore_existing to annotate again (the old file is only replaced when the new run merges), "
                "or use --custom_annotator_string to write under another name"
            )
        old_meta = None if cfg.ignore_existing else _read_json(final_meta_path(pdir, ann))
        if (final_labels is not None and old_meta and old_meta.get("fingerprint") not in (None, fingerprint)
                and not cfg.ignore_existing):
            raise AnnotationError(
                f"{fpath} annotates a different dataset of the same size (see {final_meta_path(pdir, ann)}); pass "
                "--ignore_existing to annotate again, or use --custom_annotator_string to write under another name"
            )
    if cfg.ignore_existing:
        return fresh
    if cpath.exists() or mpath.exists():
        meta = _read_json(mpath)
        expected = {"num_pairs": num_pairs, "start": start, "end": end, "fingerprint": fingerprint}
        if meta is None or any(meta.get(k) != v for k, v in expected.items()):
            raise AnnotationError(
                f"{cpath} does not match this dataset/chunking (metadata {mpath} is "
                f"{'missing or unreadable' if meta is None else 'different'}); pass --ignore_existing to start over"
            )
        try:
            return load_preferences(cpath, size).copy()
        except PreferenceError as exc:
            raise AnnotationError(f"{exc}; pass --ignore_existing to start over") from exc
    if final_labels is not None:
        return final_labels[start:end].astype(np.int32).copy()
    return fresh


def _build_backend(cfg: AnnotationConfig) -> Backend:
    kwargs: dict[str, Any] = dict(
        model=cfg.model,
        base_url=cfg.base_url,
        num_gpus=cfg.num_gpus,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        max_tokens=cfg.max_tokens,
        seed=cfg.seed,
        skill=cfg.goal_key,
        concurrency=cfg.concurrency,
        timeout=cfg.timeout,
        max_retries=cfg.max_retries,
    )
    kwargs.update(cfg.backend_kwargs)
    return make_backend(cfg.backend, **kwargs)


class _ConversationLog:
    def __init__(self, path: Path | None, header: dict[str, Any]) -> None:
        self._fh = None
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists() or path.stat().st_size == 0
        self._fh = open(path, "a", encoding="utf-8")
        if not new:
            with open(path, "rb") as fh:  # a killed run may have left half a line
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    self._fh.write("\n")
        else:
            self._fh.write(json.dumps(header) + "\n")

    @property
    def active(self) -> bool:
        return self._fh is not None

    def write(self, records: list[str]) -> None:
        if self._fh is not None and records:
            self._fh.write("\n".join(records) + "\n")

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def annotate_chunk(cfg: AnnotationConfig, backend: Backend | None = None) -> AnnotationSummary:
    """Runs (or resumes) one chunk, then merges if every chunk is complete.

    ``backend`` may be passed in (tests, benchmarks, in-process pipelines); otherwise it is
    created from ``cfg`` after the input has been checked."""
    try:
        skill_index(cfg.goal_key)
    except ValueError as exc:
        raise AnnotationError(f"--goal_key: {exc}") from exc
    if backend is None and not cfg.merge:
        try:
            check_backend_name(cfg.backend)
        except BackendError as exc:
            raise AnnotationError(f"--backend: {exc}") from exc
    if cfg.batch_size < 1 or cfg.flushing_freq < 1:
        raise AnnotationError("--batch_size and --flushing_freq must be >= 1")
    template = load_template(cfg.prompt)
    builder = PromptBuilder(cfg.goal_key, template)

    dataset, data_path = load_annotation_dataset(cfg.directory, cfg.goal_key)
    num_pairs = dataset.num_pairs
    start, end = chunk_bounds(num_pairs, cfg.n_chunks, cfg.chunk_number)
    fingerprint = dataset_fingerprint(dataset)
    tag = f"chunk {cfg.chunk_number} of {cfg.n_chunks}"
    pdir, ann = cfg.preference_dir, cfg.annotator

    if cfg.merge:
        merged = merge_chunks(pdir, ann, cfg.n_chunks, num_pairs, fingerprint)
        if merged is None:
            missing = [
                i for i in range(cfg.n_chunks)
                if not (_read_json(chunk_meta_path(pdir, ann, i, cfg.n_chunks)) or {}).get("complete")
            ]
            raise AnnotationError(f"--merge: chunks {missing} of {cfg.n_chunks} for {ann} in {pdir} are missing or unfinished")
        return AnnotationSummary(ann, "merge", num_pairs, num_pairs, 0, 0, 0, 0.0, label_counts(merged),
                                 str(final_path(pdir, ann)), merged)

    labels = _initial_labels(cfg, num_pairs, start, end, fingerprint)
    cpath = chunk_path(pdir, ann, cfg.chunk_number, cfg.n_chunks)
    mpath = chunk_meta_path(pdir, ann, cfg.chunk_number, cfg.n_chunks)
    meta = {
        "annotator": ann, "skill": cfg.goal_key, "dataset": str(data_path), "num_pairs": num_pairs,
        "start": start, "end": end, "n_chunks": cfg.n_chunks, "chunk_number": cfg.chunk_number,
        "fingerprint": fingerprint, "backend": cfg.backend, "model": cfg.model, "complete": False,
    }
    pending = np.flatnonzero(labels == UNKNOWN)
    logger.info("%s %s: %d pairs [%d, %d) of %d, %d to annotate; dataset %s",
                ann, tag, end - start, start, end, num_pairs, len(pending), data_path)

    # The backend comes first, so a missing vLLM or an unreachable server writes nothing.
    own_backend = backend is None
    if len(pending) and own_backend:
        backend = _build_backend(cfg)
    # Then the (possibly fresh) chunk: from here on its files always exist.
    if cfg.ignore_existing or not cpath.exists():
        save_preferences(cpath, labels)
    atomic_write_json(mpath, meta, sort_keys=True)

    annotated = retried = unparseable = 0
    t0 = time.perf_counter()
    if len(pending):
        assert backend is not None
        logger.info("backend: %s", backend.describe())
        log_path = Path(cfg.logdir) / f"{ann}.chunk{cfg.chunk_number}.jsonl" if cfg.log_conversations else None
        conv_log = _ConversationLog(log_path, {"annotator": ann, "system": builder.system_prompt, "chunk": tag})
        delay = float(os.environ.get(TEST_DELAY_ENV, "0") or 0)
        caption_cache: dict[bytes, str] = {}
        jh, jm, jt = (_json_str(part)[1:-1] for part in builder.parts)
        messages, stats = dataset.messages, dataset.stats
        batches = [pending[i:i + cfg.batch_size] for i in range(0, len(pending), cfg.batch_size)]
        try:
            for b, local in enumerate(tqdm(batches, desc=f"{ann} {tag}", unit="batch", disable=not cfg.progress)):
                pairs = local + start
                samples = np.stack([2 * pairs, 2 * pairs + 1], axis=1).reshape(-1)
                raw = messages[samples].tobytes()
                raw_stats = stats[samples].tobytes()
                st = None
                convs = []
                caps_list = []
                for j in range(len(pairs)):
                    caps = []
                    for s in (2 * j, 2 * j + 1):
                        off = s * 2 * MESSAGE_LEN
                        # NetHack repeats observations constantly: caption each distinct one once.
                        key = raw[off:off + 2 * MESSAGE_LEN] + raw_stats[s * STATS_BYTES:(s + 1) * STATS_BYTES]
                        cap = caption_cache.get(key)
                        if cap is None:
                            if st is None:
                                st = stats[samples].tolist()
                            cap = caption_from_values(
                                decode_message(raw[off:off + MESSAGE_LEN]),
                                decode_message(raw[off + MESSAGE_LEN:off + 2 * MESSAGE_LEN]),
                                st[s][0], st[s][1],
                            )
                            if len(caption_cache) >= CAPTION_CACHE_SIZE:
                                caption_cache.clear()
                            caption_cache[key] = cap
                        caps.append(cap)
                    convs.append(builder.conversation(caps[0], caps[1]))
                    caps_list.append(caps)
                texts = backend.generate(convs)
                if len(texts) != len(convs):
                    raise BackendError(f"{backend.describe()} returned {len(texts)} replies for {len(convs)} prompts")
                replies = [[r] for r in texts]
                codes = [parse_answer(r[0]) for r in replies]
                bad = [j for j, c in enumerate(codes) if c == UNKNOWN]
                if bad and cfg.retry_unparseable:
                    retried += len(bad)
                    second = backend.generate([retry_conversation(convs[j], replies[j][0]) for j in bad])
                    for j, text in zip(bad, second):
                        replies[j].append(text)
                        codes[j] = parse_answer(text)
                labels[local] = codes
                annotated += len(codes)
                unparseable += sum(1 for c in codes if c == UNKNOWN)
                if conv_log.active:
                    # JSON by hand: the fixed parts of the prompt are escaped once per run.
                    conv_log.write([
                        f'{{"pair": {p}, "prompt": "{jh}{_json_str(c1)[1:-1]}{jm}{_json_str(c2)[1:-1]}{jt}", '
                        f'"replies": [{", ".join(map(_json_str, r))}], "label": {code}}}'
                        for p, (c1, c2), r, code in zip(pairs.tolist(), caps_list, replies, codes)
                    ])
                if (b + 1) % cfg.flushing_freq == 0:
                    save_preferences(cpath, labels)
                    conv_log.flush()
                if delay:
                    time.sleep(delay)
        finally:
            save_preferences(cpath, labels)
            conv_log.close()
            if own_backend:
                backend.close()
    seconds = time.perf_counter() - t0
    meta["complete"] = True
    atomic_write_json(mpath, meta, sort_keys=True)

    merged = merge_chunks(pdir, ann, cfg.n_chunks, num_pairs, fingerprint)
    summary = AnnotationSummary(
        ann, tag, num_pairs, end - start, annotated, retried, unparseable, seconds, label_counts(labels),
        str(final_path(pdir, ann)) if merged is not None else None, merged, cfg.goal_key,
    )
    for line in summary.text().splitlines():
        logger.info(line)
    return summary


def label_agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """How often two annotators agree (e.g. the heuristic stand-in against an LLM).

    ``agreement``: equal labels among pairs both labelled 0-2; ``decisive_agreement``: the
    same, among pairs both called 0 or 1; ``compared``/``decisive``: those pair counts."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"label arrays differ in shape: {a.shape} vs {b.shape}")
    known = (a != UNKNOWN) & (b != UNKNOWN)
    decisive = (a <= 1) & (b <= 1)
    same = a == b
    return {
        "compared": int(known.sum()),
        "agreement": float(same[known].mean()) if known.any() else float("nan"),
        "decisive": int(decisive.sum()),
        "decisive_agreement": float(same[decisive].mean()) if decisive.any() else float("nan"),
    }


def run_annotation(cfg: AnnotationConfig) -> np.ndarray | None:
    """Annotates one chunk (resuming if possible); returns the labels of the final merged
    file, or ``None`` if other chunks of the run remain."""
    return annotate_chunk(cfg).merged
