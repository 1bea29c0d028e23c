"""Motif's release on this project: its dataset layout, annotation flags, reward network, RL flags, tasks and
evaluation, and its README's commands end to end (``test_motif_readme_commands_run_verbatim``)."""
from __future__ import annotations

import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.llm import Backend
from common.nethack.messages import encode_message
from rlaif.dataset import ObservationDataset, save_dataset
from rlaif.motif_dataset import (
    MotifLayoutError,
    export_motif_layout,
    load_motif_preferences,
    open_motif_layout,
)
from rlaif.preferences import FIRST, SECOND, TIE, UNKNOWN, save_preferences

REPO = Path(__file__).resolve().parents[1]

MESSAGES = ["", "You kill the newt!", "$ - 12 gold pieces.", "You descend the stairs.", "You hit the jackal.",
            "It's a wall.", "There is a staircase down here.", "Welcome to experience level 2.", "You die..."]

# Motif's README commands, character for character (README.md of facebookresearch/motif).
UNZIP = "cat motif_dataset_zipped/motif_dataset_part_* > motif_dataset.zip; unzip motif_dataset.zip; rm motif_dataset.zip"
ANNOTATE = """python -m scripts.annotate_pairs_dataset --directory motif_dataset \\
        --prompt-version default --goal-key defaultgoal \\
        --n-annotation-chunks 1 --chunk-number 0 \\
        --llm-size 70 --num-gpus 8"""
TRAIN_REWARD = """python -m scripts.train_reward  --batch_size 1024 --num_workers 40  \\
        --reward_lr 1e-5 --num_epochs 10 --seed 777 \\
        --dataset_dir motif_dataset --annotator llama70b_msg_defaultgoal_default \\
        --experiment standard_reward --train_dir train_dir/reward_saving_dir"""
MAIN = """python -m scripts.main --algo APPO --env nle_fixed_eat_action --num_workers 24 \\
        --num_envs_per_worker 20 --batch_size 4096 --reward_scale 0.1 --obs_scale 255.0 \\
        --train_for_env_steps 2_000_000_000 --save_every_steps 10_000_000 \\
        --keep_checkpoints 5 --stats_avg 1000 --seed 777  --reward_dir train_dir/reward_saving_dir/standard_reward/ \\
        --experiment standard_motif --train_dir train_dir/rl_saving_dir \\
        --extrinsic_reward 0.1 --llm_reward 0.1 --reward_encoder nle_torchbeast_encoder \\
        --root_env NetHackScore-v1 --beta_count_exponent 3 --eps_threshold_quantile 0.5"""


def argv_of(command: str, **sizes: str) -> list[str]:
    """A README command as argv (after ``python -m module``), with the values of ``sizes`` replaced."""
    argv = shlex.split(command.replace("\\\n", " "))[3:]
    for flag, value in sizes.items():
        i = argv.index(f"--{flag}")
        argv[i + 1] = value
    return argv


def make_dataset(num_pairs: int, seed: int = 0) -> ObservationDataset:
    rng = np.random.default_rng(seed)
    n = 2 * num_pairs
    messages = np.zeros((n, 2, 256), np.uint8)
    stats = np.zeros((n, 2, 6), np.int32)
    for i in range(n):
        messages[i, 0] = encode_message(MESSAGES[rng.integers(len(MESSAGES))])
        messages[i, 1] = encode_message(MESSAGES[rng.integers(len(MESSAGES))])
        stats[i, 0] = [1, rng.integers(0, 30), 12, 14, 1, 1]
        stats[i, 1] = stats[i, 0] + [rng.integers(0, 2), rng.integers(0, 5), 0, 0, 0, 0]
    return ObservationDataset(messages, stats, {"source": "test"})


def motif_dataset(root: Path, num_pairs: int = 24, labels: np.ndarray | None = None,
                  annotator: str = "llama3_descender_default") -> Path:
    ds = make_dataset(num_pairs)
    if labels is None:
        labels = np.random.default_rng(1).integers(0, 3, num_pairs).astype(np.int32)
    return export_motif_layout(ds, {annotator: labels}, root / "motif_dataset", progress=False)


def run(module: str, argv: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


# ------------------------------------------------------------------ the layout


def test_export_writes_the_layout_motifs_loader_reads(tmp_path):
    ds = make_dataset(10)
    labels = np.array([0, 1, 2, 3, 0, 1, 2, 0, 1, 3], np.int32)
    out = export_motif_layout(ds, {"llama3_descender_default": labels}, tmp_path / "motif_dataset", progress=False)
    d = out / "data"
    message, blstats = np.load(d / "message.npy"), np.load(d / "blstats.npy")
    chars, colors = np.load(d / "tty_chars.npy"), np.load(d / "tty_colors.npy")
    # pairs on axis 0, the two members on axis 1, one observation each (axis 2), as Motif's transforms expect
    assert message.shape == (10, 2, 1, 256) and message.dtype == np.uint8
    assert blstats.shape == (10, 2, 1, 27) and chars.shape == colors.shape == (10, 2, 1, 24, 80)
    assert chars.dtype == np.uint8 and colors.dtype == np.int8
    # pair k = samples 2k, 2k+1 of our format; each member is the sample's current message
    assert np.array_equal(message[3, 1, 0], ds.messages[7, 1])
    assert blstats[3, 1, 0, 12] == ds.stats[7, 1, 0] and blstats[3, 1, 0, 13] == ds.stats[7, 1, 1]  # depth, gold
    text = bytes(ds.messages[7, 1]).rstrip(b"\0")[:80]
    assert bytes(chars[3, 1, 0, 0, : len(text)]) == text and (chars[3, 1, 0, 1:] == ord(" ")).all()
    assert np.load(out / "info" / "experience_level.npy").shape == (10, 2)
    pref = np.load(out / "preference" / "llama3_descender_default.npy")
    assert pref.dtype == np.int8 and pref.tolist() == labels.tolist()
    layout = open_motif_layout(out)
    assert isinstance(layout.messages, np.memmap) and layout.num_pairs == 10 and layout.seq_len == 1
    with pytest.raises(MotifLayoutError, match="exists"):
        export_motif_layout(ds, {}, out, progress=False)


def test_export_script_picks_the_skills_preference_files(tmp_path):
    ds = make_dataset(6)
    save_dataset(tmp_path / "og_dataset" / "merchant.npz", ds)
    save_preferences(tmp_path / "preference" / "llama3_merchant_default.npy", np.zeros(6, np.int32))
    save_preferences(tmp_path / "preference" / "llama3_descender_default.npy", np.zeros(6, np.int32))
    save_preferences(tmp_path / "preference" / "llama3_merchant_other.npy", np.zeros(5, np.int32))  # wrong length
    proc = run("scripts.export_dataset", ["--format", "motif", "--dataset_dir", "og_dataset", "--skill", "merchant",
                                          "--out", "motif_dataset", "--no_progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "motif_dataset" / "preference").iterdir()) == ["llama3_merchant_default.npy"]
    again = run("scripts.export_dataset", ["--skill", "merchant", "--out", "motif_nope", "--annotator", "nope"],
                tmp_path)
    assert again.returncode != 0 and "nope" in again.stderr and not (tmp_path / "motif_nope").exists()
    # an existing --out is refused before the dataset is read (a dataset that is not there is not looked for)
    again = run("scripts.export_dataset", ["--skill", "merchant", "--dataset_dir", "none", "--out", "motif_dataset"],
                tmp_path)
    assert again.returncode == 2 and again.stderr == ("error: motif_dataset exists; pass --overwrite to replace it "
                                                      "(or choose another --out)\n")


def test_layout_is_memory_mapped_and_nothing_is_unpickled(tmp_path):
    out = motif_dataset(tmp_path)
    marker = tmp_path / "unpickled"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    # what Motif's own train_reward leaves in the folder, and an info array that needs unpickling
    (out / "train_split_info").mkdir()
    (out / "train_split_info" / "sorted_messages.pkl").write_bytes(pickle.dumps([Evil()]))
    np.save(out / "info" / "character.npy", np.array([[Evil(), Evil()]] * 24, dtype=object), allow_pickle=True)
    with pytest.raises(MotifLayoutError, match="unpickling"):
        open_motif_layout(out, info_keys=("character",))
    proc = run("scripts.annotate_pairs_dataset", ["--directory", str(out), "--backend", "heuristic", "--no-progress"],
               tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("case", ["no_message", "no_tty_colors", "short_blstats", "two_observations"])
@pytest.mark.slow
def test_a_broken_layout_is_a_clear_error_and_nothing_is_written(tmp_path, case):
    out = motif_dataset(tmp_path)
    data = out / "data"
    if case == "no_message":
        (data / "message.npy").unlink()
    elif case == "no_tty_colors":
        (data / "tty_colors.npy").unlink()
    elif case == "short_blstats":
        np.save(data / "blstats.npy", np.zeros((20, 2, 1, 27), np.int64))
    else:  # members of two observations: annotation joins them, reward training reads one (as Motif's)
        for key in ("message", "blstats", "tty_chars", "tty_colors"):
            arr = np.load(data / f"{key}.npy")
            np.save(data / f"{key}.npy", np.concatenate([arr, arr], axis=2))
    before = tree(tmp_path)
    reward = run("scripts.train_reward", ["--dataset_dir", "motif_dataset", "--annotator", "llama3_descender_default",
                                          "--experiment", "r", "--train_dir", "runs", "--batch_size", "4"], tmp_path)
    expected = {"no_message": "data/message.npy", "no_tty_colors": "data/tty_colors.npy",
                "short_blstats": "blstats.npy", "two_observations": "L = 1"}[case]
    assert reward.returncode == 2 and expected in reward.stderr, reward.stderr[-2000:]
    assert "Traceback" not in reward.stderr and not (tmp_path / "runs").exists()
    if case in ("no_message", "short_blstats"):
        ann = run("scripts.annotate_pairs_dataset", ["--directory", "motif_dataset", "--backend", "heuristic",
                                                     "--use-blstats", "true"], tmp_path)
        assert ann.returncode == 2 and expected in ann.stderr and "Traceback" not in ann.stderr  # as train_reward
    assert tree(tmp_path) == before


@pytest.mark.slow
def test_missing_annotator_names_the_files_there(tmp_path):
    motif_dataset(tmp_path)
    proc = run("scripts.train_reward", ["--dataset_dir", "motif_dataset", "--annotator", "llama70b_msg_gold_default",
                                        "--experiment", "r", "--train_dir", "runs"], tmp_path)
    assert proc.returncode == 2
    assert "llama70b_msg_gold_default" in proc.stderr and "llama3_descender_default" in proc.stderr


# ------------------------------------------------------------------ annotation


def test_every_motif_flag_has_help():
    from scripts import annotate_pairs_dataset, export_dataset

    text = " ".join(annotate_pairs_dataset.build_parser().format_help().split())
    for flag in ("--directory", "--prompt-version", "--goal-key", "--llm-size", "--num-gpus", "--n-annotation-chunks",
                 "--chunk-number", "--ignore-existing", "--custom-annotator-string", "--prompt-file", "--backend",
                 "--use-blstats", "--annotator-type", "--flushing-freq", "--logdir"):
        assert flag in text
    assert "meta-llama/Llama-2-70b-chat-hf" in "".join(text.split()) and "rule-based stand-in" in text
    assert "--overwrite" in export_dataset.build_parser().format_help()


def test_annotator_string_and_model_of_each_size():
    from common.llm import MOTIF_ANNOTATOR_MODELS
    from rlaif.motif_prompts import annotator_string

    assert annotator_string(70, "defaultgoal", "default") == "llama70b_msg_defaultgoal_default"
    assert annotator_string(13, "gold", "reworded", use_blstats=True) == "llama13b_msg_minbl_gold_reworded"
    assert annotator_string(7, "stairs", "default", use_messages=False, use_blstats=True) == "llama7b_minbl_stairs_default"
    assert MOTIF_ANNOTATOR_MODELS == {7: "meta-llama/Llama-2-7b-chat-hf", 13: "meta-llama/Llama-2-13b-chat-hf",
                                      70: "meta-llama/Llama-2-70b-chat-hf"}


@pytest.mark.parametrize("args, message", [
    (["--llm-size", "34"], "argument --llm-size/--llm_size: invalid choice: 34 (choose from 7, 13, 70)"),
    (["--goal-key", "scout"], "argument --goal-key/--goal_key: invalid choice: 'scout'"),
    (["--prompt-version", "v2"], "argument --prompt-version/--prompt_version: invalid choice: 'v2'"),
])
def test_unsupported_annotation_values_exit_without_writing(tmp_path, args, message):
    motif_dataset(tmp_path)
    before = tree(tmp_path)
    proc = run("scripts.annotate_pairs_dataset", ["--directory", "motif_dataset", "--backend", "heuristic", *args],
               tmp_path)
    assert proc.returncode == 2 and message in proc.stderr
    assert tree(tmp_path) == before


def test_without_vllm_the_default_backend_names_the_missing_part_and_the_cpu_alternative(tmp_path):
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    motif_dataset(tmp_path)
    before = tree(tmp_path)
    proc = run("scripts.annotate_pairs_dataset", argv_of(ANNOTATE), tmp_path)
    assert proc.returncode == 2  # a missing optional package, as a flag that cannot work here
    assert "vllm is not installed" in proc.stderr and "--backend heuristic" in proc.stderr
    assert tree(tmp_path) == before


def test_llm_size_and_num_gpus_reach_vllm_as_model_and_tensor_parallelism(tmp_path, monkeypatch):
    """The README's command on a node with vLLM (a stand-in module here, four GPUs reported): Llama 2 chat of
    --llm-size, tensor parallel over --num-gpus, Motif's sampling settings, the chat template applied."""
    import types

    from scripts import annotate_pairs_dataset as script

    calls: dict = {}

    class FakeTokenizer:
        def apply_chat_template(self, conv, tokenize=False, add_generation_prompt=True):
            return "|".join(f"{m['role']}:{m['content']}" for m in conv)

        def __call__(self, text, add_special_tokens):
            return {"input_ids": [ord(c) for c in text]}

    class FakeLLM:
        def __init__(self, model, tensor_parallel_size, seed, **kw):
            calls["llm"] = dict(model=model, tensor_parallel_size=tensor_parallel_size)

        def get_tokenizer(self):
            return FakeTokenizer()

        def generate(self, prompts, params, use_tqdm=True):
            calls["params"] = params[0].kw  # one per prompt, alike but for the seed
            calls["prompts"] = calls.get("prompts", 0) + len(prompts)
            out = types.SimpleNamespace
            return [out(outputs=[out(text='("best_description": 1)')]) for _ in prompts]

    class FakeSamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM, SamplingParams=FakeSamplingParams))
    monkeypatch.setattr("common.llm.visible_gpu_bytes", lambda: [80 * 10**9] * 4)
    motif_dataset(tmp_path, 8)
    monkeypatch.chdir(tmp_path)
    assert script.main(argv_of(ANNOTATE, **{"llm-size": "13", "num-gpus": "2"}) + ["--no-progress"]) == 0
    assert calls["llm"] == {"model": "meta-llama/Llama-2-13b-chat-hf", "tensor_parallel_size": 2}
    assert calls["params"]["temperature"] == 0.1 and calls["params"]["top_p"] == 0.95 and calls["params"]["top_k"] == 50
    labels = np.load(tmp_path / "motif_dataset" / "preference" / "llama13b_msg_defaultgoal_default.npy")
    assert labels.tolist().count(FIRST) == calls["prompts"] and set(labels.tolist()) <= {FIRST, TIE}
    assert script.main(argv_of(ANNOTATE) + ["--no-progress", "--custom-annotator-string", "x"]) == 1  # 8 > 4 GPUs
    assert not list((tmp_path / "motif_dataset").rglob("x.*"))


def test_the_py_spelling_of_motifs_readme_writes_nothing(tmp_path):
    """``python -m scripts.annotate_pairs_dataset.py`` (Motif's README): Python looks for a submodule ``py`` and
    stops, pointing at the right spelling; our module does no work on import (the README says so)."""
    motif_dataset(tmp_path)
    before = tree(tmp_path)
    proc = run("scripts.annotate_pairs_dataset.py", argv_of(ANNOTATE) + ["--backend", "heuristic"], tmp_path)
    assert proc.returncode == 1 and "Try using 'scripts.annotate_pairs_dataset'" in proc.stderr
    assert tree(tmp_path) == before


def _annotate(root: Path, *args: str) -> subprocess.CompletedProcess:
    return run("scripts.annotate_pairs_dataset", ["--directory", "motif_dataset", "--backend", "heuristic",
                                                  "--no-progress", *args], root)


def test_annotation_resumes_by_appending_and_ignore_existing_starts_over(tmp_path):
    out = motif_dataset(tmp_path, 24)
    name = "llama70b_msg_defaultgoal_default"
    # a file as Motif's tool leaves it after a pre-emption: int8, labels for the first half, 3 after
    partial = np.full(24, UNKNOWN, np.int8)
    partial[:12] = SECOND  # not what the rules would say for every pair: kept as they are
    np.save(out / "preference" / f"{name}.npy", partial)
    proc = _annotate(tmp_path)
    assert proc.returncode == 0, proc.stderr
    labels = load_motif_preferences(out, name, 24)
    assert labels[:12].tolist() == [SECOND] * 12 and (labels[12:] != UNKNOWN).all()
    assert "12 to annotate" in proc.stderr
    fresh = _annotate(tmp_path, "--ignore-existing")
    assert fresh.returncode == 0 and "24 to annotate" in fresh.stderr
    redone = load_motif_preferences(out, name, 24)
    assert redone[12:].tolist() == labels[12:].tolist() and redone[:12].tolist() != [SECOND] * 12
    # only final label files in preference/ (Motif's loader reads every .npy there as an annotator)
    assert sorted(p.name for p in (out / "preference").iterdir()) == ["llama3_descender_default.npy", f"{name}.npy"]
    meta = json.loads((out / "annotation_state" / f"{name}.meta.json").read_text())
    assert meta["backend"] == "heuristic" and meta["stand_in"] is True


@pytest.mark.slow
def test_two_chunks_equal_one_run_and_merge_only_when_both_are_done(tmp_path):
    out = motif_dataset(tmp_path, 30)
    for args in (["--custom-annotator-string", "single"],
                 ["--custom-annotator-string", "split", "--n-annotation-chunks", "2", "--chunk-number", "1"]):
        assert _annotate(tmp_path, "--goal-key", "combat", *args).returncode == 0
    assert not (out / "preference" / "split.npy").exists()  # chunk 0 still missing
    assert _annotate(tmp_path, "--goal-key", "combat", "--custom-annotator-string", "split",
                     "--n-annotation-chunks", "2", "--chunk-number", "0").returncode == 0
    single = np.load(out / "preference" / "single.npy")
    assert single.dtype == np.int8 and np.array_equal(np.load(out / "preference" / "split.npy"), single)
    bad = _annotate(tmp_path, "--n-annotation-chunks", "2", "--chunk-number", "2")
    assert bad.returncode == 2 and "--chunk_number 2 is out of range" in bad.stderr


def test_motifs_score_and_return_annotators(tmp_path):
    out = motif_dataset(tmp_path, 4)
    np.save(out / "info" / "score.npy", np.array([[5, 3], [1, 9], [4, 4], [0, 2]], np.int64))
    np.save(out / "data" / "rewards.npy", np.array([[[1.0], [0.0]], [[0.5], [0.5]], [[0.0], [2.0]], [[3.0], [1.0]]]))
    for kind, expected in (("score", [FIRST, SECOND, TIE, SECOND]), ("return", [FIRST, TIE, SECOND, FIRST])):
        proc = run("scripts.annotate_pairs_dataset", ["--directory", "motif_dataset", "--annotator-type", kind], tmp_path)
        assert proc.returncode == 0, proc.stderr
        labels = np.load(out / "preference" / f"{kind}.npy")
        assert labels.dtype == np.int8 and labels.tolist() == expected
    (out / "info" / "score.npy").unlink()
    missing = run("scripts.annotate_pairs_dataset", ["--directory", "motif_dataset", "--annotator-type", "score",
                                                     "--custom-annotator-string", "s2"], tmp_path)
    assert missing.returncode == 2 and "info/score.npy" in missing.stderr
    assert not (out / "preference" / "s2.npy").exists()


class _CountingBackend(Backend):
    """Answers "2" to everything and remembers the prompts it got."""

    def __init__(self):
        self.prompts: list[str] = []

    def generate(self, conversations):
        self.prompts += [c[-1]["content"] for c in conversations]
        return ['I prefer the second. ("best_description": 2)'] * len(conversations)

    def describe(self):
        return "counting"

    def close(self):
        pass


def test_pairs_with_the_same_description_are_ties_without_asking(tmp_path):
    from rlaif.annotate import AnnotationConfig, annotate_chunk

    ds = make_dataset(6)
    for i in range(12):
        ds.messages[i, 1] = encode_message(f"You see here {i} arrows.")
    for k in (1, 4):  # pairs 1 and 4: both members show the same message
        ds.messages[2 * k + 1, 1] = ds.messages[2 * k, 1]
    out = export_motif_layout(ds, {}, tmp_path / "motif_dataset", progress=False)
    backend = _CountingBackend()
    cfg = AnnotationConfig(layout="motif", goal_key="defaultgoal", directory=str(out),
                           preference_dir=str(out / "preference"), state_dir=str(tmp_path / "state"),
                           log_conversations=False, progress=False, batch_size=4)
    summary = annotate_chunk(cfg, backend=backend)
    assert summary.merged.tolist() == [SECOND, TIE, SECOND, SECOND, TIE, SECOND]
    assert summary.identical == 2 and len(backend.prompts) == 4


def test_motif_annotation_against_a_served_model(tmp_path):
    """The LLM path through the one client (--backend openai) against an HTTP server on 127.0.0.1 that answers in
    the reworded prompt's format, once only after the retry turn."""
    from tests.annotation_fake_server import FakeChatServer

    class MotifServer(FakeChatServer):
        def reply(self, body):
            self.requests.append(body)
            last = body["messages"][-1]["content"]
            if last.startswith("Which one is better"):  # our retry turn
                return 200, '("best_message": 1)'
            if "You kill the newt!" in last.split("Message 2:")[0]:
                return 200, "The first message shows a kill, which is progress."  # no answer: retried
            return 200, 'Analysis... ("best_message": None) on reflection ("best_message": 2)'

    motif_dataset(tmp_path, 12)
    with MotifServer() as server:
        proc = _annotate(tmp_path, "--backend", "openai", "--base-url", server.url, "--prompt-version", "reworded",
                         "--model", "fake-model", "--goal-key", "gold")
    assert proc.returncode == 0, proc.stderr
    labels = np.load(tmp_path / "motif_dataset" / "preference" / "llama70b_msg_gold_reworded.npy")
    first = server.requests[0]
    assert first["model"] == "fake-model" and first["messages"][0]["role"] == "system"
    assert "gold" in first["messages"][1]["content"] and "Message 1:" in first["messages"][1]["content"]
    assert set(labels.tolist()) <= {FIRST, SECOND, TIE} and SECOND in labels.tolist()
    retried = [b for b in server.requests if b["messages"][-1]["content"].startswith("Which one is better")]
    assert retried and labels.tolist().count(FIRST) >= len(retried)


# ------------------------------------------------------------------ prompts and the stand-in's goal rules


def test_prompt_versions_goals_and_answer_parsing():
    from rlaif.motif_prompts import MOTIF_GOALS, MotifPromptBuilder, parse_motif_answer

    default = MotifPromptBuilder("stairs", "default")
    text = default.user_prompt("You kill the newt!", "")
    assert MOTIF_GOALS["stairs"] in text and "best_description" in text and "Description 2" in text
    reworded = MotifPromptBuilder("combat", "reworded").user_prompt("a", "b")
    assert MOTIF_GOALS["combat"] in reworded and "best_message" in reworded and "uncertain" in reworded
    zero = MotifPromptBuilder("zeroknowledge").user_prompt("a", "b")
    assert all(goal not in zero for goal in MOTIF_GOALS.values() if goal)
    assert MotifPromptBuilder("descender").user_prompt("a", "b").count("Going deeper is urgent") == 1  # a skill's sentence
    # the last answer counts; "None" is a tie; the other version's key does not parse
    assert parse_motif_answer('("best_description": 1) ... so ("best_description": 2)') == SECOND
    assert parse_motif_answer('"Best description": None') == TIE
    assert parse_motif_answer('("best_message": 1)', "default") == UNKNOWN
    assert parse_motif_answer('("best_message": 1)', "reworded") == FIRST
    retry = default.retry_conversation(default.conversation("a", "b"), "hmm")
    assert retry[-1]["role"] == "user" and "best_description" in retry[-1]["content"]


def test_prompt_file_in_the_published_format(tmp_path):
    """A user's template with three positional fields and doubled braces, as Motif's published one is written."""
    from rlaif.annotate import AnnotationConfig, annotate_chunk
    from rlaif.motif_prompts import MotifPromptBuilder, MotifPromptError, load_prompt_file

    template = 'Judge two games. {}\n{{\n"d1":\n"{}"\n}}\n{{\n"d2":\n"{}"\n}}\nSay ("best_description": 1 or 2).\n'
    path = tmp_path / "published.txt"
    path.write_text(template)
    builder = MotifPromptBuilder("gold", "default", load_prompt_file(str(path)))
    text = builder.user_prompt("FIRST", "SECOND")
    assert text.startswith("Judge two games. The goal is gold") and '{\n"d1":\n"FIRST"\n}' in text
    out = motif_dataset(tmp_path)
    cfg = AnnotationConfig(layout="motif", goal_key="gold", directory=str(out), preference_dir=str(out / "preference"),
                           state_dir=str(tmp_path / "state"), log_conversations=False, progress=False,
                           backend="heuristic", prompt=str(path))
    summary = annotate_chunk(cfg)  # the stand-in finds the descriptions in the user's template too
    assert summary.unparseable == 0 and summary.counts["first"] + summary.counts["second"] > 0
    for bad, why in (("{} {} {} {}", "more than 3"), ("{goal} {description_1} {oops} {description_2}", "unknown field"),
                     ("{description_2} {goal} {description_1}", "must come before")):
        (tmp_path / "bad.txt").write_text(bad)
        with pytest.raises(MotifPromptError, match=why):
            load_prompt_file(str(tmp_path / "bad.txt"))


@pytest.mark.parametrize("goal, better, worse", [
    ("defaultgoal", "You kill the newt!", "It's a wall."),
    ("defaultgoal", "You descend the stairs.", "It's a wall."),
    ("zeroknowledge", "$ - 12 gold pieces.", "It's a wall."),
    ("combat", "You kill the newt!", "$ - 12 gold pieces."),
    ("combat", "You hit the jackal.", "You descend the stairs."),
    ("gold", "$ - 12 gold pieces.", "You kill the newt!"),
    ("gold", "It's a wall.", "You descend the stairs."),
    ("stairs", "You descend the stairs.", "$ - 12 gold pieces."),
    ("stairs", "There is a staircase down here.", "You kill the newt!"),
    ("descender", "You descend the stairs.", "It's a wall."),
    ("defaultgoal", "It's a wall.", "You die..."),
])
def test_stand_in_rules_follow_the_goal_descriptions(goal, better, worse):
    from rlaif.heuristic import judge_descriptions
    from rlaif.motif_prompts import MotifPromptBuilder

    builder = MotifPromptBuilder(goal)
    for first, second, expected in ((better, worse, FIRST), (worse, better, SECOND)):
        reply = judge_descriptions(builder.user_prompt(first, second), goal, builder.parts, builder.answer_key)
        assert builder.parse(reply) == expected, reply


def test_descriptions_group_repeated_messages_and_add_stats():
    from rlaif.captions import motif_description

    stats = np.zeros((4, 27), np.int64)
    stats[:, 12], stats[:, 13], stats[:, 10], stats[:, 11], stats[:, 18], stats[:, 21] = 3, 7, 9, 12, 2, 2
    text = motif_description(["You hit the newt!", "You hit the newt!", "", "You kill the newt!"])
    assert text == "You hit the newt! (x2)\nYou kill the newt!"
    assert motif_description(["", "You see a door."], stats).endswith("You see a door. Dlvl:3 $:7 HP:9(12) Xp:2 Hungry")
    assert motif_description(["", ""], stats) == "Dlvl:3 $:7 HP:9(12) Xp:2 Hungry"


# ------------------------------------------------------------------ reward training and Motif's network


def test_motif_reward_network_has_motifs_shapes_and_reads_the_message_only():
    import torch

    from rlaif.reward_arch import MOTIF_TO_OURS, MotifRewardModel
    from rlaif.reward_model import RewardModelConfig, build_reward_model

    model = build_reward_model(RewardModelConfig(arch="motif"))
    assert isinstance(model, MotifRewardModel)
    # Motif's TorchBeastEncoder (lt_cnn, no crop/glyphs/blstats) + fc 128 -> 256 -> 512 and reward_fn 512 -> 1
    motif_shapes = {
        "encoder.char_lt.weight": (256, 32), "encoder.conv1.weight": (64, 32, 7), "encoder.conv1.bias": (64,),
        "encoder.conv2_6_fc.2.weight": (64, 64, 7), "encoder.conv2_6_fc.5.weight": (64, 64, 3),
        "encoder.conv2_6_fc.7.weight": (64, 64, 3), "encoder.conv2_6_fc.9.weight": (64, 64, 3),
        "encoder.conv2_6_fc.11.weight": (64, 64, 3), "encoder.conv2_6_fc.15.weight": (128, 320),
        "encoder.fc.0.weight": (256, 128), "encoder.fc.2.weight": (512, 256), "reward_fn.1.weight": (1, 512),
    }
    ours = model.state_dict()
    assert set(MOTIF_TO_OURS.values()) == set(ours)
    for theirs, shape in motif_shapes.items():
        assert tuple(ours[MOTIF_TO_OURS[theirs]].shape) == shape, theirs
    msgs = torch.from_numpy(np.stack([encode_message("You kill the newt!"), encode_message("")]))
    with torch.no_grad():
        a = model(msgs, torch.tensor([0.0, 1.0]))
        b = model(msgs, torch.zeros(2, 5) + 3.0)
    assert torch.equal(a, b) and a[0] != a[1]


def test_reward_training_on_motifs_layout_masks_unknown_pairs(tmp_path, monkeypatch):
    import torch

    from rlaif.reward_model import load_skill_reward
    from scripts import train_reward as script

    labels = np.array([0, 1, 2, 3] * 10, np.int32)
    motif_dataset(tmp_path, 40, labels, annotator="llama70b_msg_defaultgoal_default")
    monkeypatch.chdir(tmp_path)
    result = script.main(argv_of(TRAIN_REWARD, batch_size="8", num_epochs="1") + ["--no_progress"])
    # 40 pairs: Motif's 80/20 split, then the 10 unknown ones left out of training and validation
    from rlaif.train_reward import split_pairs

    train_idx, _ = split_pairs(40, 0.2, 777)
    assert len(train_idx) == 32 and result["unknown_excluded"] == 10
    assert result["train_pairs"] == int((labels[train_idx] != UNKNOWN).sum()) < 32
    state = torch.load(result["checkpoint"])
    assert state["model_config"]["arch"] == "motif" and state["layout"] == "motif" and state["val_fraction"] == 0.2
    assert state["annotator"] == "llama70b_msg_defaultgoal_default"
    loaded = load_skill_reward(tmp_path / "train_dir" / "reward_saving_dir" / "standard_reward")
    assert loaded.model.config.arch == "motif" and 0.5 in loaded.quantiles


def test_reward_encoder_flags_agree_or_fail():
    from scripts.train_reward import build_parser, resolve_arch

    p = build_parser()
    assert resolve_arch(p.parse_args(["--reward_encoder", "nle_torchbeast_encoder"])) == "motif"
    assert resolve_arch(p.parse_args([])) == "release"  # this project's layout keeps the release's network
    with pytest.raises(ValueError, match="disagree|says"):
        resolve_arch(p.parse_args(["--reward_encoder", "nle_torchbeast_encoder", "--reward_arch", "small"]))
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--reward_encoder", "nle_rgbcrop_encoder"])
    assert exc.value.code == 2


# ------------------------------------------------------------------ RL flags and tasks


def test_motifs_rl_command_parses_with_its_meaning():
    from rl_baseline.sf.cfg import SkillEnvConfig, parse_cfg

    cfg = parse_cfg(argv_of(MAIN))
    assert cfg.env == "nle_fixed_eat_action" and cfg.root_env == "NetHackScore-v1" and cfg.num_skills == 1
    assert cfg.reward_dirs == ["train_dir/reward_saving_dir/standard_reward/"] and cfg.threshold_quantiles == [0.5]
    assert cfg.reward_encoder == "nle_torchbeast_encoder" and cfg.seed == 777 and cfg.save_every_steps == 10_000_000
    assert cfg.extrinsic_reward == 0.1 and cfg.game_reward_scale == 0.1 and cfg.llm_reward == 0.1
    assert cfg.max_episode_steps == 5000  # NLE's default episode limit, which Motif's environments kept
    env = SkillEnvConfig.from_cfg(cfg)
    assert env.task is None and env.max_episode_steps == 5000 and env.beta == 3.0
    assert parse_cfg(["--llm_reward", "0"]).max_episode_steps == 10_000  # the skill env keeps the paper's


@pytest.mark.parametrize("argv, message", [
    (["--reward_encoder", "nle_rgbcrop_encoder"], "reads the rendered screen"),
    (["--root_env", "NetHackOracleContinual-v1"], "--root_env"),
])
def test_unsupported_rl_values_are_config_errors(argv, message):
    from rl_baseline.sf.cfg import ConfigError, parse_cfg

    with pytest.raises(ConfigError, match=message):
        parse_cfg(["--env", "nle_fixed_eat_action", "--llm_reward", "0", *argv])


def test_reward_encoder_must_match_the_reward_models(tmp_path, monkeypatch):
    from rl_baseline.sf.cfg import ConfigError, resolve_cfg
    from scripts import train_reward as script

    motif_dataset(tmp_path, 40, annotator="llama70b_msg_defaultgoal_default")
    monkeypatch.chdir(tmp_path)
    script.main(argv_of(TRAIN_REWARD, batch_size="8", num_epochs="1") + ["--no_progress"])
    cfg = resolve_cfg(argv_of(MAIN), saved=False)  # Motif's command: the reward model is Motif's network
    assert cfg.reward_thresholds and len(cfg.reward_thresholds) == 1
    with pytest.raises(ConfigError, match="release is the release reward network, but .* holds a motif one"):
        resolve_cfg(argv_of(MAIN, reward_encoder="release"), saved=False)


@pytest.mark.game_calendar
def test_staircase_task_succeeds_on_a_live_walk_down_the_stairs():
    """A live game: the hero is put on the down staircase (wizard mode) and walks down; Motif's staircase task
    pays 50 and ends, and the descent message is what the step observes."""
    from common.nethack import actions as A
    from rl_baseline.baselines.motif_tasks import DESCEND_MESSAGE, MotifTaskReward
    from rl_baseline.envs import make_monk_env

    for root_env, reached in (("NetHackStaircase-v1", True), ("NetHackStaircaseLvl3-v1", False)):
        env = MotifTaskReward(make_monk_env(max_episode_steps=50, wizard=True), root_env)
        env.reset(seed=3)
        game = env.unwrapped
        game.wizard_keys([6])  # map the level
        game.wizard_keys([20, ord(">"), ord(",")])  # teleport onto the down staircase
        obs, reward, terminated, _, info = env.step(A.ACTION_NAMES.index("down"))
        env.close()
        assert int(obs["blstats"][24]) == 2 and DESCEND_MESSAGE in info["messages"]
        assert bytes(obs["message"]).rstrip(b"\0").decode() == DESCEND_MESSAGE
        assert (reward, terminated, info["true_objective"]) == ((50.0, True, 1.0) if reached else (0.0, False, 0.0))


def test_score_task_adds_motifs_time_penalty_to_the_score_difference():
    """Motif's score task (``NetHackScore-v1``) pays the score difference plus NLE's -0.01 on a step on which game
    time stands still, although the Monk env under it pays the score difference only (the MaestroMotif
    release's); on a live game, with random actions."""
    from common.nethack import blstats as B
    from rl_baseline.baselines.motif_tasks import TIME_PENALTY, MotifTaskReward
    from rl_baseline.envs import make_monk_env

    env = MotifTaskReward(make_monk_env(max_episode_steps=3000), "NetHackScore-v1")
    rng = np.random.default_rng(5)
    obs, _ = env.reset(seed=21)
    frozen = moved = 0
    try:
        for _ in range(3000):
            before = obs["blstats"].copy()
            obs, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            if terminated or truncated:
                obs, _ = env.reset()
                continue
            still = int(obs["blstats"][B.BL_TIME]) == int(before[B.BL_TIME])
            score = float(int(obs["blstats"][B.BL_SCORE]) - int(before[B.BL_SCORE]))
            assert reward == pytest.approx(score + (TIME_PENALTY if still else 0.0))
            frozen += still
            moved += not still
            if frozen >= 20 and moved >= 20:
                break
    finally:
        env.close()
    assert frozen >= 20 and moved >= 20, (frozen, moved)


# ------------------------------------------------------------------ Motif's README, end to end


@pytest.mark.slow
def test_motif_readme_commands_run_verbatim(tmp_path):
    """Motif's four README commands, as written apart from sizes (pairs, epochs, batch, workers, steps), on a
    dataset this project collects, exported to Motif's layout and zipped into parts as Motif ships it; the
    annotation uses the rule-based stand-in (no GPU here)."""
    collect = run("scripts.collect_dataset", ["--skill", "descender", "--num_pairs", "120", "--policy", "explorer",
                                              "--out", "og_dataset", "--seed", "5"], tmp_path)
    assert collect.returncode == 0, collect.stderr[-2000:]
    ours = run("scripts.annotate_pairs", ["--goal_key", "descender", "--backend", "heuristic", "--no_progress"], tmp_path)
    assert ours.returncode == 0, ours.stderr[-2000:]
    export = run("scripts.export_dataset", ["--format", "motif", "--dataset_dir", "og_dataset", "--skill", "descender",
                                            "--out", "motif_dataset"], tmp_path)
    assert export.returncode == 0, export.stderr[-2000:]
    # ship it as Motif does (a zip split into parts), then unpack with the README's line
    subprocess.run(["zip", "-qr", "motif_dataset.zip", "motif_dataset"], cwd=tmp_path, check=True)
    (tmp_path / "motif_dataset_zipped").mkdir()
    subprocess.run(["split", "-b", "2k", "motif_dataset.zip", "motif_dataset_zipped/motif_dataset_part_"],
                   cwd=tmp_path, check=True)
    shutil.rmtree(tmp_path / "motif_dataset")
    (tmp_path / "motif_dataset.zip").unlink()
    assert len(list((tmp_path / "motif_dataset_zipped").iterdir())) > 1
    subprocess.run(["bash", "-c", UNZIP], cwd=tmp_path, check=True, capture_output=True)
    pairs = open_motif_layout(tmp_path / "motif_dataset").num_pairs
    assert pairs == 120

    ann = run("scripts.annotate_pairs_dataset", argv_of(ANNOTATE) + ["--backend", "heuristic"], tmp_path)
    assert ann.returncode == 0, ann.stderr[-2000:]
    labels = np.load(tmp_path / "motif_dataset" / "preference" / "llama70b_msg_defaultgoal_default.npy")
    assert labels.dtype == np.int8 and labels.shape == (pairs,) and (labels != UNKNOWN).all()

    reward = run("scripts.train_reward", argv_of(TRAIN_REWARD, batch_size="32", num_workers="2", num_epochs="2"),
                 tmp_path)
    assert reward.returncode == 0, reward.stderr[-2000:]
    assert "stand-in for the LLM" in reward.stderr  # the stand-in's labels are named as such
    rdir = tmp_path / "train_dir" / "reward_saving_dir" / "standard_reward"
    assert list((rdir / "checkpoint_p0").glob("checkpoint_*.pth")) and (rdir / "reward_metrics" /
                                                                         "train_norm_quantiles.csv").is_file()

    main = run("scripts.main", argv_of(MAIN, num_workers="1", num_envs_per_worker="2", batch_size="128",
                                       train_for_env_steps="1_000", save_every_steps="500"), tmp_path, timeout=400)
    assert main.returncode == 0, main.stdout[-2000:] + main.stderr[-2000:]
    exp = tmp_path / "train_dir" / "rl_saving_dir" / "standard_motif"
    assert list((exp / "checkpoint_p0").glob("checkpoint_*.pth"))
    saved = json.loads((exp / "config.json").read_text())
    assert saved["env"] == "nle_fixed_eat_action" and saved["reward_encoder"] == "nle_torchbeast_encoder"

    for root_env, measure in (("NetHackScore-v1", "score"), ("NetHackStaircaseLvl3Continual-v1", "success")):
        ev = run("scripts.main", ["--train_dir", "train_dir/rl_saving_dir", "--experiment", "standard_motif",
                                  "--evaluation", "True", "--root_env", root_env, "--eval_protocol", "project",
                                  "--eval_episodes", "2", "--eval_num_envs", "2", "--max_episode_steps", "60"], tmp_path)
        assert ev.returncode == 0, ev.stdout[-2000:] + ev.stderr[-2000:]
        result = json.loads((exp / "eval" / f"{root_env}.json").read_text())
        assert result["measure"] == measure and result["episodes"] == 2 and 0.0 <= result["success_rate"] <= 1.0
        assert all(e["length"] <= 60 and e["ended_by"] in ("success", "game", "step_limit")
                   for e in result["per_episode"])
