"""``--precision bf16`` in the policy network: its encoder and recurrent core run under ``torch.autocast``.

The run's precision is resolved once from the flag (:func:`common.precision.resolve_precision`) into
``cfg.compute_precision`` (``fp32`` or ``bf16``). With ``bf16`` the encoders of :mod:`rl_baseline.models.cdgpt5`
and the recurrent core (:class:`AutocastCoreRNN`, installed through sample-factory's core factory) compute their
matrix products and convolutions in bfloat16 and hand float32 on: the heads, the action distribution and every
loss are computed in float32 as with ``fp32``, and the weights (float32) get float32 gradients, so the optimizer
and its state are unchanged. ``fp32`` adds nothing to the forward pass.

Both the learner (sample-factory calls ``forward_head`` then ``forward_core`` then ``forward_tail``) and the
inference worker (``forward``, which calls the same three) go through these modules, and so does every
evaluation that builds the network from a configuration.

Autocast casts each float32 weight to bfloat16 again at every call, which at the inference worker's small
batches costs about as much as bfloat16 saves. A frozen copy of the network (every parameter with
``requires_grad`` False: sample-factory's inference worker makes its own copy so, and loads the learner's
weights into it after each update) therefore keeps the encoder's and the core's weights in bfloat16
(:func:`keep_frozen_weights_in`): the same rounded weights autocast would use, cast once per update by
``load_state_dict``. The learner's network, which trains, always keeps float32 weights.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from sample_factory.model.core import ModelCore, ModelCoreRNN, default_make_core_func
from torch import nn
from torch.nn.utils.rnn import PackedSequence


def compute_dtype(cfg: Any) -> Optional[torch.dtype]:
    """bfloat16 when the configuration's resolved precision is ``bf16``, else None (float32: no autocast)."""
    return torch.bfloat16 if getattr(cfg, "compute_precision", "fp32") == "bf16" else None


def autocast(dtype: Optional[torch.dtype], device: torch.device) -> torch.autocast:
    """``torch.autocast`` to ``dtype`` on ``device``'s kind, switched off when ``dtype`` is None."""
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def keep_frozen_weights_in(module: nn.Module, dtype: Optional[torch.dtype]) -> None:
    """Stores ``module``'s floating-point parameters in ``dtype`` when no gradient is wanted and none of them
    requires one (a frozen inference copy, module docstring); a no-op otherwise and once done. Buffers are left
    as they are (the release's blstats multipliers stay float32)."""
    if dtype is None or torch.is_grad_enabled():
        return
    first = next(module.parameters(), None)
    if first is None or first.dtype == dtype:
        return
    params = list(module.parameters())
    if any(p.requires_grad for p in params):
        return
    for p in params:
        if p.is_floating_point():
            p.data = p.data.to(dtype)


def as_float32(x: Any) -> Any:
    """A tensor (or a packed sequence's data) in float32; float32 input is returned as it is."""
    if isinstance(x, PackedSequence):
        return x if x.data.dtype == torch.float32 else x._replace(data=x.data.float())
    return x.float()


class AutocastCoreRNN(ModelCoreRNN):
    """sample-factory's GRU/LSTM core under autocast to bfloat16; outputs and new states in float32.

    Same parameters and names as :class:`ModelCoreRNN` (checkpoints move between precisions)."""

    def forward(self, head_output: Any, rnn_states: torch.Tensor) -> tuple[Any, torch.Tensor]:
        keep_frozen_weights_in(self, torch.bfloat16)
        with autocast(torch.bfloat16, rnn_states.device):
            x, new_rnn_states = super().forward(head_output, rnn_states)
        return as_float32(x), new_rnn_states.float()


def make_core(cfg: Any, core_input_size: int) -> ModelCore:
    """sample-factory's core factory, with :class:`AutocastCoreRNN` for a recurrent core under ``bf16``."""
    if cfg.use_rnn and compute_dtype(cfg) is not None:
        return AutocastCoreRNN(cfg, core_input_size)
    return default_make_core_func(cfg, core_input_size)
