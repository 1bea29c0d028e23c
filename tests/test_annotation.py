"""Annotation: backends, chunking, resume after kill -9, concurrent chunks, merge, bad input."""
from __future__ import annotations

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

from common.llm import Backend, BackendError, OpenAIBackend, SamplingConfig, make_backend, request_seed
from common.nethack.messages import encode_message
from common.run_lock import RunLock
from rlaif import heuristic
from rlaif.annotate import (
    TEST_DELAY_ENV,
    AnnotationConfig,
    AnnotationError,
    annotate_chunk,
    chunk_bounds,
    chunk_lock_path,
    chunk_path,
    final_path,
    run_annotation,
)
from rlaif.captions import caption_sample
from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.label_comparison import label_agreement
from rlaif.preferences import FIRST, SECOND, TIE, UNKNOWN, load_preferences, save_preferences
from rlaif.prompts import ANSWER_CHOICES, ANSWER_INSTRUCTIONS, DIRECT_ANSWER_INSTRUCTIONS, PromptBuilder, parse_answer
from scripts import annotate_pairs
from tests.annotation_fake_server import FakeChatServer

REPO = Path(__file__).resolve().parents[1]

_MESSAGES = [
    "", "You climb down the stairs.", "f - a scroll labeled ZELGO MER.", "There is a black flash.",
    "You kill the newt!", "Welcome to Asidonhopo's general store!", "There is a staircase up here.",
    "Asidonhopo offers 12 gold pieces for your dagger.  Sell it?", "It's a wall.",
]


def make_dataset(num_pairs: int, seed: int = 0, markers: list[str] | None = None) -> ObservationDataset:
    rng = np.random.default_rng(seed)
    n = 2 * num_pairs
    messages = np.zeros((n, 2, 256), np.uint8)
    stats = np.zeros((n, 2, 6), np.int32)
    for i in range(n):
        for j in range(2):
            messages[i, j] = encode_message(_MESSAGES[rng.integers(len(_MESSAGES))])
        if markers is not None:  # the first sample of each pair carries its server scenario
            messages[i, 1] = encode_message(f"SCENARIO-{markers[(i // 2) % len(markers)]} sample {i}")
        depth = int(rng.integers(1, 6))
        stats[i, 0] = [depth, rng.integers(0, 40), 10, 12, 1, 1]
        stats[i, 1] = stats[i, 0]
        stats[i, 1, 0] += rng.integers(-1, 2)
        stats[i, 1, 1] += rng.integers(0, 3)
    return ObservationDataset(messages, stats, {"source": "test"})


def write_dataset(root: Path, skill: str, ds: ObservationDataset) -> Path:
    path = root / "og_dataset" / f"{skill}.npz"
    save_dataset(path, ds)
    return path


def config(root: Path, skill: str = "descender", **kw) -> AnnotationConfig:
    base = dict(
        goal_key=skill, directory=str(root / "og_dataset"), preference_dir=str(root / "preference"),
        logdir=str(root / "logs"), backend="heuristic", batch_size=8, flushing_freq=1, progress=False,
    )
    base.update(kw)
    return AnnotationConfig(**base)


def cli(root: Path, *args: str, skill: str = "descender") -> list[str]:
    return [
        "--goal_key", skill, "--directory", str(root / "og_dataset"), "--preference_dir", str(root / "preference"),
        "--logdir", str(root / "logs"), "--no_progress", *args,
    ]


# ------------------------------------------------------------------ heuristic and random backends


def _judge(skill: str, first: tuple, second: tuple) -> int:
    caps = [caption_sample(*_sample(*obs)) for obs in (first, second)]
    return parse_answer(heuristic.judge(PromptBuilder(skill).user_prompt(*caps), skill))


def _sample(after: str, depth_change: int = 0, gold_change: int = 0) -> tuple[np.ndarray, np.ndarray]:
    s0 = [3, 10, 10, 12, 1, 1]
    s1 = [3 + depth_change, 10 + gold_change, 10, 12, 1, 1]
    return np.stack([encode_message(""), encode_message(after)]), np.array([s0, s1], np.int32)


def test_heuristic_rules_follow_the_skill_descriptions() -> None:
    assert _judge("descender", ("", 0), ("You climb down the stairs.", 1)) == SECOND
    assert _judge("descender", ("", -1), ("", 0)) == SECOND
    assert _judge("ascender", ("You climb up the stairs.", -1), ("", 1)) == FIRST
    assert _judge("discoverer", ("", 0, 7), ("", 1, 7)) == FIRST
    assert _judge("discoverer", ("It's a wall.", 0), ("You kill the newt!", 0)) == SECOND
    assert _judge("worshipper", ("There is a black flash as the ring hits the altar.", 0), ("", 0)) == FIRST
    assert _judge("merchant", ("", 0), ("Asidonhopo offers 12 gold pieces for your dagger.", 0)) == SECOND
    assert _judge("merchant", ("You stole 12 zorkmids worth of merchandise.", 0), ("", 0)) == SECOND
    assert _judge("merchant", ("", 0), ("", 0)) == TIE


def test_heuristic_backend_answers_in_the_llm_format_and_handles_retries() -> None:
    backend = make_backend("heuristic", skill="descender")
    conv = PromptBuilder("descender").conversation(caption_sample(*_sample("", 1)), caption_sample(*_sample("", 0)))
    (reply,) = backend.generate([conv])
    assert "stand-in" in reply and parse_answer(reply) == FIRST
    (retry,) = backend.generate([conv + [{"role": "assistant", "content": "?"}, {"role": "user", "content": "again"}]])
    assert retry == "Answer: 1"
    (bad,) = backend.generate([[conv[0], {"role": "user", "content": "no captions here"}]])
    assert parse_answer(bad) == UNKNOWN
    with pytest.raises(BackendError):
        make_backend("heuristic")


def test_random_backend_is_seeded() -> None:
    convs = [[{"role": "user", "content": "x"}]] * 200
    a = make_backend("random", seed=3).generate(convs)
    b = make_backend("random", seed=3).generate(convs)
    c = make_backend("random", seed=4).generate(convs)
    assert a == b and a != c
    codes = {parse_answer(r) for r in a}
    assert codes == {FIRST, SECOND, TIE}


def test_unknown_backend_and_missing_vllm() -> None:
    with pytest.raises(BackendError, match="valid backends"):
        make_backend("gpt-9")
    try:
        import vllm  # noqa: F401
        have_vllm = True
    except ImportError:
        have_vllm = False
    if not have_vllm:
        with pytest.raises(BackendError) as info:
            make_backend("vllm", model="some/model", num_gpus=1)
        text = str(info.value)
        assert "requirements-vllm.txt" in text and "--backend openai" in text and "--backend heuristic" in text


def test_default_cli_backend_stops_with_the_fix_when_vllm_is_missing(tmp_path, capsys) -> None:
    try:
        import vllm  # noqa: F401
        pytest.skip("vllm is installed here; this checks the message shown where it is not")
    except ImportError:
        pass
    write_dataset(tmp_path, "descender", make_dataset(4))
    assert annotate_pairs.main(cli(tmp_path)) == 2  # a missing optional package: exit 2, as serve_local_llm
    err = capsys.readouterr().err
    assert "requirements-vllm.txt" in err and "--backend heuristic" in err
    assert not (tmp_path / "preference").exists()  # stopped before writing anything


# ------------------------------------------------------------------ chunking, resume, merge (in process)


def test_chunk_bounds_cover_all_pairs_once() -> None:
    for p, n in [(10, 3), (7, 7), (5, 1), (100, 8)]:
        bounds = [chunk_bounds(p, n, i) for i in range(n)]
        assert bounds[0][0] == 0 and bounds[-1][1] == p
        assert all(bounds[i][1] == bounds[i + 1][0] for i in range(n - 1))
    with pytest.raises(AnnotationError, match="chunk_number"):
        chunk_bounds(10, 2, 2)


def test_heuristic_run_writes_final_file_and_log(tmp_path) -> None:
    write_dataset(tmp_path, "descender", make_dataset(20))
    labels = run_annotation(config(tmp_path))
    assert labels is not None and labels.shape == (20,) and labels.dtype == np.int32
    assert set(labels.tolist()) <= {FIRST, SECOND, TIE}
    final = load_preferences(tmp_path / "preference" / "llama3_descender_default.npy", 20)
    np.testing.assert_array_equal(final, labels)
    log = (tmp_path / "logs" / "llama3_descender_default.chunk0.jsonl").read_text().splitlines()
    header, records = json.loads(log[0]), [json.loads(x) for x in log[1:]]
    assert "system" in header and len(records) == 20
    assert (header["backend"], header["model"], header["labelled_by"], header["preference_dir"]) == (
        "heuristic", None, "rule-based stand-in, no language model", str(tmp_path / "preference"))
    assert [r["pair"] for r in records] == list(range(20))
    assert all(r["label"] == labels[r["pair"]] and "Moment 1" in r["prompt"] for r in records)
    # every run records its label shares next to the final file
    meta = json.loads((tmp_path / "preference" / "llama3_descender_default.meta.json").read_text())
    counts = np.bincount(labels, minlength=4)
    assert meta["label_counts"] == {"first": int(counts[0]), "second": int(counts[1]), "tie": int(counts[2]),
                                    "unknown": int(counts[3])}
    assert meta["label_shares"]["first"] == pytest.approx(counts[0] / 20)


def test_summary_compares_label_shares_with_the_release() -> None:
    from rlaif.annotate import AnnotationSummary

    labels = np.array([FIRST] * 5 + [TIE] * 5, dtype=np.int32)
    summary = AnnotationSummary("llama3_ascender_default", "chunk 0 of 1", 10, 10, 10, 0, 0, 1.0, {}, "x.npy",
                                labels, "ascender")
    text = summary.text()
    assert "first 0.500 second 0.000 tie 0.500 unknown 0.000" in text
    assert "authors' release for ascender: first 0.326 second 0.414 tie 0.260" in text
    assert "WARNING: 50% of the pairs are ties or unknown" in text
    summary.merged = np.array([FIRST, SECOND] * 5, dtype=np.int32)
    assert "WARNING" not in summary.text()


def test_chunks_and_merge_equal_a_single_run(tmp_path) -> None:
    write_dataset(tmp_path, "ascender", make_dataset(23))
    reference = run_annotation(config(tmp_path, "ascender", custom_annotator_string="ref"))
    results = [run_annotation(config(tmp_path, "ascender", n_chunks=3, chunk_number=i)) for i in (2, 0, 1)]
    assert results[0] is None and results[1] is None
    np.testing.assert_array_equal(results[2], reference)
    part = load_preferences(chunk_path(tmp_path / "preference", "llama3_ascender_default", 1, 3))
    assert len(part) == chunk_bounds(23, 3, 1)[1] - chunk_bounds(23, 3, 1)[0]
    merged = run_annotation(config(tmp_path, "ascender", n_chunks=3, merge=True))
    np.testing.assert_array_equal(merged, reference)


def test_resume_skips_labelled_pairs_and_retries_unknown(tmp_path) -> None:
    write_dataset(tmp_path, "worshipper", make_dataset(16))
    cfg = config(tmp_path, "worshipper")
    heur = run_annotation(cfg)
    cpath = chunk_path(tmp_path / "preference", cfg.annotator, 0, 1)
    mixed = heur.copy()
    mixed[::2] = UNKNOWN
    mixed[1::4] = (heur[1::4] + 1) % 3  # labels a rerun must keep although the rules disagree
    save_preferences(cpath, mixed)
    summary = annotate_chunk(cfg)
    assert summary.annotated == 8
    expected = heur.copy()
    expected[1::4] = mixed[1::4]
    np.testing.assert_array_equal(summary.merged, expected)


def test_ignore_existing_starts_over(tmp_path) -> None:
    write_dataset(tmp_path, "merchant", make_dataset(6))
    cfg = config(tmp_path, "merchant")
    final = tmp_path / "preference" / f"{cfg.annotator}.npy"
    save_preferences(final, np.full(9, TIE, np.int32))  # an older annotation of another dataset size
    with pytest.raises(AnnotationError, match="ignore_existing"):
        run_annotation(cfg)
    assert load_preferences(final).tolist() == [TIE] * 9
    cfg.ignore_existing = True
    assert run_annotation(cfg).shape == (6,)


def test_final_file_of_another_dataset_of_the_same_size_is_refused(tmp_path) -> None:
    write_dataset(tmp_path, "merchant", make_dataset(6, seed=1))
    cfg = config(tmp_path, "merchant")
    first = run_annotation(cfg)
    write_dataset(tmp_path, "merchant", make_dataset(6, seed=2))
    with pytest.raises(AnnotationError, match="different dataset"):
        run_annotation(cfg)
    np.testing.assert_array_equal(load_preferences(tmp_path / "preference" / f"{cfg.annotator}.npy"), first)



@pytest.mark.parametrize("damage", [b"{\"num_pairs\": 6, \"finger", b"", b"[1, 2]"])
def test_damaged_metadata_is_an_error_not_a_disabled_guard(tmp_path, damage) -> None:
    """The metadata is what tells one dataset's labels from another's: an unreadable file must
    stop the run (naming it) instead of silently switching the check off."""
    write_dataset(tmp_path, "merchant", make_dataset(6, seed=1))
    cfg = config(tmp_path, "merchant")
    first = run_annotation(cfg)
    meta = tmp_path / "preference" / f"{cfg.annotator}.meta.json"
    meta.write_bytes(damage)
    write_dataset(tmp_path, "merchant", make_dataset(6, seed=2))  # the case the guard exists for
    with pytest.raises(AnnotationError, match="meta.json") as err:
        run_annotation(cfg)
    assert "--ignore_existing" in str(err.value)
    np.testing.assert_array_equal(load_preferences(tmp_path / "preference" / f"{cfg.annotator}.npy"), first)
    assert meta.read_bytes() == damage  # left as it was
    # the way out named in the message works
    labels = run_annotation(config(tmp_path, "merchant", ignore_existing=True))
    assert labels.shape == (6,) and json.loads(meta.read_text())["num_pairs"] == 6


# ------------------------------------------------------------------ transformers backend (tiny local model)


def _tiny_model(path: Path, answer_token_first: bool, answers: bool = False) -> None:
    """``answer_token_first``: token 0 is "Answer: 1" and every logit is equal; ``answers``: the three answer lines
    are tokens among 20 words, under random weights (a reply is a random draw that can be an answer)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = sorted({w for text in (PromptBuilder("descender").user_prompt("a", "b"),) for w in text.split()})
    special = ["<unk>", "<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    if answer_token_first:  # token 0 decodes to a whole answer line
        special.insert(0, "Answer: 1")
    else:  # random output cannot spell an answer
        words = [w for w in words if not w.lower().startswith("answer")]
    if answers:
        special += ["Answer: 1", "Answer: 2", "Answer: none"]
    vocab = {tok: i for i, tok in enumerate(special + words[:20 if answers else 200])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )
    fast.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}"
    )
    fast.save_pretrained(path)
    cfg = LlamaConfig(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512, pad_token_id=vocab["<pad>"], bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    if answer_token_first:  # every logit equal: greedy decoding always picks token 0, "Answer: 1"
        with torch.no_grad():
            model.lm_head.weight.zero_()
    model.save_pretrained(path)


@pytest.mark.parametrize("answer_token_first", [True, False])
@pytest.mark.slow
def test_transformers_backend_with_a_tiny_local_model(tmp_path, answer_token_first) -> None:
    model_dir = tmp_path / "tiny"
    _tiny_model(model_dir, answer_token_first)
    write_dataset(tmp_path, "descender", make_dataset(3))
    cfg = config(
        tmp_path, backend="transformers", model=str(model_dir), temperature=0.0, max_tokens=4, batch_size=2,
    )
    summary = annotate_chunk(cfg)
    records = [json.loads(x) for x in (tmp_path / "logs" / f"{cfg.annotator}.chunk0.jsonl").read_text().splitlines()[1:]]
    if answer_token_first:
        assert summary.merged.tolist() == [FIRST] * 3 and summary.retried == 0
        assert records[0]["replies"][0].startswith("Answer: 1")
    else:  # random weights: no answer, one retry each, then unknown
        assert summary.merged.tolist() == [UNKNOWN] * 3
        assert summary.retried == 3 and summary.unparseable == 3
        assert all(len(r["replies"]) == 2 for r in records)


@pytest.mark.slow
def test_transformers_labels_at_a_fixed_seed_do_not_depend_on_the_batch_size_or_a_resume(tmp_path) -> None:
    """transformers sampled every row from one global generator, seeded once: a pair's reply depended on the batch
    it came in and on the batches before it."""
    model_dir = tmp_path / "tiny"
    _tiny_model(model_dir, answer_token_first=False, answers=True)
    write_dataset(tmp_path, "descender", make_dataset(20))
    kw = dict(backend="transformers", model=str(model_dir), temperature=1.0, max_tokens=3, seed=5)
    backend = make_backend("transformers", model=str(model_dir), device="cpu", temperature=1.0, max_tokens=3)
    labels = _same_labels_at_any_batch_size_and_resume(tmp_path, backend, **kw)
    assert len({tuple(r) for r in _replies(tmp_path, "b1").values()}) > 10  # sampled: the replies differ by pair
    assert (labels != UNKNOWN).any()


# ------------------------------------------------------------------ openai and hf backends (local fake server)

_SCENARIOS = ["good1", "good2", "tie", "retry", "garbage", "flaky", "slow"]
_EXPECTED = {"good1": FIRST, "good2": SECOND, "tie": TIE, "retry": SECOND, "garbage": UNKNOWN, "flaky": FIRST, "slow": SECOND}


@pytest.mark.parametrize("backend", ["openai", "hf"])
@pytest.mark.slow
def test_remote_backends_against_a_scripted_server(tmp_path, backend) -> None:
    write_dataset(tmp_path, "merchant", make_dataset(len(_SCENARIOS), markers=_SCENARIOS))
    with FakeChatServer(slow_seconds=1.5) as server:
        cfg = config(
            tmp_path, "merchant", backend=backend, base_url=server.url, model="fake-model", timeout=0.5,
            max_retries=3, backend_kwargs={"backoff": 0.01}, batch_size=4, concurrency=4, seed=7,
        )
        summary = annotate_chunk(cfg)
    assert summary.merged.tolist() == [_EXPECTED[s] for s in _SCENARIOS]
    assert summary.retried == 2 and summary.unparseable == 1  # "retry" and "garbage"
    body = server.requests[0]
    assert body["model"] == "fake-model" and body["temperature"] == 0.1 and body["top_p"] == 0.95
    assert body["messages"][0]["role"] == "system"
    # each request's seed comes from --seed, its pair's index and the attempt (the retry is attempt 1)
    retry = [b for b in server.requests if len(b["messages"]) == 4]
    assert {b["seed"] for b in server.requests} - {b["seed"] for b in retry} == \
        {request_seed(7, pair, 0) for pair in range(len(_SCENARIOS))}
    assert {b["seed"] for b in retry} == {request_seed(7, _SCENARIOS.index(s), 1) for s in ("retry", "garbage")}
    if backend == "openai":
        assert body["top_k"] == 50


def test_openai_backend_gives_up_after_retries(tmp_path) -> None:
    with FakeChatServer() as server:
        backend = OpenAIBackend(base_url=server.url, model="m", max_retries=2, backoff=0.01,
                                sampling=SamplingConfig(top_k=0))
        server.reply = lambda body: (500, "always broken")  # type: ignore[method-assign]
        with pytest.raises(BackendError, match="3 attempt"):
            backend.generate([[{"role": "user", "content": "hi"}]])
        backend.close()


def test_unreachable_server_fails_clearly_and_keeps_existing_files(tmp_path, capsys) -> None:
    import socket

    write_dataset(tmp_path, "descender", make_dataset(5))
    final = tmp_path / "preference" / "llama3_descender_default.npy"
    save_preferences(final, np.array([0, 1, 2, 3, 3], np.int32))
    before = final.read_bytes()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    rc = annotate_pairs.main(cli(tmp_path, "--backend", "openai", "--base_url", f"http://127.0.0.1:{port}/v1"))
    assert rc == 1
    assert "cannot reach the server" in capsys.readouterr().err
    assert final.read_bytes() == before
    assert sorted(p.name for p in final.parent.iterdir()) == [final.name]  # no chunk files either


# ------------------------------------------------------------------ CLI: flags and bad input


def test_both_flag_spellings_are_accepted() -> None:
    parser = annotate_pairs.build_parser()
    a = parser.parse_args(["--goal-key", "merchant", "--n-annotation-chunks", "4", "--chunk-number", "3",
                           "--ignore-existing", "--custom-annotator-string", "x"])
    b = parser.parse_args(["--goal_key", "merchant", "--n_chunks", "4", "--chunk_number", "3",
                           "--ignore_existing", "True", "--custom_annotator_string", "x"])
    assert vars(a) == vars(b)
    assert a.n_chunks == 4 and a.chunk_number == 3 and a.ignore_existing is True
    defaults = parser.parse_args(["--goal_key", "merchant"])
    assert (defaults.backend, defaults.model, defaults.temperature, defaults.top_p, defaults.top_k) == (
        "vllm", "meta-llama/Llama-3.1-70B-Instruct", 0.1, 0.95, 50)
    assert (defaults.directory, defaults.preference_dir, defaults.logdir) == ("og_dataset", "preference", "annotation_logs")
    assert "stand-in" in parser.format_help()
    # --device was an ambiguous prefix of --device_map and --device-map ("ambiguous option", exit 2)
    assert parser.parse_args(["--goal_key", "merchant", "--device", "cpu"]).device == "cpu"


def test_the_backends_that_constrain_are_listed_alike_in_help_and_error(tmp_path, capsys) -> None:
    """--answer_mode's help said "--backend llamacpp or openai", its error listed "llamacpp, transformers, hf-local,
    openai", and --backend's help did not list hf-local at all."""
    helps = {a.dest: a.help for a in annotate_pairs.build_parser()._actions}
    listed = "llamacpp, transformers (alias hf-local), openai"
    assert f"The constrained modes need --backend {listed}" in helps["answer_mode"]
    assert "transformers (alias hf-local)" in helps["backend"]
    write_dataset(tmp_path, "descender", make_dataset(2))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "random", "--answer_mode", "constrained")) == 2
    assert f"use --backend {listed}" in capsys.readouterr().err


def test_annotating_over_another_annotators_finished_labels_is_refused(tmp_path, capsys) -> None:
    """SmolLM2 into a folder holding the stand-in's finished labels exited 0 in 0.15 s, "0 pairs annotated", and left
    the stand-in's labels as the final file without a word."""
    write_dataset(tmp_path, "descender", make_dataset(6))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic")) == 0
    final = tmp_path / "preference" / "llama3_descender_default.npy"
    before = {p.name: p.read_bytes() for p in final.parent.iterdir()}
    capsys.readouterr()
    rc = annotate_pairs.main(cli(tmp_path, "--backend", "transformers", "--model", "smollm2-135m",
                                 "--answer_mode", "constrained"))
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and len(err.splitlines()) == 1
    assert "already holds labels of another annotator for every pair of the chunk (6 pairs by backend heuristic" in err
    assert "this run is backend transformers (model smollm2-135m (constrained answers))" in err
    assert "--ignore_existing" in err and "--preference_dir" in err
    assert {p.name: p.read_bytes() for p in final.parent.iterdir()} == before
    # --ignore_existing labels afresh: the final file is then the new annotator's
    assert annotate_pairs.main(cli(tmp_path, "--backend", "random", "--ignore_existing")) == 0
    meta = json.loads((tmp_path / "preference" / "llama3_descender_default.meta.json").read_text())
    assert meta["backend"] == "random" and meta["stand_in_share"] == 1.0
    # the same annotator again: nothing to ask, and the summary says so and whose labels they are
    capsys.readouterr()
    assert annotate_pairs.main(cli(tmp_path, "--backend", "random")) == 0
    assert "nothing asked: every pair of the chunk already had a label (6 pairs by backend random" in \
        capsys.readouterr().out


def test_each_run_opens_a_log_section_naming_its_backend_and_model(tmp_path) -> None:
    """Two runs into different --preference_dir appended to one log under one header naming no backend, so the
    stand-in's conversations and the model's could not be told apart."""
    write_dataset(tmp_path, "descender", make_dataset(3))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic")) == 0
    with FakeChatServer() as server:
        assert annotate_pairs.main(cli(tmp_path, "--backend", "openai", "--base_url", server.url, "--model", "fake-model",
                                       "--answer_mode", "constrained", "--preference_dir", str(tmp_path / "other"))) == 0
    lines = [json.loads(x) for x in (tmp_path / "logs" / "llama3_descender_default.chunk0.jsonl").read_text().splitlines()]
    headers = [i for i, r in enumerate(lines) if "run" in r]
    assert headers == [0, 4] and all("pair" in r for i, r in enumerate(lines) if i not in headers)
    assert [(lines[i]["backend"], lines[i]["model"], lines[i]["preference_dir"]) for i in headers] == [
        ("heuristic", None, str(tmp_path / "preference")),
        ("openai", "fake-model (constrained answers)", str(tmp_path / "other"))]
    assert all(lines[i]["pairs_to_ask"] == 3 for i in headers)


def test_progress_counts_pairs_and_the_summary_is_printed_once(tmp_path, capsys, caplog) -> None:
    """A batch-counting bar sat at 0/2 batch for 21 minutes on a slow model; the summary came twice, once logged
    by the library and once printed by the script."""
    write_dataset(tmp_path, "descender", make_dataset(10))
    args = [a for a in cli(tmp_path, "--backend", "heuristic", "--batch_size", "4") if a != "--no_progress"]
    with caplog.at_level("INFO"):
        assert annotate_pairs.main(args) == 0
    captured = capsys.readouterr()
    assert "10/10" in captured.err and "pair/s" in captured.err and "batch" not in captured.err
    assert captured.out.count("pairs/s over") == 1 and "pairs/s over" not in caplog.text


def test_speed_keeps_significant_digits() -> None:
    from rlaif.annotate import AnnotationSummary

    summary = AnnotationSummary("a", "chunk 0 of 1", 3, 3, 3, 0, 0, 200.0, {})
    assert "speed: 0.015 pairs/s over 200.00s" in summary.text()  # it said 0.0 pairs/s
    summary.seconds = 3 / 1234.5
    assert "speed: 1234 pairs/s" in summary.text() or "speed: 1235 pairs/s" in summary.text()


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is not None, reason="llama-cpp-python is installed here")
def test_a_missing_llama_cpp_exits_2_as_in_serve_local_llm(tmp_path, capsys) -> None:
    """annotate_pairs exited 1 where serve_local_llm exited 2 for the same missing package."""
    write_dataset(tmp_path, "descender", make_dataset(2))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "llamacpp", "--model", "smollm2-135m")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the llamacpp backend needs llama-cpp-python") and len(err.splitlines()) == 1


def test_cli_prints_summary_and_logs_stand_in_notice(tmp_path, capsys, caplog) -> None:
    write_dataset(tmp_path, "discoverer", make_dataset(10))
    with caplog.at_level("INFO"):
        rc = annotate_pairs.main(cli(tmp_path, "--backend", "heuristic", skill="discoverer"))
    assert rc == 0
    out = capsys.readouterr().out
    assert "pairs/s" in out and "unparseable" in out and "first" in out
    assert "heuristic annotator: a rule-based stand-in for the LLM" in caplog.text


@pytest.mark.parametrize(
    "setup, args, message",
    [
        ("missing", [], "no dataset"),
        ("odd", [], "odd"),
        ("ok", ["--n_chunks", "2", "--chunk_number", "2"], "out of range"),
        ("ok", ["--n_chunks", "2", "--merge"], "missing or unfinished"),
        ("resized", [], "--ignore_existing"),
        ("badchunk", [], "--ignore_existing"),
        ("ok", ["--prompt", "nope.txt"], "--prompt"),
    ],
)
def test_bad_input_exits_nonzero_without_touching_files(tmp_path, capsys, setup, args, message) -> None:
    pref = tmp_path / "preference"
    final = pref / "llama3_descender_default.npy"
    if setup != "missing":
        ds = make_dataset(4)
        if setup == "odd":
            ds = ObservationDataset(ds.messages[:7], ds.stats[:7])
        write_dataset(tmp_path, "descender", ds)
    save_preferences(final, np.array([1, 0, 2] if setup == "resized" else [1, 0, 2, 3], np.int32))
    if setup == "badchunk":  # a chunk file without its metadata: unknown origin
        save_preferences(chunk_path(pref, "llama3_descender_default", 0, 1), np.zeros(4, np.int32))
    snapshot = {p.name: p.read_bytes() for p in pref.iterdir()}
    rc = annotate_pairs.main(cli(tmp_path, "--backend", "heuristic", *args))
    assert rc == 2  # bad input, as every script's
    assert message in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in pref.iterdir()} == snapshot


def test_unknown_backend_flag(tmp_path, capsys) -> None:
    write_dataset(tmp_path, "descender", make_dataset(2))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "gpt-9")) == 2
    assert "valid backends" in capsys.readouterr().err


# ------------------------------------------------------------------ subprocesses: kill -9 and concurrent chunks


def _spawn(root: Path, *args: str, delay: float = 0.0, skill: str = "descender") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if delay:
        env[TEST_DELAY_ENV] = str(delay)
    return subprocess.Popen(
        [sys.executable, "-m", "scripts.annotate_pairs", *cli(root, "--backend", "heuristic", *args, skill=skill)],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_no_nle_or_sample_factory_or_torch_at_import(tmp_path) -> None:
    code = ("import sys, rlaif.annotate, common.llm, rlaif.heuristic, scripts.annotate_pairs; "
            "bad = [m for m in ('nle', 'sample_factory', 'torch', 'transformers', 'vllm', 'requests') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.serial
def test_kill_minus_9_then_resume_equals_an_uninterrupted_run(tmp_path) -> None:
    num_pairs = 60
    write_dataset(tmp_path, "descender", make_dataset(num_pairs, seed=5))
    reference = run_annotation(config(tmp_path, custom_annotator_string="reference"))
    cpath = chunk_path(tmp_path / "preference", "llama3_descender_default", 0, 1)
    proc = _spawn(tmp_path, "--batch_size", "4", "--flushing_freq", "1", delay=0.15)
    proc.stdout.close()  # type: ignore[union-attr]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if cpath.exists():
                done = int((np.load(cpath) != UNKNOWN).sum())
                if 8 <= done < num_pairs:
                    break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.02)
        else:
            pytest.fail("no flush seen")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]
    partial = np.load(cpath)
    assert 0 < int((partial != UNKNOWN).sum()) < num_pairs
    assert not (tmp_path / "preference" / "llama3_descender_default.npy").exists()
    resumed = _spawn(tmp_path)
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    done_before = int((partial != UNKNOWN).sum())
    assert f"{num_pairs - done_before} pairs annotated in this run" in out  # only the missing ones
    final = load_preferences(tmp_path / "preference" / "llama3_descender_default.npy", num_pairs)
    np.testing.assert_array_equal(final, reference)
    log = (tmp_path / "logs" / "llama3_descender_default.chunk0.jsonl").read_text().splitlines()
    parsed = []
    for line in log:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pass  # at most the line being written when the process was killed
    assert len(log) - len(parsed) <= 1
    # each run opened its own section: the killed one and the resumed one
    assert [r["backend"] for r in parsed if "run" in r] == ["heuristic", "heuristic"]
    assert {r["pair"] for r in parsed if "pair" in r} == set(range(num_pairs))


def test_two_chunks_running_at_once_lose_nothing(tmp_path) -> None:
    num_pairs = 41
    write_dataset(tmp_path, "merchant", make_dataset(num_pairs, seed=9))
    reference = run_annotation(config(tmp_path, "merchant", custom_annotator_string="reference"))
    procs = [_spawn(tmp_path, "--n_chunks", "2", "--chunk_number", str(i), "--batch_size", "5",
                    delay=0.02, skill="merchant") for i in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    final = load_preferences(tmp_path / "preference" / "llama3_merchant_default.npy", num_pairs)
    np.testing.assert_array_equal(final, reference)
    assert (final != UNKNOWN).all()


def test_an_annotation_while_another_holds_the_same_labels_is_refused_at_once(tmp_path, capsys) -> None:
    """Two annotations into the same folder at once both did all the work: twice the LLM's cost."""
    write_dataset(tmp_path, "descender", make_dataset(6))
    pref = tmp_path / "preference"
    lock = chunk_lock_path(pref, "llama3_descender_default", 0, 1)
    with RunLock(lock):  # what a first run holds while it works
        rc = annotate_pairs.main(cli(tmp_path, "--backend", "heuristic"))
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("error: ") and len(err.splitlines()) == 1
        assert (f"another annotation of llama3_descender_default chunk 0 of 1 into {pref} is running: {lock} is held "
                f"by pid {os.getpid()} on host {socket.gethostname()}, started ") in err
        assert "--preference_dir" in err
        assert sorted(p.name for p in pref.iterdir()) == [lock.name]  # nothing read, asked or written
        # another chunk, or another annotator's labels, are other files: they run
        assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic", "--n_chunks", "2")) == 0
        assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic", "--custom_annotator_string", "other")) == 0
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic")) == 0
    assert not list(pref.glob("*.lock"))  # each run removed its own lock file


@pytest.mark.serial
@pytest.mark.slow
def test_a_second_process_is_refused_naming_the_first_and_a_killed_ones_lock_is_taken_over(tmp_path) -> None:
    num_pairs = 40
    write_dataset(tmp_path, "descender", make_dataset(num_pairs, seed=3))
    reference = run_annotation(config(tmp_path, custom_annotator_string="reference"))
    lock = chunk_lock_path(tmp_path / "preference", "llama3_descender_default", 0, 1)
    cpath = chunk_path(tmp_path / "preference", "llama3_descender_default", 0, 1)
    first = _spawn(tmp_path, "--batch_size", "2", "--flushing_freq", "1", delay=0.5)  # 10 s: killed below
    try:
        deadline = time.monotonic() + 30
        # its first batch flushed (the log section first, then the labels)
        while not (cpath.exists() and (np.load(cpath) != UNKNOWN).any()) and time.monotonic() < deadline:
            assert first.poll() is None, "the first run ended before the second started"
            time.sleep(0.02)
        second = _spawn(tmp_path)
        out, err = second.communicate(timeout=60)
        assert first.poll() is None  # the second was refused while the first worked
        first.send_signal(signal.SIGKILL)  # the lock file stays, with the first's record
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        first.stdout.close()  # type: ignore[union-attr]
        first.stderr.close()  # type: ignore[union-attr]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert second.returncode == 2 and out == "" and "Traceback" not in err and len(errors) == 1
    assert f"held by pid {first.pid} on host {socket.gethostname()}" in errors[0]
    assert json.loads(lock.read_text())["pid"] == first.pid
    third = _spawn(tmp_path)
    out, err = third.communicate(timeout=60)
    assert third.returncode == 0, err
    assert f"taking the lock over from pid {first.pid} on host {socket.gethostname()}" in err
    np.testing.assert_array_equal(load_preferences(final_path(tmp_path / "preference", "llama3_descender_default")),
                                  reference)
    assert not lock.exists()
    log = [json.loads(x) for x in (tmp_path / "logs" / "llama3_descender_default.chunk0.jsonl").read_text().splitlines()
           if x.startswith("{") and x.endswith("}")]
    assert len([r for r in log if "run" in r]) == 2  # the first's section and the third's: the second asked nothing


class _CtrlCAfter(Backend):
    """A real backend that Ctrl-C stops after ``batches`` calls, as a user would."""

    def __init__(self, inner: Backend, batches: int) -> None:
        self.inner, self.batches = inner, batches

    def _call(self) -> None:
        if self.batches == 0:
            raise KeyboardInterrupt
        self.batches -= 1

    def complete(self, conversations, seeds=None):
        self._call()
        return self.inner.complete(conversations, seeds=seeds)

    def complete_choice(self, conversations, choices, seeds=None):
        self._call()
        return self.inner.complete_choice(conversations, choices, seeds=seeds)


def _replies(root: Path, annotator: str) -> dict[int, list[str]]:
    """Each pair's replies in the conversation log of ``annotator``."""
    lines = (root / "logs" / f"{annotator}.chunk0.jsonl").read_text().splitlines()
    return {r["pair"]: r["replies"] for r in map(json.loads, lines) if "pair" in r}


def _same_labels_at_any_batch_size_and_resume(root: Path, interrupted: Backend, **kw) -> np.ndarray:
    """Labels (and replies) of a fixed --seed at batch size 1, at 7, and stopped by Ctrl-C after two calls at batch
    size 7 then resumed at 3 (which asks the pairs still unknown again): all the same. Returns the first run's
    labels."""
    straight = annotate_chunk(config(root, custom_annotator_string="b1", batch_size=1, **kw)).merged
    assert annotate_chunk(config(root, custom_annotator_string="b7", batch_size=7, **kw)).merged.tolist() == \
        straight.tolist()
    stopped = config(root, custom_annotator_string="resumed", batch_size=7, **kw)
    with pytest.raises(KeyboardInterrupt):
        annotate_chunk(stopped, backend=_CtrlCAfter(interrupted, 2))
    assert 0 < len(_replies(root, "resumed")) < 20  # stopped part way, its finished batches saved
    stopped.batch_size = 3
    assert annotate_chunk(stopped).merged.tolist() == straight.tolist()
    replies = _replies(root, "b1")
    assert _replies(root, "b7") == replies and _replies(root, "resumed") == replies
    return straight


@pytest.mark.parametrize("backend", ["random", "openai"])
def test_labels_at_a_fixed_seed_do_not_depend_on_the_batch_size_or_a_resume(tmp_path, backend) -> None:
    """At --seed 0, annotations differed with --batch_size and across a resume (5 of 20 pairs at temperature 0.1):
    a sampling seed followed the batches. Each pair is now asked with its own seed, from --seed and its index."""
    write_dataset(tmp_path, "descender", make_dataset(20, markers=["sample"]))
    if backend == "random":
        labels = _same_labels_at_any_batch_size_and_resume(tmp_path, make_backend("random"), backend="random", seed=11)
    else:
        with FakeChatServer() as server:
            kw = dict(backend="openai", base_url=server.url, model="fake-model", seed=11)
            labels = _same_labels_at_any_batch_size_and_resume(
                tmp_path, make_backend("openai", base_url=server.url, model="fake-model"), **kw)
            seeds = {json.dumps(b["messages"]): b["seed"] for b in server.requests}
        assert len(set(seeds.values())) == len(seeds) == 20  # one seed per pair, the same in every run
    assert len(set(labels.tolist())) > 1  # the answers vary from pair to pair


# ------------------------------------------------------------------ vllm backend code path (stand-in module)


def test_vllm_backend_uses_tensor_parallel_sampling_params_and_chat_template(tmp_path, monkeypatch) -> None:
    """vLLM is not installed here: a stand-in module records how the backend drives it."""
    import types

    calls: dict = {}

    class FakeTokenizer:
        """Characters as token ids."""

        def apply_chat_template(self, conv, tokenize, add_generation_prompt):
            assert tokenize is False and add_generation_prompt is True
            return "|".join(f"{m['role']}:{m['content']}" for m in conv) + "|assistant:"

        def __call__(self, text, add_special_tokens):
            assert add_special_tokens is False  # as vLLM's server tokenizes a rendered chat template
            return {"input_ids": [ord(c) for c in text]}

    class FakeLLM:
        def __init__(self, model, tensor_parallel_size, seed, **kw):
            calls["llm"] = dict(model=model, tensor_parallel_size=tensor_parallel_size, seed=seed, **kw)

        def get_tokenizer(self):
            return FakeTokenizer()

        def generate(self, prompts, params, use_tqdm=True):
            texts = ["".join(map(chr, p["prompt_token_ids"])) for p in prompts]
            calls["prompts"], calls["params"] = texts, params
            out = types.SimpleNamespace
            return [out(outputs=[out(text="Answer: 2" if "retry" not in t else "Answer: 1")]) for t in texts]

    class FakeSamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM, SamplingParams=FakeSamplingParams))
    monkeypatch.setattr("common.llm.visible_gpu_bytes", lambda: [80 * 10**9] * 4)
    with pytest.raises(BackendError, match="only 4 GPU"):
        make_backend("vllm", model="m", num_gpus=8)
    write_dataset(tmp_path, "ascender", make_dataset(5))
    summary = annotate_chunk(config(tmp_path, "ascender", backend="vllm", model="org/model", num_gpus=4, seed=3))
    assert summary.merged.tolist() == [SECOND] * 5
    assert calls["llm"] == {"model": "org/model", "tensor_parallel_size": 4, "seed": 3}
    # one SamplingParams per prompt, each seeded from --seed and its pair's index
    assert [params.kw for params in calls["params"]] == [
        {"temperature": 0.1, "top_p": 0.95, "top_k": 50, "max_tokens": 512, "seed": request_seed(3, pair, 0)}
        for pair in range(5)]
    assert calls["prompts"][0].startswith("system:") and calls["prompts"][0].endswith("|assistant:")


def test_chat_completions_url() -> None:
    from common.llm import chat_completions_url

    assert chat_completions_url("http://h:8000") == "http://h:8000/v1/chat/completions"
    assert chat_completions_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"
    assert chat_completions_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"


def test_label_agreement() -> None:
    a = np.array([0, 1, 2, 3, 0, 1], np.int32)
    b = np.array([0, 0, 2, 0, 3, 1], np.int32)
    got = label_agreement(a, b)
    assert got["compared"] == 4 and got["agreement"] == 0.75
    assert got["decisive"] == 3 and got["decisive_agreement"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        label_agreement(a, b[:3])


def test_mostly_unusable_replies_fail_the_run_and_keep_the_pairs_for_a_resume(tmp_path, capsys) -> None:
    """A run whose replies are 100% unusable exited 0; above --max_unusable_share it exits 1 with the share and an
    example reply, the labels saved and the unusable pairs left unknown for a resume."""
    markers = ["garbage", "garbage", "garbage", "good1"]
    write_dataset(tmp_path, "merchant", make_dataset(4, markers=markers))
    with FakeChatServer() as server:
        args = cli(tmp_path, "--backend", "openai", "--base_url", server.url, "--model", "fake-model",
                   skill="merchant")
        assert annotate_pairs.main(args) == 1
        err = capsys.readouterr().err
        assert "3 of 4 pairs (75%) had no usable answer even after the retry, above --max_unusable_share 0.5" in err
        assert "An example reply: '" in err and "a resume asks them again" in err
        labels = load_preferences(tmp_path / "preference" / "llama3_merchant_default.npy", 4)
        assert labels.tolist() == [UNKNOWN, UNKNOWN, UNKNOWN, FIRST]
        asked = len(server.requests)
        # the resume asks only the unknown pairs again (twice each: the retry); 1 never fails
        assert annotate_pairs.main(args + ["--max_unusable_share", "1"]) == 0
        assert len(server.requests) - asked == 6
    assert annotate_pairs.main(args + ["--max_unusable_share", "1.5"]) == 2
    assert "--max_unusable_share must be a share from 0 to 1, got 1.5" in capsys.readouterr().err


# ------------------------------------------------------------------ provenance


def _meta_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "preference").glob("*.json"))}


def test_a_run_that_labels_nothing_leaves_the_provenance_as_it_was(tmp_path, capsys) -> None:
    """Re-running on a finished file with another backend, against an unreachable server, rewrote the metadata to
    `backend: openai, stand_in: false`: rule-based labels passed as an LLM's."""
    write_dataset(tmp_path, "descender", make_dataset(6))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic")) == 0
    before = _meta_files(tmp_path)
    meta = json.loads(before["llama3_descender_default.meta.json"])
    assert meta["backend"] == "heuristic" and meta["stand_in"] is True and meta["stand_in_share"] == 1.0
    assert meta["sources"] == [{"backend": "heuristic", "model": None, "labelled_by": meta["labelled_by"],
                                "stand_in": True, "pairs": [[0, 6]]}]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc = annotate_pairs.main(cli(tmp_path, "--backend", "openai", "--base_url", f"http://127.0.0.1:{port}/v1",
                                 "--model", "meta-llama/Llama-3.1-70B-Instruct"))
    assert rc == 2 and "already holds labels of another annotator" in capsys.readouterr().err
    assert _meta_files(tmp_path) == before


@pytest.mark.parametrize("backend, extra, said", [
    ("heuristic", [], "rule-based stand-in, no language model"),
    ("random", ["--model", "meta-llama/Llama-3.1-8B-Instruct"], "random labels, no language model"),
])
def test_a_stand_in_records_itself_and_no_language_model(tmp_path, capsys, backend, extra, said) -> None:
    """The rule-based stand-in's labels named --model's default, meta-llama/Llama-3.1-70B-Instruct, in their
    metadata, their sources and the refusal that quoted them: provenance named a model that never labelled."""
    write_dataset(tmp_path, "descender", make_dataset(4))
    pref = tmp_path / "preference"
    assert annotate_pairs.main(cli(tmp_path, "--backend", backend, *extra)) == 0
    metas = {p.name: json.loads(p.read_text()) for p in pref.glob("*.json")}
    assert sorted(metas) == ["llama3_descender_default.chunk0of1.json", "llama3_descender_default.meta.json"]
    for meta in metas.values():
        assert (meta["backend"], meta["model"], meta["stand_in"]) == (backend, None, True)
        assert [s["model"] for s in meta["sources"]] == [None]
        assert meta["labelled_by"] == said and [s["labelled_by"] for s in meta["sources"]] == [said]
    header = json.loads((tmp_path / "logs" / "llama3_descender_default.chunk0.jsonl").read_text().splitlines()[0])
    assert header["model"] is None and header["labelled_by"] == said
    written = "".join(p.read_text() for p in [*pref.glob("*.json"), tmp_path / "logs" / f"{header['annotator']}.chunk0.jsonl"])
    assert "Llama" not in written and "llama-3" not in written.lower()
    # every message that quotes who labelled says what it was
    capsys.readouterr()
    assert annotate_pairs.main(cli(tmp_path, "--backend", backend, *extra)) == 0
    assert f"every pair of the chunk already had a label (4 pairs by backend {backend} ({said}))" in capsys.readouterr().out
    other = "random" if backend == "heuristic" else "heuristic"
    assert annotate_pairs.main(cli(tmp_path, "--backend", other)) == 2
    err = capsys.readouterr().err
    assert f"(4 pairs by backend {backend} ({said})); this run is backend {other} (" in err and "Llama" not in err


def test_a_model_the_server_does_not_serve_is_refused_before_anything_is_asked(tmp_path, capsys) -> None:
    """A server that ignores the request's model name (llama.cpp's) answered with its own model, and the labels were
    recorded under --model's default, a model that never labelled them."""
    write_dataset(tmp_path, "descender", make_dataset(3))
    with FakeChatServer() as server:  # serves "fake-model"
        rc = annotate_pairs.main(cli(tmp_path, "--backend", "openai", "--base_url", server.url))
        err = capsys.readouterr().err
        assert not server.requests
    assert rc == 2 and err.startswith("error: ") and len(err.splitlines()) == 1
    assert f"--model meta-llama/Llama-3.1-70B-Instruct: the server at {server.url} serves fake-model, not it" in err
    assert not (tmp_path / "preference").exists()


def test_a_stand_in_record_that_names_a_model_is_read_as_naming_none(tmp_path) -> None:
    """Metadata that gave the stand-in --model's name: a resume by the same stand-in goes on (the same annotator),
    and the metadata it rewrites names no model."""
    write_dataset(tmp_path, "descender", make_dataset(4))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic")) == 0
    pref = tmp_path / "preference"
    path, chunk = pref / "llama3_descender_default.npy", pref / "llama3_descender_default.chunk0of1.npy"
    labels = load_preferences(path, 4)
    labels[2:] = UNKNOWN
    for p in (path, chunk):
        save_preferences(p, labels)
    for p in pref.glob("*.json"):
        meta = json.loads(p.read_text())
        named = {"model": "meta-llama/Llama-3.1-70B-Instruct"}
        meta.pop("labelled_by")
        meta.update(named, sources=[{k: v for k, v in {**s, **named}.items() if k != "labelled_by"}
                                    for s in meta["sources"]])
        p.write_text(json.dumps(meta))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic")) == 0
    for p in pref.glob("*.json"):
        meta = json.loads(p.read_text())
        assert meta["model"] is None and meta["sources"] == [
            {"backend": "heuristic", "model": None, "labelled_by": "rule-based stand-in, no language model",
             "stand_in": True, "pairs": [[0, 4]]}]


def test_resuming_with_another_annotator_is_refused_unless_mixing_is_allowed(tmp_path, capsys) -> None:
    write_dataset(tmp_path, "merchant", make_dataset(4, markers=["good1", "good2", "tie", "good1"]))
    path = tmp_path / "preference" / "llama3_merchant_default.npy"
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic", skill="merchant")) == 0
    labels = load_preferences(path, 4)
    labels[1:3] = UNKNOWN  # two pairs to ask again, as after unusable replies
    save_preferences(path, labels)
    for chunk in (tmp_path / "preference").glob("*.chunk0of1.npy"):
        save_preferences(chunk, labels)
    with FakeChatServer() as server:
        args = cli(tmp_path, "--backend", "openai", "--base_url", server.url, "--model", "fake-model", skill="merchant")
        before = _meta_files(tmp_path)
        assert annotate_pairs.main(args) == 2
        err = capsys.readouterr().err
        assert "already holds labels of another annotator (2 pairs by backend heuristic" in err
        assert "this run is backend openai (model fake-model)" in err and "--allow_mixed_annotators" in err
        assert _meta_files(tmp_path) == before and not server.requests
        assert annotate_pairs.main(args + ["--allow_mixed_annotators"]) == 0
    meta = json.loads((tmp_path / "preference" / "llama3_merchant_default.meta.json").read_text())
    assert meta["backend"] == "mixed" and meta["model"] == "mixed"
    assert [(s["backend"], s["pairs"]) for s in meta["sources"]] == [("heuristic", [[0, 1], [3, 4]]),
                                                                    ("openai", [[1, 3]])]
    assert meta["stand_in"] is True and meta["stand_in_share"] == 0.5
    assert load_preferences(path, 4).tolist()[1:3] == [SECOND, TIE]


# ------------------------------------------------------------------ constrained answers (--answer_mode)

GRAMMAR = 'root ::= "Answer: 1" | "Answer: 2" | "Answer: none"'


def test_constrained_answers_send_the_choices_to_the_server_and_label_every_pair(tmp_path, capsys) -> None:
    """--answer_mode constrained asks for the answer line alone and sends the three lines as llama.cpp's grammar
    and vLLM's choice list: a reply the release's mode could not use ("I like turtles.") cannot happen."""
    write_dataset(tmp_path, "descender", make_dataset(4, markers=["garbage", "good2", "tie", "retry"]))
    with FakeChatServer() as server:
        args = cli(tmp_path, "--backend", "openai", "--base_url", server.url, "--model", "fake-model",
                   "--answer_mode", "constrained")
        assert annotate_pairs.main(args) == 0, capsys.readouterr().err
        assert len(server.requests) == 4  # no retry: every reply is an answer line
        for body in server.requests:
            assert body["grammar"] == GRAMMAR
            assert body["structured_outputs"] == {"choice": list(ANSWER_CHOICES)}
            prompt = body["messages"][-1]["content"]
            assert prompt.endswith(DIRECT_ANSWER_INSTRUCTIONS) and ANSWER_INSTRUCTIONS not in prompt
    labels = load_preferences(tmp_path / "preference" / "llama3_descender_default.npy", 4)
    assert labels.tolist() == [FIRST, SECOND, TIE, FIRST]
    # the server's usage counts (1 + 1 per request here), summed over the run
    assert "tokens: 4 prompt + 4 completion, 2 per pair" in capsys.readouterr().out
    meta = json.loads((tmp_path / "preference" / "llama3_descender_default.meta.json").read_text())
    assert meta["sources"][0]["model"] == "fake-model (constrained answers)"


def test_constrained_retry_restricts_only_the_retry(tmp_path, capsys) -> None:
    write_dataset(tmp_path, "descender", make_dataset(2, markers=["garbage", "good2"]))
    with FakeChatServer() as server:
        args = cli(tmp_path, "--backend", "openai", "--base_url", server.url, "--model", "fake-model",
                   "--answer_mode", "constrained_retry")
        assert annotate_pairs.main(args) == 0, capsys.readouterr().err
        first, retry = [b for b in server.requests if len(b["messages"]) == 2], \
            [b for b in server.requests if len(b["messages"]) == 4]
        assert len(first) == 2 and len(retry) == 1
        assert all("grammar" not in b and "structured_outputs" not in b for b in first)
        assert first[0]["messages"][-1]["content"].endswith(ANSWER_INSTRUCTIONS)
        assert retry[0]["grammar"] == GRAMMAR and retry[0]["messages"][2]["content"] == "I like turtles."
    assert load_preferences(tmp_path / "preference" / "llama3_descender_default.npy", 2).tolist() == [FIRST, SECOND]
    assert "retried 1" in capsys.readouterr().out


def test_constrained_answers_need_a_backend_that_can_constrain(tmp_path, capsys) -> None:
    write_dataset(tmp_path, "descender", make_dataset(2))
    assert annotate_pairs.main(cli(tmp_path, "--backend", "heuristic", "--answer_mode", "constrained")) == 2
    err = capsys.readouterr().err
    assert "--answer_mode constrained restricts replies by constrained decoding, which --backend heuristic" in err
    assert "use --backend llamacpp, transformers (alias hf-local), openai" in err and not (tmp_path / "preference").exists()
    with pytest.raises(BackendError, match="cannot restrict a reply to fixed choices; use --backend llamacpp or transformers"):
        make_backend("random").complete_choice([[{"role": "user", "content": "?"}]], ANSWER_CHOICES)
    cfg = config(tmp_path, backend="openai", base_url="http://127.0.0.1:9/v1", layout="motif",
                 answer_mode="constrained")
    with pytest.raises(AnnotationError, match="needs this project's prompt layout"):
        annotate_chunk(cfg)


def test_resuming_in_another_answer_mode_is_another_annotator(tmp_path, capsys) -> None:
    write_dataset(tmp_path, "descender", make_dataset(3, markers=["good1", "good2", "tie"]))
    path = tmp_path / "preference" / "llama3_descender_default.npy"
    with FakeChatServer() as server:
        args = cli(tmp_path, "--backend", "openai", "--base_url", server.url, "--model", "fake-model")
        assert annotate_pairs.main(args + ["--answer_mode", "constrained"]) == 0
        labels = load_preferences(path, 3)
        labels[2] = UNKNOWN
        for p in [path, *(tmp_path / "preference").glob("*.chunk0of1.npy")]:
            save_preferences(p, labels)
        assert annotate_pairs.main(args) == 2
        assert "(2 pairs by backend openai (model fake-model (constrained answers)))" in capsys.readouterr().err
