"""Labelling the pairs: :func:`annotate` runs the annotation pipeline itself
(:func:`rlaif.annotate.annotate_chunk`) with one backend over the on-policy pairs and, when asked,
the relabelled offline pairs; :func:`backend_info` says in words what the backend is (the
heuristic and random backends are stand-ins, not LLMs)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from common.llm import DEFAULT_MODEL
from rlaif.annotate import AnnotationConfig, annotate_chunk
from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.heuristic import STAND_IN_NOTICE

from .config import LLM_BACKENDS, AnnotatorSettings


def backend_info(backend: str) -> dict[str, Any]:
    """What the backend is, in words: the heuristic is a stand-in, not an LLM."""
    if backend == "heuristic":
        return {"name": backend, "is_llm": False, "description": "rule-based stand-in for the LLM (rlaif.heuristic)",
                "note": f"{STAND_IN_NOTICE}; its labels are NOT an LLM's"}
    if backend == "random":
        return {"name": backend, "is_llm": False, "description": "random labels (a chance baseline, not an LLM)",
                "note": "random answers; agreement near 0.5 is expected"}
    return {"name": backend, "is_llm": True, "description": f"LLM annotator through the {backend} backend", "note": ""}


def annotate(datasets: Sequence[ObservationDataset], skill: str, settings: AnnotatorSettings, seed: int,
             work_dir: Path, progress: bool) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Labels the pairs of each dataset with one annotation run (:func:`rlaif.annotate.annotate_chunk`,
    one backend for all of them); the files land in ``work_dir``."""
    messages = np.concatenate([d.messages[: 2 * d.num_pairs] for d in datasets])
    stats = np.concatenate([d.stats[: 2 * d.num_pairs] for d in datasets])
    data_dir = work_dir / "annotated"
    save_dataset(data_dir / f"{skill}.npz", ObservationDataset(messages, stats, dict(datasets[0].meta)))
    name = f"agreement_{skill}_{settings.backend}"
    acfg = AnnotationConfig(
        goal_key=skill, directory=str(data_dir), preference_dir=str(work_dir / "preference"),
        logdir=str(work_dir / "annotation_logs"), custom_annotator_string=name, backend=settings.backend,
        model=settings.model or DEFAULT_MODEL, base_url=settings.base_url, num_gpus=settings.num_gpus,
        temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
        max_tokens=settings.max_tokens, seed=seed, prompt=settings.prompt, batch_size=settings.batch_size,
        ignore_existing=True, log_conversations=settings.log_conversations, concurrency=settings.concurrency,
        timeout=settings.timeout, max_retries=settings.max_retries, progress=progress,
    )
    if settings.device_map is not None:
        acfg.backend_kwargs["device_map"] = settings.device_map
    summary = annotate_chunk(acfg)
    labels = summary.merged
    if labels is None:  # one chunk: the run always merges
        raise RuntimeError(f"annotation of {data_dir} did not produce {name}.npy")
    out, start = [], 0
    for d in datasets:
        out.append(np.asarray(labels[start:start + d.num_pairs], dtype=np.int32))
        start += d.num_pairs
    info = {"annotator": name, "retried": summary.retried, "unparseable": summary.unparseable,
            "seconds": round(summary.seconds, 3), "model": acfg.model if settings.backend in LLM_BACKENDS else None}
    return out, info
