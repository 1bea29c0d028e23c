"""Every call this project makes into vLLM, checked against the installed vLLM's own signatures and parsers.

Runs wherever vLLM imports (the environment of requirements-vllm.txt; importing it needs no GPU):

    python -m venv venv-vllm && venv-vllm/bin/pip install -r requirements-vllm.txt pytest
    venv-vllm/bin/python -m pytest -q tests/test_vllm_contract.py

The main environment has no vLLM, so there the module is skipped. What it checks: the engine arguments
``common.llm.VLLMBackend`` gives ``vllm.LLM`` (named parameters, or fields of the ``EngineArgs`` its
``**kwargs`` go to), ``SamplingParams`` built for real, ``generate``'s prompt form and keywords, the output
fields read, the server's chat tokenization that offline prompts copy, and every ``vllm serve`` flag the
launcher, the slurm jobs, README.md and docs/ pass, parsed by vLLM's own serve parser.
"""
from __future__ import annotations

import inspect
import re
import subprocess
from pathlib import Path

import pytest

vllm = pytest.importorskip("vllm")

REPO = Path(__file__).resolve().parents[1]


def _llm_accepts(name: str) -> bool:
    from vllm.engine.arg_utils import EngineArgs

    named = inspect.signature(vllm.LLM.__init__).parameters
    return name in named or name in inspect.signature(EngineArgs).parameters


def test_the_engine_arguments_the_backend_passes_are_accepted():
    from common.llm import VLLM_ENGINE_ARGS

    for name in ("model", "tensor_parallel_size", "seed", *VLLM_ENGINE_ARGS):
        assert _llm_accepts(name), f"vllm.LLM does not accept {name}"


def test_sampling_params_as_the_backend_builds_them():
    from common.llm import SamplingConfig

    s = SamplingConfig(temperature=0.1, top_p=0.95, top_k=50, max_tokens=512, seed=0)
    params = vllm.SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens,
                                 seed=s.seed)
    assert (params.temperature, params.top_p, params.top_k, params.max_tokens, params.seed) == (0.1, 0.95, 50, 512, 0)
    assert vllm.SamplingParams(top_k=-1).top_k in (-1, 0)  # the backend's "no top-k"


def test_generate_takes_token_id_prompts_and_the_keywords_used():
    from vllm.inputs import TokensPrompt
    from vllm.outputs import CompletionOutput, RequestOutput

    params = inspect.signature(vllm.LLM.generate).parameters
    assert "use_tqdm" in params and "sampling_params" in params
    assert "prompt_token_ids" in TokensPrompt.__annotations__  # the dict the backend passes
    assert {"prompt_token_ids", "outputs"} <= set(inspect.signature(RequestOutput.__init__).parameters)
    assert {"text", "token_ids"} <= set(CompletionOutput.__dataclass_fields__)


def test_the_server_tokenizes_chat_prompts_without_special_tokens():
    """``common.llm.chat_prompt_token_ids`` copies this: template text, no added begin-of-text."""
    try:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    except ImportError:  # older layouts
        from vllm.entrypoints.openai.protocol import ChatCompletionRequest
    assert ChatCompletionRequest.model_fields["add_special_tokens"].default is False


def test_the_servers_request_reads_the_choice_list_of_a_constrained_reply():
    """``--answer_mode constrained`` sends llama.cpp's ``grammar`` and vLLM's ``structured_outputs.choice`` in one
    body: vLLM must accept the body and restrict the reply to the list."""
    from common.llm import OpenAIBackend
    from rlaif.prompts import ANSWER_CHOICES

    try:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    except ImportError:  # older layouts
        from vllm.entrypoints.openai.protocol import ChatCompletionRequest
    backend = OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m", check_connection=False)
    try:
        body = backend._constrained_payload([{"role": "user", "content": "?"}], ANSWER_CHOICES)
    finally:
        backend.close()
    request = ChatCompletionRequest(**body)
    assert list(request.extract_structured_outputs().choice) == list(ANSWER_CHOICES)


def _serve_parser():
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.platforms import current_platform
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if not current_platform.device_type:
        # the parser's defaults ask for the device type, which a CUDA build of vLLM on a machine without a GPU
        # does not know; the flags themselves do not depend on it
        pytest.MonkeyPatch().setattr(current_platform, "device_type", "cpu")
    return make_arg_parser(FlexibleArgumentParser())


def _parse_serve(argv: list[str]):
    """``vllm serve MODEL ...``'s arguments, parsed by vLLM's own parser (SystemExit on an unknown flag)."""
    return _serve_parser().parse_args(argv)


def test_the_launchers_vllm_serve_command_parses(tmp_path):
    """The command the launcher starts (its "starting:" line; a `vllm` on PATH that exits at once stands in for
    the server) through vLLM's parser."""
    import shlex
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "vllm").write_text("#!/usr/bin/env bash\nexit 3\n")
    (bindir / "vllm").chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "PYTHON": sys.executable, "LLM_SERVER_WAIT_S": "5"}
    out = subprocess.run(["bash", "scripts/launch_llm_server.sh", "/models/Meta-Llama-3.1-8B-Instruct", "2", "9001",
                          "--gpu-memory-utilization", "0.85", "--quantization", "fp8"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    started = [line for line in out.stdout.splitlines() if line.startswith("starting: ")]
    argv = shlex.split(started[0][len("starting: "):])
    assert argv[:2] == ["vllm", "serve"]
    args = _parse_serve(argv[2:])
    assert args.tensor_parallel_size == 2 and args.port == 9001 and args.max_model_len == 8192
    assert args.gpu_memory_utilization == 0.85 and args.quantization == "fp8"
    assert args.served_model_name == ["Meta-Llama-3.1-8B-Instruct"]


def _vllm_serve_lines() -> list[tuple[str, str]]:
    """``(where, command)`` of every ``vllm serve ...`` in README.md, docs/ and the slurm templates (placeholders
    filled with sample values)."""
    sources = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "slurm").glob("*.sbatch"))]
    fill = {"weights": "org/Model-FP8", "model": "org/Model", "gpus": "8", "port": "8000"}
    lines = []
    for path in sources:
        text = re.sub(r"{{(\w+)}}", lambda m: fill.get(m.group(1), "x"), path.read_text()).replace("\\\n", " ")
        lines += [(path.name, m.group(0)) for m in re.finditer(r"vllm serve [^`\n'\")&;]+", text)]
    return lines


def test_every_vllm_serve_command_in_the_docs_and_the_slurm_jobs_parses():
    import shlex

    lines = _vllm_serve_lines()
    assert {"gpu_and_slurm.md", "annotate_server.sbatch", "baseline_llm.sbatch"} <= {where for where, _ in lines}
    for where, line in lines:
        argv = [a if not a.startswith("$") else "1" for a in shlex.split(line.split("#")[0])[2:]]
        if not any(a.startswith("--") for a in argv):
            continue  # prose ("`vllm serve` on a GPU", "vllm serve exited ...") rather than a command
        try:
            _parse_serve(argv)
        except SystemExit as exc:
            raise AssertionError(f"{where}: vllm serve rejects {line!r}") from exc
