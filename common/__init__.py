"""The bottom layer: what every phase shares, importing no phase.

* :mod:`common.vocabulary`: the skills and the tasks;
* :mod:`common.nethack`: NetHack facts (bottom-line stats, actions, glyphs, messages, shop prices);
* :mod:`common.atomic_io`: files written whole or not at all;
* :mod:`common.torch_files`: torch checkpoints read with torch's safe loader, written atomically;
* :mod:`common.llm`: the one language-model client (annotation, code generation and anything later).

Nothing here imports NLE, sample-factory or vLLM at module import time except
:mod:`common.nethack.actions` (NLE's key codes), so annotation runs in a vLLM-only environment.
"""
