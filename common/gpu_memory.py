"""Will a model's weights fit the visible GPUs? A pre-flight check run before vLLM loads anything.

vLLM finds out that a model does not fit only after minutes of loading, with an out-of-memory error that
does not name the flags that fix it. This estimates the weight memory from the model's ``config.json``
(a Llama-style decoder: embeddings, attention with grouped KV heads, a gated MLP, norms) and the bytes
per weight (``--dtype``, ``--quantization`` or the checkpoint's own ``quantization_config``), and refuses
when the weights split over ``--num_gpus`` cards leave too little of each card's share
(``--gpu_memory_utilization``) for the KV cache. Figures, by this estimate: Llama 3.1 8B 16 GB in
bf16, 70B 141 GB, 405B 811 GB (406 GB in FP8).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

logger = logging.getLogger(__name__)

GB = 1e9
#: vLLM's own default share of each GPU's memory
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
#: of a GPU's share, at least this much must stay free of weights for the KV cache and activations
KV_CACHE_RESERVE = 0.1
#: bytes per weight of a ``--dtype`` (vLLM's ``auto`` reads the checkpoint's ``torch_dtype``)
DTYPE_BYTES = {"float32": 4.0, "float": 4.0, "float16": 2.0, "half": 2.0, "bfloat16": 2.0}
#: bytes per weight of a quantization method (``--quantization`` or the checkpoint's ``quant_method``)
QUANT_BYTES = {"fp8": 1.0, "fbgemm_fp8": 1.0, "compressed-tensors": 1.0, "awq": 0.5, "gptq": 0.5,
               "bitsandbytes": 0.5, "gguf": 0.5}


class ModelMemoryError(ValueError):
    """The model's weights do not fit the GPUs with these flags (the message names the flags to change)."""


@dataclass(frozen=True)
class WeightEstimate:
    parameters: int
    bytes_per_weight: float
    precision: str  # what the bytes per weight came from, e.g. "bfloat16" or "fp8 quantization"

    @property
    def total_bytes(self) -> float:
        return self.parameters * self.bytes_per_weight


def count_parameters(config: dict[str, Any]) -> int:
    """Parameters of a Llama-style decoder from its ``config.json`` (Llama, Mistral, Qwen2 and SmolLM
    name these fields alike); ``KeyError`` naming the field when one is missing."""
    hidden = int(config["hidden_size"])
    layers = int(config["num_hidden_layers"])
    inter = int(config["intermediate_size"])
    vocab = int(config["vocab_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q and o; k and v
    mlp = 3 * hidden * inter  # gate, up, down
    per_layer = attention + mlp + 2 * hidden  # two norms
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    return embeddings + layers * per_layer + hidden


def estimate_weights(config: dict[str, Any], dtype: Optional[str] = None,
                     quantization: Optional[str] = None) -> WeightEstimate:
    """Weight memory of the model as vLLM would load it with these ``--dtype`` and ``--quantization``."""
    params = count_parameters(config)
    method = quantization or (config.get("quantization_config") or {}).get("quant_method")
    if method:
        if method not in QUANT_BYTES:
            raise ModelMemoryError(f"unknown quantization {method!r}; known: {', '.join(sorted(QUANT_BYTES))}")
        return WeightEstimate(params, QUANT_BYTES[method], f"{method} quantization")
    name = dtype if dtype and dtype != "auto" else str(config.get("torch_dtype") or "bfloat16")
    if name not in DTYPE_BYTES:
        raise ModelMemoryError(f"unknown --dtype {name!r}; known: auto, {', '.join(sorted(DTYPE_BYTES))}")
    return WeightEstimate(params, DTYPE_BYTES[name], name)


def tensor_parallel_size_for(config: dict[str, Any], at_least: float) -> int:
    """The smallest tensor parallel size of at least ``at_least`` GPUs that vLLM accepts for this model
    (it must divide the number of attention heads)."""
    heads = int(config.get("num_attention_heads") or 1)
    size = max(1, int(-(-at_least // 1)))
    while heads % size and size < heads:
        size += 1
    return size


def check_gpu_count(gpu_bytes: Sequence[int], num_gpus: int) -> None:
    """:class:`ModelMemoryError` when no GPU, or fewer than ``num_gpus``, are visible."""
    if not gpu_bytes:
        raise ModelMemoryError("no CUDA GPU is visible")
    if num_gpus > len(gpu_bytes):
        raise ModelMemoryError(f"--num_gpus {num_gpus} but only {len(gpu_bytes)} GPU(s) are visible")


def check_fits(model: str, config: dict[str, Any], gpu_bytes: Sequence[int], num_gpus: int,
               gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION, dtype: Optional[str] = None,
               quantization: Optional[str] = None) -> WeightEstimate:
    """Raises :class:`ModelMemoryError` when the weights split over ``num_gpus`` of the cards in
    ``gpu_bytes`` (each card's total memory) take more than ``1 - KV_CACHE_RESERVE`` of the share vLLM may
    use; returns the estimate otherwise."""
    check_gpu_count(gpu_bytes, num_gpus)
    est = estimate_weights(config, dtype, quantization)
    smallest = min(gpu_bytes[:num_gpus])
    budget = smallest * gpu_memory_utilization * (1 - KV_CACHE_RESERVE)
    per_gpu = est.total_bytes / num_gpus
    if per_gpu > budget:
        needed = tensor_parallel_size_for(config, est.total_bytes / budget)
        fixes = []
        if needed <= len(gpu_bytes):
            fixes.append(f"--num_gpus {needed} (tensor parallel)")
        else:
            fixes.append(f"a node with at least {needed} such GPUs (--num_gpus {needed})")
        if est.bytes_per_weight > 1:
            fixes.append("--quantization fp8 (or a checkpoint already in FP8, e.g. the -FP8 variant)")
        fixes += [f"--gpu_memory_utilization above {gpu_memory_utilization}" if gpu_memory_utilization < 0.95 else "",
                  "a smaller --model"]
        raise ModelMemoryError(
            f"{model}: about {est.parameters / 1e9:.1f}B parameters, {est.total_bytes / GB:.0f} GB of {est.precision} "
            f"weights, {per_gpu / GB:.0f} GB per GPU over --num_gpus {num_gpus}; each GPU has "
            f"{smallest / GB:.0f} GB, of which {budget / GB:.0f} GB may hold weights (--gpu_memory_utilization "
            f"{gpu_memory_utilization}, {KV_CACHE_RESERVE:.0%} of it kept for the KV cache). Fixes: "
            + "; ".join(f for f in fixes if f))
    return est


def visible_gpu_bytes() -> list[int]:
    """Total memory of each visible CUDA GPU (empty without torch or a GPU)."""
    try:
        import torch  # lazy: optional here (the vLLM environment has torch, a CPU annotation run may not)
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [int(torch.cuda.get_device_properties(i).total_memory) for i in range(torch.cuda.device_count())]


def read_model_config(model: str) -> Optional[dict[str, Any]]:
    """The model's ``config.json``: from a local folder, or from the Hugging Face cache for a hub id (no
    download). None when it cannot be found (the check is then skipped with a warning)."""
    path = Path(model) / "config.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            return None
        cached = try_to_load_from_cache(model, "config.json")
        if not isinstance(cached, str):
            return None
        path = Path(cached)
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        logger.warning("%s: unreadable (%s); the memory check is skipped", path, exc)
        return None


def preflight(model: str, num_gpus: int, gpu_memory_utilization: Optional[float] = None,
              dtype: Optional[str] = None, quantization: Optional[str] = None,
              gpu_bytes: Optional[Sequence[int]] = None) -> Optional[WeightEstimate]:
    """:func:`check_fits` on the model's config and the visible GPUs; None (with a warning) when the
    config cannot be read or is not a Llama-style decoder."""
    gpus = list(gpu_bytes) if gpu_bytes is not None else visible_gpu_bytes()
    check_gpu_count(gpus, num_gpus)  # also when the config cannot be read
    config = read_model_config(model)
    if config is None:
        logger.warning("%s: no config.json found locally; cannot check that the weights fit the GPUs", model)
        return None
    util = DEFAULT_GPU_MEMORY_UTILIZATION if gpu_memory_utilization is None else gpu_memory_utilization
    try:
        est = check_fits(model, config, gpus, num_gpus, util, dtype, quantization)
    except KeyError as exc:
        logger.warning("%s: config.json has no %s; cannot check that the weights fit the GPUs", model, exc)
        return None
    logger.info("%s: about %.0f GB of %s weights, %.0f GB per GPU over %d GPU(s)", model,
                est.total_bytes / GB, est.precision, est.total_bytes / GB / num_gpus, num_gpus)
    return est
