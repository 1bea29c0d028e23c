"""Phase 1a: annotate observation pairs with preferences from an LLM (the Motif method).

Two dataset layouts (:mod:`rlaif.pair_sources`):

* ``layout="observations"`` (``scripts.annotate_pairs``): pair ``k`` of
  ``{directory}/{goal_key}.{npz,pkl}`` is samples ``2k`` and ``2k+1``, captioned by
  :mod:`rlaif.captions` and put into the skill's judge prompt (:mod:`rlaif.prompts`);
* ``layout="motif"`` (``scripts.annotate_pairs_dataset``): Motif's layout, ``{directory}/data/...``
  (:mod:`rlaif.motif_dataset`), each member described by its messages and put into Motif's prompt
  of ``prompt_version`` and ``goal_key`` (:mod:`rlaif.motif_prompts`). As in Motif, a pair whose two
  descriptions are the same text is a tie without asking the judge. The final file is int8, as
  Motif writes it, and the chunk files and metadata below live in ``state_dir`` (not in
  ``preference/``, whose every ``.npy`` Motif's own loader would read as an annotator).

Each prompt goes to a backend (:mod:`common.llm`), and the reply is parsed into a preference
code (0 first, 1 second, 2 tie/neither, 3 unknown). A reply without a parseable answer gets one
retry prompt; if that fails too the pair stays 3. Each request is sampled with its own seed, made from
``seed``, the pair's index and the attempt (:func:`pair_seeds`), so a fixed seed gives the same labels
whatever the batch size, the chunking or the point a run resumed from (where the backend honours
per-request seeds: :mod:`common.llm`).

Chunks (for slurm arrays and parallel servers): with ``n_chunks = n``, chunk ``i`` owns
pairs ``[i*P//n, (i+1)*P//n)`` and writes only its own files in ``state_dir`` (by default
``preference_dir``):

* ``{annotator}.chunk{i}of{n}.npy``: int32 labels over the chunk's pairs only (its
  length is the chunk size; entry ``j`` is pair ``start + j``), initialised to 3;
* ``{annotator}.chunk{i}of{n}.json``: the chunk's bounds, the dataset size and
  fingerprint, and ``complete`` (every pair of the chunk was attempted).

Both are saved atomically (temp file + rename) every ``flushing_freq`` batches, at the
end and when the run stops on an error, so a killed run loses at most the batches since
the last flush. A run holds ``{annotator}.chunk{i}of{n}.lock`` (:mod:`common.run_lock`) from
before it reads the chunk until it ends: a second run of the same chunk into the same folder
is refused at once, naming the first (pid, host, start); a lock left by a killed run is
taken over. A rerun resumes: pairs labelled 0-2 are skipped, 3s are tried again.
When every chunk of the run is complete, the chunks are concatenated into
``{preference_dir}/{annotator}.npy`` (the last chunk to finish does it; ``merge=True`` does only that).
A final file that exists when a chunk starts (this project's or Motif's own) is resumed from:
its labels 0-2 are kept and only its 3s are annotated.
Conversations are appended to ``{logdir}/{annotator}.chunk{i}.jsonl`` (one JSON object
per pair: pair index, user prompt, replies, label; the first line of a new file holds
the system prompt).

``ignore_existing`` starts a chunk over (fresh 3s); it never deletes the final file, which
is replaced only when the new run merges. In a slurm array started with it, a chunk that
finishes before another has even started may merge with that chunk's older complete file;
run ``merge=True`` (``--merge``) once the whole array is done to be sure.
``{state_dir}/{annotator}.meta.json`` (written by the merge) records the dataset size and
fingerprint of the final file and who labelled it (backend, model, ``labelled_by``), so a rerun on a
different dataset of the same size is refused too, and a file of stand-in labels can be told from an LLM's:
a backend that calls no language model (``heuristic``, ``random``) is recorded with ``"model": null``,
whatever ``--model`` says.

Test-only: the environment variable ``RLAIF_ANNOTATE_TEST_DELAY`` (seconds) makes the
loop sleep after every batch, so tests can kill a run at a known point. Leave it unset.

One module on purpose: chunking, resume, merge and the request loop share one
run state and its file layout; each part is a separate function.
"""
from __future__ import annotations

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
from common.flag_checks import FlagError, at_least, check_llm_client, output_folder
from common.llm import (
    CHOICE_BACKENDS,
    DEFAULT_MODEL,
    Backend,
    BackendError,
    Completion,
    backend_list,
    check_backend_name,
    check_installed,
    make_backend,
    request_seed,
)
from common.run_lock import LockHeldError, RunLock
from common.vocabulary import SKILL_SPECS, skill_index
from rlaif.dataset import DatasetError, ObservationDataset, find_dataset, load_dataset
from rlaif.motif_dataset import MotifLayoutError, open_motif_layout
from rlaif.motif_prompts import MotifPromptBuilder, MotifPromptError, annotator_string, load_prompt_file
from rlaif.pair_sources import MotifPairs, ObservationPairs, PairSource, dataset_fingerprint  # noqa: F401 (re-exported)
from rlaif.preferences import (
    TIE,
    UNDECIDED_WARNING,
    UNKNOWN,
    PreferenceError,
    compare_with_release,
    label_counts,
    label_shares,
    load_preferences,
    save_preferences,
)
from rlaif.prompts import (
    ANSWER_CHOICES,
    ANSWER_INSTRUCTIONS,
    ANSWER_MODES,
    DIRECT_ANSWER_INSTRUCTIONS,
    PromptBuilder,
    load_template,
)

logger = logging.getLogger(__name__)

TEST_DELAY_ENV = "RLAIF_ANNOTATE_TEST_DELAY"
LAYOUTS = ("observations", "motif")


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
    #: tensor parallel size of --backend vllm; None: every visible GPU (the release's device_count())
    num_gpus: int | None = None
    #: vLLM engine arguments (None: vLLM's own defaults)
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    dtype: str | None = None
    quantization: str | None = None
    temperature: float = 0.1
    top_p: float = 0.95
    top_k: int = 50
    max_tokens: int = 512
    seed: int | None = 0
    prompt: str | None = None
    n_chunks: int = 1
    chunk_number: int = 0
    #: pairs per backend call; None: 2,000 for vllm (the release's batch, so the engine schedules them
    #: together) and 64 for the others (which spread a batch over --concurrency requests)
    batch_size: int | None = None
    flushing_freq: int = 10
    ignore_existing: bool = False
    merge: bool = False
    log_conversations: bool = True
    retry_unparseable: bool = True
    #: how the answer is asked (:data:`ANSWER_MODES`): "release", the paper's free reply and one free retry;
    #: "constrained_retry", the same with the retry restricted to the three answer lines; "constrained", the
    #: answer line alone, restricted, without reasoning first. The last two need a backend that constrains
    #: its decoding (llamacpp, or openai against llama.cpp's or vLLM's server) and the default layout.
    answer_mode: str = "release"
    #: a run whose share of pairs unusable after the retry is above this fails (the labels are saved, the
    #: unusable pairs stay unknown and a resume asks them again); 1.0 never fails
    max_unusable_share: float = 0.5
    #: resuming labels of another backend or model is refused unless this is set; the sources are then
    #: recorded per chunk with their pair ranges
    allow_mixed_annotators: bool = False
    concurrency: int = 16
    timeout: float = 120.0
    max_retries: int = 5
    progress: bool = True
    backend_kwargs: dict[str, Any] = field(default_factory=dict)
    # Motif's layout (layout="motif"): see the module docstring
    layout: str = "observations"
    prompt_version: str = "default"
    use_messages: bool = True
    use_blstats: bool = False
    llm_size: int = 70  # names the file: llama{llm_size}b_...
    system_prompt: str | None = None  # None: the layout's system prompt
    state_dir: str | None = None  # chunk files and metadata; None: preference_dir
    # Motif's layout: text put before the goal sentence (rlaif.motif_prompts.equivalent_context) and its name
    # (rlaif.motif_prompts.PROMPT_CONTEXTS), which also names the file
    prompt_context: str = ""
    prompt_context_name: str = "none"

    @property
    def annotator(self) -> str:
        if self.custom_annotator_string:
            return self.custom_annotator_string
        if self.layout == "motif":
            return annotator_string(self.llm_size, self.goal_key, self.prompt_version, self.use_messages,
                                    self.use_blstats, self.prompt_context_name)
        spec = SKILL_SPECS.get(self.goal_key)  # a skill's preference file is named by its file's experiment
        return spec.experiment if spec is not None else f"llama3_{self.goal_key}_default"

    @property
    def work_dir(self) -> str:
        return self.state_dir or self.preference_dir


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
    #: pairs of this run whose two descriptions were the same text: ties without asking (Motif's layout)
    identical: int = 0
    layout: str = "observations"
    #: the first reply of this run that stayed unusable after the retry (with its retry), for the error
    unusable_example: str = ""
    #: tokens of this run's requests as the backend counted them (retries included); None: it does not count
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: who made the labels the chunk already held when this run had nothing to ask ("" otherwise)
    labelled_before: str = ""

    @property
    def pairs_per_second(self) -> float:
        return self.annotated / self.seconds if self.seconds > 0 else 0.0

    @property
    def unparseable_rate(self) -> float:
        return self.unparseable / self.annotated if self.annotated else 0.0

    def unusable_error(self, max_share: float) -> str | None:
        """The error of a run whose replies were mostly unusable (``None`` when the share is at most
        ``max_share``): the share, an example reply and what to do."""
        if self.annotated == 0 or self.unparseable_rate <= max_share:
            return None
        example = self.unusable_example if len(self.unusable_example) <= 600 else self.unusable_example[:600] + "..."
        return (f"{self.unparseable} of {self.annotated} pairs ({100 * self.unparseable_rate:.0f}%) had no usable "
                f"answer even after the retry, above --max_unusable_share {max_share:g}. The labels are saved; "
                f"those pairs stay unknown (3) and a resume asks them again. Check the model, --max_tokens and the "
                f"prompt. An example reply: {example!r}")

    def text(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        lines = [
            f"annotator {self.annotator} ({self.chunk}): {self.annotated} pairs annotated in this run "
            f"of {self.chunk_pairs} in the chunk ({self.num_pairs} in the dataset)",
            f"labels in the chunk: {counts}",
            f"unparseable after retry: {self.unparseable} ({100 * self.unparseable_rate:.1f}% of this run); "
            f"retried {self.retried}" + (f"; {self.identical} pairs with identical descriptions were ties without "
                                         "asking" if self.identical else ""),
            f"speed: {significant(self.pairs_per_second)} pairs/s over {self.seconds:.2f}s",
        ]
        if self.prompt_tokens is not None and self.completion_tokens is not None and self.annotated:
            lines.append(f"tokens: {self.prompt_tokens} prompt + {self.completion_tokens} completion, "
                         f"{(self.prompt_tokens + self.completion_tokens) / self.annotated:.0f} per pair")
        if self.labelled_before:
            lines.append(f"nothing asked: every pair of the chunk already had a label ({self.labelled_before}); "
                         "--ignore_existing labels them all afresh")
        lines.append(f"final file: {self.final_path}" if self.final_path else "final file: not merged yet (chunks remain)")
        if self.merged is not None:
            lines.append("all chunks, " + compare_with_release(self.skill, self.merged))
            shares = label_shares(self.merged)
            undecided = shares["tie"] + shares["unknown"]
            if undecided > UNDECIDED_WARNING and self.layout == "observations":
                lines.append(f"WARNING: {100 * undecided:.0f}% of the pairs are ties or unknown "
                             f"(the release's files have 2-6%, 26% for the ascender): check the prompt and the parser")
        return "\n".join(lines)


def significant(x: float) -> str:
    """``x`` with three significant digits, without an exponent (0.015, 1.73, 123, 4567): a rate of 0.015
    pairs/s must not read 0.0."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


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


def final_meta_path(state_dir: str | os.PathLike, annotator: str) -> Path:
    """Sidecar of the final file written by the merge: which dataset it annotates, with which backend."""
    return Path(state_dir) / f"{annotator}.meta.json"


#: pairs per call of the vllm backend (the release's --batch_size) and of the others
VLLM_BATCH_SIZE = 2000
DEFAULT_BATCH_SIZE = 64


def pairs_per_call(cfg: "AnnotationConfig") -> int:
    """``cfg.batch_size``, or its backend's default when None."""
    if cfg.batch_size is not None:
        return cfg.batch_size
    return VLLM_BATCH_SIZE if cfg.backend == "vllm" else DEFAULT_BATCH_SIZE


def check_annotation_flags(cfg: "AnnotationConfig") -> None:
    """Sizes, the LLM client's settings and the folders the run writes, before anything is read or written
    (:class:`FlagError` naming the flag; the scripts exit 2)."""
    for name in ("flushing_freq", "n_chunks", "max_tokens"):
        at_least(name, getattr(cfg, name), 1)
    for name in ("batch_size", "num_gpus", "max_model_len"):
        if getattr(cfg, name) is not None:
            at_least(name, getattr(cfg, name), 1)
    if cfg.gpu_memory_utilization is not None and not 0.0 < float(cfg.gpu_memory_utilization) <= 1.0:
        raise FlagError(f"--gpu_memory_utilization must be a share above 0 and at most 1, got {cfg.gpu_memory_utilization}")
    check_llm_client(cfg.concurrency, cfg.timeout, cfg.max_retries)
    if not 0.0 <= float(cfg.max_unusable_share) <= 1.0:
        raise FlagError(f"--max_unusable_share must be a share from 0 to 1, got {cfg.max_unusable_share}")
    if cfg.answer_mode not in ANSWER_MODES:
        raise FlagError(f"--answer_mode {cfg.answer_mode!r}: expected one of {', '.join(ANSWER_MODES)}")
    if cfg.answer_mode != "release" and not cfg.merge and cfg.backend not in CHOICE_BACKENDS:
        raise FlagError(f"--answer_mode {cfg.answer_mode} restricts replies by constrained decoding, which --backend "
                        f"{cfg.backend} cannot do; use --backend {backend_list(CHOICE_BACKENDS)}")
    # the folders written, as each script spells its flag (Motif's layout keeps its labels in {directory}/preference)
    motif = cfg.layout == "motif"
    outputs = [("--directory" if motif else "--preference_dir", cfg.preference_dir),
               ("--state-dir" if motif else "--state_dir", cfg.state_dir),
               ("--logdir", cfg.logdir if cfg.log_conversations else None)]
    for flag, folder in outputs:
        if folder:
            output_folder(flag, folder)


def chunk_path(state_dir: str | os.PathLike, annotator: str, chunk_number: int, n_chunks: int) -> Path:
    return Path(state_dir) / f"{annotator}.chunk{chunk_number}of{n_chunks}.npy"


def chunk_meta_path(state_dir: str | os.PathLike, annotator: str, chunk_number: int, n_chunks: int) -> Path:
    return Path(state_dir) / f"{annotator}.chunk{chunk_number}of{n_chunks}.json"


def chunk_lock_path(state_dir: str | os.PathLike, annotator: str, chunk_number: int, n_chunks: int) -> Path:
    """The lock a run holds on its chunk while it works (:mod:`common.run_lock`): there while it runs, or left
    by a run that was killed (the next run takes it over)."""
    return Path(state_dir) / f"{annotator}.chunk{chunk_number}of{n_chunks}.lock"


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


#: the backends whose labels no language model made: a rule-based or random stand-in for it
STAND_IN_BACKENDS = ("heuristic", "random")
#: what labels with each backend that calls no language model; their runs record ``"model": null`` and this,
#: whatever ``--model`` says (it names no model that labelled)
NO_MODEL_BACKENDS: dict[str, str] = {
    "heuristic": "rule-based stand-in, no language model",
    "random": "random labels, no language model",
    "replay": "replies replayed from a recorded transcript, no language model called",
}


def pair_ranges(indices: np.ndarray) -> list[list[int]]:
    """Sorted pair indices as half-open ranges ``[[start, end), ...]``."""
    idx = np.unique(np.asarray(indices, dtype=np.int64))
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) != 1)
    starts = np.concatenate([[idx[0]], idx[breaks + 1]])
    ends = np.concatenate([idx[breaks] + 1, [idx[-1] + 1]])
    return [[int(a), int(b)] for a, b in zip(starts, ends)]


def labelled_by(backend: str, model: str | None) -> str:
    """Who made labels of ``backend`` and ``model``, for the metadata and every message that quotes it: what
    labels instead of a model for a backend that calls none, else the model."""
    return NO_MODEL_BACKENDS.get(backend) or f"language model {model}"


def _who(backend: str, model: str | None) -> str:
    """``backend heuristic (rule-based stand-in, no language model)`` / ``backend openai (model m)``."""
    return f"backend {backend} ({NO_MODEL_BACKENDS.get(backend) or f'model {model}'})"


def _source(backend: str, model: str | None, ranges: list[list[int]]) -> dict[str, Any]:
    model = None if backend in NO_MODEL_BACKENDS else model  # a record naming a model for such a backend names none
    return {"backend": backend, "model": model, "labelled_by": labelled_by(backend, model),
            "stand_in": backend in STAND_IN_BACKENDS, "pairs": ranges}


def _sources_of(meta: dict[str, Any] | None, labels: np.ndarray, start: int) -> list[dict[str, Any]]:
    """Who labelled a chunk: its metadata's ``sources``; metadata written before sources were recorded
    gives its one backend every known label of the chunk."""
    if not meta:
        return []
    known = np.flatnonzero(labels != UNKNOWN) + start
    if isinstance(meta.get("sources"), list):  # only the pairs that still hold a label
        out = []
        for src in meta["sources"]:
            claimed = np.concatenate([np.arange(a, b) for a, b in src.get("pairs", [])] or [np.zeros(0, np.int64)])
            kept = pair_ranges(np.intersect1d(claimed, known))
            if kept:
                out.append({**src, **_source(src.get("backend", "unknown"), src.get("model"), kept)})
        return out
    return [_source(meta.get("backend", "unknown"), meta.get("model", "unknown"), pair_ranges(known))] if known.size else []


def _with_run(sources: list[dict[str, Any]], backend: str, model: str | None,
              new_pairs: np.ndarray) -> list[dict[str, Any]]:
    """``sources`` plus this run's newly labelled pairs (one entry per consecutive backend and model)."""
    out = [dict(src) for src in sources]
    if new_pairs.size == 0:
        return out
    if out and out[-1]["backend"] == backend and out[-1]["model"] == model:
        old = np.concatenate([np.arange(a, b) for a, b in out[-1]["pairs"]] or [np.zeros(0, np.int64)])
        out[-1]["pairs"] = pair_ranges(np.concatenate([old, new_pairs]))
    else:
        out.append(_source(backend, model, pair_ranges(new_pairs)))
    return out


def provenance(sources: list[dict[str, Any]], num_pairs: int) -> dict[str, Any]:
    """The metadata fields that say who made the labels: one backend and model (None for a backend that calls no
    model), or "mixed", who that is in words (``labelled_by``), whether any came from a rule-based stand-in and
    what share of the pairs it labelled."""
    def count(src: dict[str, Any]) -> int:
        return sum(b - a for a, b in src.get("pairs", []))

    used = [src for src in sources if count(src)]
    backends = sorted({src["backend"] for src in used})
    models = {src["model"] for src in used}  # None: a backend that calls no model
    makers = sorted({src["labelled_by"] for src in used})
    stand_in_pairs = sum(count(src) for src in used if src.get("stand_in"))
    return {
        "backend": backends[0] if len(backends) == 1 else ("mixed" if backends else None),
        "model": next(iter(models)) if len(models) == 1 else ("mixed" if models else None),
        "labelled_by": makers[0] if len(makers) == 1 else ("mixed: see sources" if makers else None),
        "sources": used,
        "stand_in": bool(stand_in_pairs),
        "stand_in_share": stand_in_pairs / num_pairs if num_pairs else 0.0,
    }


def merge_chunks(
    preference_dir: str | os.PathLike,
    annotator: str,
    n_chunks: int,
    num_pairs: int,
    fingerprint: str | None = None,
    require_complete: bool = True,
    state_dir: str | os.PathLike | None = None,
    dtype: Any = np.int32,
    extra_meta: dict[str, Any] | None = None,
) -> np.ndarray | None:
    """Concatenates the chunks (in ``state_dir``, default ``preference_dir``) into
    ``{preference_dir}/{annotator}.npy`` of ``dtype`` when every chunk is complete.

    Returns the merged labels, or ``None`` when a chunk is missing or unfinished (with
    ``require_complete=False``, unfinished-but-present chunks are merged anyway)."""
    sdir = state_dir or preference_dir
    parts = []
    for i in range(n_chunks):
        start, end = chunk_bounds(num_pairs, n_chunks, i)
        meta = _read_json(chunk_meta_path(sdir, annotator, i, n_chunks))
        path = chunk_path(sdir, annotator, i, n_chunks)
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
            raise AnnotationError(f"{exc}; delete {path} and {chunk_meta_path(sdir, annotator, i, n_chunks)}, then run "
                                  f"chunk {i} again (--chunk_number {i} --n_chunks {n_chunks}): only its pairs are "
                                  "asked again") from exc
    labels = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    out = final_path(preference_dir, annotator)
    save_preferences(out, labels, dtype=dtype)
    sources: list[dict[str, Any]] = []
    for i in range(n_chunks):  # who labelled what: the chunks' own records, never the merging run's flags
        start, end = chunk_bounds(num_pairs, n_chunks, i)
        sources += _sources_of(_read_json(chunk_meta_path(sdir, annotator, i, n_chunks)), labels[start:end], start)
    atomic_write_json(final_meta_path(sdir, annotator),
                       {"annotator": annotator, "num_pairs": num_pairs, "fingerprint": fingerprint, "n_chunks": n_chunks,
                        "label_counts": label_counts(labels), "label_shares": label_shares(labels),
                        **(extra_meta or {}), **provenance(sources, num_pairs)},
                       sort_keys=True)
    logger.info("merged %d chunks into %s (%s)", n_chunks, out, label_counts(labels))
    return labels


# --------------------------------------------------------------------------- the run


def _initial_labels(cfg: AnnotationConfig, num_pairs: int, start: int, end: int, fingerprint: str) -> np.ndarray:
    """Labels to resume from: the chunk file, else the slice of a matching final file, else 3s."""
    size = end - start
    fresh = np.full(size, UNKNOWN, dtype=np.int32)
    pdir, sdir, ann = cfg.preference_dir, cfg.work_dir, cfg.annotator
    fpath = final_path(pdir, ann)
    cpath = chunk_path(sdir, ann, cfg.chunk_number, cfg.n_chunks)
    mpath = chunk_meta_path(sdir, ann, cfg.chunk_number, cfg.n_chunks)
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
        old_meta = None if cfg.ignore_existing else _read_json(final_meta_path(sdir, ann))
        if (final_labels is not None and old_meta and old_meta.get("fingerprint") not in (None, fingerprint)
                and not cfg.ignore_existing):
            raise AnnotationError(
                f"{fpath} annotates a different dataset of the same size (see {final_meta_path(sdir, ann)}); pass "
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
            raise AnnotationError(f"{exc}; delete {cpath} and {mpath}, and the same command labels that chunk's "
                                  "pairs again (the other chunks' labels are kept; --ignore_existing would ask for "
                                  "every pair of this run again)") from exc
    if final_labels is not None:
        return final_labels[start:end].astype(np.int32).copy()
    return fresh


def _build_backend(cfg: AnnotationConfig, builder: Any = None) -> Backend:
    kwargs: dict[str, Any] = dict(
        model=cfg.model,
        base_url=cfg.base_url,
        num_gpus=cfg.num_gpus,
        max_model_len=cfg.max_model_len,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        dtype=cfg.dtype,
        quantization=cfg.quantization,
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
    if isinstance(builder, MotifPromptBuilder):
        # the rule-based stand-in finds the two descriptions between the prompt's fixed parts (any
        # template, the user's too) and answers in the version's format; other backends ignore these
        kwargs.update(prompt_parts=builder.parts, answer_key=builder.answer_key)
    kwargs.update(cfg.backend_kwargs)
    backend = make_backend(cfg.backend, **kwargs)
    served = getattr(backend, "served_models", None)
    if served and cfg.model not in served:
        # a server that ignores the request's model name (llama.cpp's) would answer with its own: the labels
        # would be recorded under a model that did not make them
        backend.close()
        raise AnnotationError(f"--model {cfg.model}: the server at {cfg.base_url} serves {', '.join(served)}, not "
                              "it; pass --model with the name it serves (the labels are recorded under --model)")
    return backend


def _prepare(cfg: AnnotationConfig) -> tuple[PairSource, Any]:
    """The pairs and the prompt builder of a run, checked; :class:`AnnotationError` naming the flag or file."""
    if cfg.layout not in LAYOUTS:
        raise AnnotationError(f"layout {cfg.layout!r}: expected one of {', '.join(LAYOUTS)}")
    if cfg.answer_mode not in ANSWER_MODES:
        raise AnnotationError(f"--answer_mode {cfg.answer_mode!r}: expected one of {', '.join(ANSWER_MODES)}")
    if cfg.answer_mode != "release" and cfg.layout != "observations":
        raise AnnotationError(f"--answer_mode {cfg.answer_mode} needs this project's prompt layout; Motif's "
                              "layout asks for its own answer format (use --answer_mode release)")
    if cfg.layout == "observations":
        try:
            skill_index(cfg.goal_key)
        except ValueError as exc:
            raise AnnotationError(f"--goal_key: {exc}") from exc
        template = load_template(cfg.prompt)
        instructions = DIRECT_ANSWER_INSTRUCTIONS if cfg.answer_mode == "constrained" else ANSWER_INSTRUCTIONS
        builder: Any = PromptBuilder(cfg.goal_key, template, answer_instructions=instructions)
        if cfg.system_prompt is not None:
            builder = PromptBuilder(cfg.goal_key, template, cfg.system_prompt, answer_instructions=instructions)
        dataset, data_path = load_annotation_dataset(cfg.directory, cfg.goal_key)
        return ObservationPairs(dataset, data_path), builder
    try:
        kwargs = {} if cfg.system_prompt is None else {"system_prompt": cfg.system_prompt}
        builder = MotifPromptBuilder(cfg.goal_key, cfg.prompt_version, load_prompt_file(cfg.prompt),
                                     context=cfg.prompt_context, **kwargs)
    except MotifPromptError as exc:
        raise AnnotationError(str(exc)) from exc
    keys = ["message"] + (["blstats"] if cfg.use_blstats else [])
    try:
        layout = open_motif_layout(cfg.directory, data_keys=keys)
        source = MotifPairs(layout, cfg.use_messages, cfg.use_blstats)
    except (MotifLayoutError, ValueError) as exc:
        raise AnnotationError(f"--directory {cfg.directory}: {exc}") from exc
    return source, builder


class _TokenCount:
    """Tokens of a run's replies; None once any reply came without counts (the rule-based backends')."""

    def __init__(self) -> None:
        self.prompt: int | None = 0
        self.completion: int | None = 0

    def add(self, completions: list[Completion]) -> None:
        for c in completions:
            if self.prompt is None or not c.has_usage:
                self.prompt = self.completion = None
                return
            self.prompt += c.prompt_tokens
            self.completion += c.completion_tokens


class _ConversationLog:
    """``{logdir}/{annotator}.chunk{i}.jsonl``: one section per run, a header line (``"run"``: when it started,
    its backend, model, answer mode, folders) followed by that run's pair records (``"pair"``)."""

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


def pair_seeds(seed: int | None, pairs: np.ndarray, attempt: int) -> list[int] | None:
    """The sampling seed of each pair's request (``attempt`` 0: the question, 1: the retry), from ``--seed`` and the
    pair's index alone: the same labels whatever ``--batch_size``, chunking or resume point. None without a seed."""
    return None if seed is None else [request_seed(seed, int(p), attempt) for p in pairs]


def labels_model(cfg: AnnotationConfig) -> str | None:
    """The model a run's labels are recorded under: None for a backend that calls no model (whatever ``--model``
    says); labels asked another way (``answer_mode``) are another annotator's, for the mixing check and the
    provenance."""
    if cfg.backend in NO_MODEL_BACKENDS:
        return None
    return cfg.model if cfg.answer_mode == "release" else f"{cfg.model} ({cfg.answer_mode} answers)"


def _held_by(sources: list[dict[str, Any]]) -> str:
    return "; ".join(f"{sum(b - a for a, b in src['pairs'])} pairs by {_who(src['backend'], src['model'])}"
                     for src in sources)


def _check_same_annotator(cfg: AnnotationConfig, sources: list[dict[str, Any]], cpath: Path, pending: int) -> None:
    """A run adds labels of its backend and model to those already there: another annotator's are refused
    unless ``allow_mixed_annotators`` (then each is recorded with its pair ranges). With nothing left to ask, a
    run would label nothing and leave the other annotator's labels as the final file: refused too (no flag
    but a fresh start or another name makes it this run's)."""
    others = [src for src in sources if (src["backend"], src["model"]) != (cfg.backend, labels_model(cfg))]
    if not others or (cfg.allow_mixed_annotators and pending):
        return
    this_run = f"this run is {_who(cfg.backend, labels_model(cfg))}"
    if not pending:
        raise AnnotationError(
            f"{final_path(cfg.preference_dir, cfg.annotator)} already holds labels of another annotator for every pair "
            f"of the chunk ({_held_by(others)}); {this_run} and would label nothing, leaving those labels as the final "
            "file. Pass --ignore_existing to label every pair afresh (the file is replaced when the run finishes), or "
            "write elsewhere: --preference_dir DIR or --custom_annotator_string NAME"
        )
    raise AnnotationError(
        f"{cpath} already holds labels of another annotator ({_held_by(others)}); {this_run}. Pass "
        "--allow_mixed_annotators to add this run's labels (each annotator is then recorded with its pair ranges in "
        "the metadata), --ignore_existing to start over, or --custom_annotator_string to write under another name"
    )


def annotate_chunk(cfg: AnnotationConfig, backend: Backend | None = None) -> AnnotationSummary:
    """Runs (or resumes) one chunk, then merges if every chunk is complete.

    ``backend`` may be passed in (tests, benchmarks, in-process pipelines); otherwise it is
    created from ``cfg`` after the input has been checked."""
    if backend is None and not cfg.merge:
        try:
            check_backend_name(cfg.backend)
        except BackendError as exc:
            raise AnnotationError(f"--backend: {exc}") from exc
    try:  # the same rules the scripts apply before calling (there: exit 2)
        check_annotation_flags(cfg)
    except FlagError as exc:
        raise AnnotationError(str(exc)) from None
    source, builder = _prepare(cfg)
    num_pairs = source.num_pairs
    chunk_bounds(num_pairs, cfg.n_chunks, cfg.chunk_number)  # a chunk out of range: refused before any file
    fingerprint = source.fingerprint()
    data_path = source.path
    final_dtype = np.int8 if cfg.layout == "motif" else np.int32  # Motif writes int8 labels
    tag = f"chunk {cfg.chunk_number} of {cfg.n_chunks}"
    pdir, sdir, ann = cfg.preference_dir, cfg.work_dir, cfg.annotator
    merge_kwargs = dict(state_dir=sdir, dtype=final_dtype,
                        extra_meta={"layout": cfg.layout, "goal_key": cfg.goal_key, "dataset": str(data_path),
                                    "prompt_context": cfg.prompt_context_name})

    if cfg.merge:
        merged = merge_chunks(pdir, ann, cfg.n_chunks, num_pairs, fingerprint, **merge_kwargs)
        if merged is None:
            missing = [
                i for i in range(cfg.n_chunks)
                if not (_read_json(chunk_meta_path(sdir, ann, i, cfg.n_chunks)) or {}).get("complete")
            ]
            raise AnnotationError(f"--merge: chunks {missing} of {cfg.n_chunks} for {ann} in {pdir} are missing or unfinished")
        return AnnotationSummary(ann, "merge", num_pairs, num_pairs, 0, 0, 0, 0.0, label_counts(merged),
                                 str(final_path(pdir, ann)), merged, layout=cfg.layout)

    if backend is None:  # a missing package (vLLM, llama.cpp): refused before the lock makes any folder
        check_installed(cfg.backend, cfg.model)
    lock = chunk_lock_path(sdir, ann, cfg.chunk_number, cfg.n_chunks)
    try:
        held = RunLock(lock).acquire()
    except LockHeldError as exc:
        raise AnnotationError(
            f"another annotation of {ann} {tag} into {sdir} is running: {exc}; wait for it to finish (a rerun then "
            "resumes), or write elsewhere: --preference_dir DIR or --custom_annotator_string NAME") from None
    try:
        return _annotate_held(cfg, backend, source, builder, fingerprint, merge_kwargs)
    finally:
        held.release()


def _annotate_held(cfg: AnnotationConfig, backend: Backend | None, source: PairSource, builder: Any,
                   fingerprint: str, merge_kwargs: dict[str, Any]) -> AnnotationSummary:
    """:func:`annotate_chunk` once it holds the chunk's lock: from reading the chunk's labels to the merge."""
    num_pairs = source.num_pairs
    start, end = chunk_bounds(num_pairs, cfg.n_chunks, cfg.chunk_number)
    data_path = source.path
    tag = f"chunk {cfg.chunk_number} of {cfg.n_chunks}"
    pdir, sdir, ann = cfg.preference_dir, cfg.work_dir, cfg.annotator
    labels = _initial_labels(cfg, num_pairs, start, end, fingerprint)
    cpath = chunk_path(sdir, ann, cfg.chunk_number, cfg.n_chunks)
    mpath = chunk_meta_path(sdir, ann, cfg.chunk_number, cfg.n_chunks)
    pending = np.flatnonzero(labels == UNKNOWN)
    old_meta = None if cfg.ignore_existing else _read_json(mpath)
    if old_meta is None and not cfg.ignore_existing and (labels != UNKNOWN).any():
        old_meta = _read_json(final_meta_path(sdir, ann))  # resumed from the final file's slice
    old_sources = _sources_of(old_meta, labels, start)
    recorded_model = labels_model(cfg)
    _check_same_annotator(cfg, old_sources, cpath, len(pending))
    meta = {
        "annotator": ann, "skill": cfg.goal_key, "dataset": str(data_path), "num_pairs": num_pairs,
        "start": start, "end": end, "n_chunks": cfg.n_chunks, "chunk_number": cfg.chunk_number,
        "fingerprint": fingerprint, "complete": False,
    }
    logger.info("%s %s: %d pairs [%d, %d) of %d, %d to annotate; dataset %s",
                ann, tag, end - start, start, end, num_pairs, len(pending), data_path)

    def write_meta(complete: bool) -> None:
        """Metadata says who made the labels the chunk file holds: written only when labels are produced
        (or the chunk is new), so a run that labels nothing leaves it as it was."""
        new_pairs = np.flatnonzero(labels[pending] != UNKNOWN) if len(pending) else np.zeros(0, np.int64)
        sources = _with_run(old_sources, cfg.backend, recorded_model, pending[new_pairs] + start)
        atomic_write_json(mpath, {**meta, "complete": complete, **provenance(sources, end - start)}, sort_keys=True)

    # The backend comes first, so a missing vLLM or an unreachable server writes nothing.
    own_backend = backend is None
    if len(pending) and own_backend:
        backend = _build_backend(cfg, builder)
    # Then the (possibly fresh) chunk: from here on its files always exist.
    fresh_chunk = cfg.ignore_existing or not cpath.exists() or old_meta is None
    if cfg.ignore_existing or not cpath.exists():
        save_preferences(cpath, labels)
    if len(pending) or fresh_chunk:
        write_meta(complete=False)

    annotated = retried = unparseable = identical = 0
    tokens = _TokenCount()
    unusable_example = ""
    t0 = time.perf_counter()
    if len(pending):
        assert backend is not None
        logger.info("backend: %s", backend.describe())
        log_path = Path(cfg.logdir) / f"{ann}.chunk{cfg.chunk_number}.jsonl" if cfg.log_conversations else None
        # every run opens its own section: runs into other folders, or with another backend, share the file
        conv_log = _ConversationLog(log_path, {
            "run": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "annotator": ann, "backend": cfg.backend,
            "model": recorded_model, "labelled_by": labelled_by(cfg.backend, recorded_model),
            "answer_mode": cfg.answer_mode, "preference_dir": str(pdir),
            "dataset": str(data_path), "chunk": tag, "pairs_to_ask": int(len(pending)),
            "system": builder.system_prompt})
        delay = float(os.environ.get(TEST_DELAY_ENV, "0") or 0)
        jh, jm, jt = (_json_str(part)[1:-1] for part in builder.parts)
        size = pairs_per_call(cfg)
        batches = [pending[i:i + size] for i in range(0, len(pending), size)]
        # the bar counts pairs: a batch of a slow model can take many minutes
        bar = tqdm(total=len(pending), desc=f"{ann} {tag}", unit="pair", disable=not cfg.progress)
        try:
            for b, local in enumerate(batches):
                pairs = local + start
                caps_list = source.captions(pairs)
                codes = [TIE] * len(pairs)
                replies: list[list[str]] = [[] for _ in pairs]
                # Motif's annotator does not ask about a pair whose two descriptions read the same: a tie
                asked = [j for j, (c1, c2) in enumerate(caps_list) if not (source.decides_identical and c1 == c2)]
                identical += len(pairs) - len(asked)
                convs = [builder.conversation(*caps_list[j]) for j in asked]
                seeds = pair_seeds(cfg.seed, pairs[asked], attempt=0)
                if not convs:
                    done: list[Completion] = []
                elif cfg.answer_mode == "constrained":
                    done = backend.complete_choice(convs, ANSWER_CHOICES, seeds=seeds)
                else:
                    done = backend.complete(convs, seeds=seeds)
                tokens.add(done)
                texts = [c.text for c in done]
                if len(texts) != len(convs):
                    raise BackendError(f"{backend.describe()} returned {len(texts)} replies for {len(convs)} prompts")
                for j, text in zip(asked, texts):
                    replies[j].append(text)
                    codes[j] = builder.parse(text)
                bad = [k for k, j in enumerate(asked) if codes[j] == UNKNOWN]
                if bad and cfg.retry_unparseable:
                    retried += len(bad)
                    again = [builder.retry_conversation(convs[k], texts[k]) for k in bad]
                    seeds = pair_seeds(cfg.seed, pairs[[asked[k] for k in bad]], attempt=1)
                    done = (backend.complete_choice(again, ANSWER_CHOICES, seeds=seeds)
                            if cfg.answer_mode == "constrained_retry" else backend.complete(again, seeds=seeds))
                    tokens.add(done)
                    second = [c.text for c in done]
                    for k, text in zip(bad, second):
                        j = asked[k]
                        replies[j].append(text)
                        codes[j] = builder.parse(text)
                labels[local] = codes
                annotated += len(codes)
                unparseable += sum(1 for c in codes if c == UNKNOWN)
                if not unusable_example:
                    unusable_example = next((" / ".join(replies[j]) for j in asked if codes[j] == UNKNOWN), "")
                if conv_log.active:
                    # JSON by hand: the fixed parts of the prompt are escaped once per run.
                    conv_log.write([
                        f'{{"pair": {p}, "prompt": "{jh}{_json_str(c1)[1:-1]}{jm}{_json_str(c2)[1:-1]}{jt}", '
                        f'"replies": [{", ".join(map(_json_str, r))}], "label": {code}}}'
                        for p, (c1, c2), r, code in zip(pairs.tolist(), caps_list, replies, codes) if r
                    ])
                if (b + 1) % cfg.flushing_freq == 0:
                    # the log first: a kill between the two then leaves logged pairs to redo, never
                    # labelled pairs whose conversation is lost
                    conv_log.flush()
                    write_meta(complete=False)
                    save_preferences(cpath, labels)
                bar.update(len(pairs))
                if delay:
                    time.sleep(delay)
        finally:
            bar.close()
            conv_log.close()
            write_meta(complete=False)
            save_preferences(cpath, labels)
            if own_backend:
                backend.close()
    seconds = time.perf_counter() - t0
    if len(pending) or fresh_chunk or not (old_meta or {}).get("complete"):
        write_meta(complete=True)

    merged = merge_chunks(pdir, ann, cfg.n_chunks, num_pairs, fingerprint, **merge_kwargs)
    summary = AnnotationSummary(
        ann, tag, num_pairs, end - start, annotated, retried, unparseable, seconds, label_counts(labels),
        str(final_path(pdir, ann)) if merged is not None else None, merged, cfg.goal_key, identical, cfg.layout,
        unusable_example, tokens.prompt, tokens.completion,
        "" if len(pending) else (_held_by(old_sources) or "no record of who made them"),
    )
    for line in summary.text().splitlines():  # the scripts print the summary: once on the screen
        logger.debug(line)
    return summary


def run_annotation(cfg: AnnotationConfig) -> np.ndarray | None:
    """Annotates one chunk (resuming if possible); returns the labels of the final merged
    file, or ``None`` if other chunks of the run remain."""
    return annotate_chunk(cfg).merged
