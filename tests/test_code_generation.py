"""The generate / test / refine loop (replay and OpenAI-compatible backends) and combine."""
from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from code_generation.combine import CombineError, combine, shared_skill_functions
from code_generation.prompts import (
    PROMPT_DIR,
    TASK_FILES,
    TaskPrompts,
    existing_class_source,
    extract_code,
    parse_verdict,
)
from common.vocabulary import ALL_TASKS, COMPOSITE_TASKS
from rl_baseline.skills import meta_policy
from scripts import combine as combine_cli
from scripts import generate_code

REPO = Path(__file__).resolve().parents[1]

GNOMISH = '''import random


class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth
        self.direction = "down"

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        if branch_number == 2:
            return "discoverer"
        if self.branch_depth > 0:
            return "ascender" if dungeon_depth > self.branch_depth else "descender"
        if self.direction == "up":
            if dungeon_depth > 2:
                return "ascender"
            self.direction = "down"
        if dungeon_depth > 4:
            self.direction = "up"
            return "ascender"
        return "descender"

# === UNIT TEST ===
for seed in range(2):
    sim = run_episode(NetHackPlayer, seed, max_steps=40, max_depth=4, stop=lambda s: s.branch == 2, verbose=True)
    print("seed", seed, "reached the Mines:", sim.branch == 2)
'''

LAZY = GNOMISH.replace('        if branch_number == 2:\n            return "discoverer"\n',
                       '        return "discoverer"\n')


def _answer(code: str) -> str:
    return "Here is the class and its unit test.\n```python\n" + code + "```\n"


def _replay_file(path: Path, answers: list[str]) -> Path:
    with path.open("w") as fh:
        for answer in answers:
            fh.write(json.dumps({"role": "assistant", "content": answer}) + "\n")
    return path


def _replayed_run(tmp_path: Path, task: str, seed: int, answers: list[str]) -> tuple[int, Path]:
    """``scripts.generate_code`` on recorded answers; its exit status and run folder."""
    replay = _replay_file(tmp_path / "recorded.jsonl", answers)
    out = tmp_path / "gen"
    rc = generate_code.main(["--task", task, "--seed", str(seed), "--backend", "replay", "--replay", str(replay),
                             "--out_dir", str(out)])
    return rc, out / task / f"_seed{seed}"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_task_has_its_prompt_files():
    for task in ALL_TASKS:
        assert all((PROMPT_DIR / task / name).is_file() for name in TASK_FILES), task
        prompts = TaskPrompts.load(task, existing_class_source(task, 42))
        assert "{{" not in prompts.initial and task in prompts.initial
        assert "class NetHackPlayer" in prompts.initial and "class SimDungeon" in prompts.initial
        assert "{{output}}" in prompts.check and "VERDICT" in prompts.check
        assert "step by step" in prompts.rewrite_text("trace")
        assert "def set_initial_values(self):" in prompts.initial_values
        assert (prompts.attributes is not None) == (task in COMPOSITE_TASKS)
    exploration = TaskPrompts.load("exploration", existing_class_source("exploration", 42)).initial
    assert "reach_dungeons_of_doom" in exploration and "reach_gnomish_mines" in exploration
    assert "reach_gnomish_mines" in existing_class_source("gnomish", 42)  # eval tasks see the training class


def test_extract_code_and_verdict():
    assert extract_code("no code here") is None
    text = "first\n```python\nx = 1\n```\nthen\n```python\nclass NetHackPlayer:\n    pass\n```\nend\n```\ny = 2\n```"
    assert extract_code(text).startswith("class NetHackPlayer")
    assert parse_verdict("The trace matches.\nVERDICT: YES") is True
    assert parse_verdict("Step 3 is wrong.\n**VERDICT: NO**") is False
    assert parse_verdict("hmm") is None


def test_an_answer_cut_inside_its_code_block_is_named_as_such(tmp_path, capsys):
    """A small model's answer cut at --max_tokens opens a block it never closes; the rewrite prompt says so
    (it said "no code block", which the model cannot act on)."""
    rc, run_dir = _replayed_run(tmp_path, "gnomish", 42, [
        "Here is the class.\n```python\nclass NetHackPlayer:\n    def __init__(self, max_depth",  # cut short
        "I have no code for you.",
        _answer(GNOMISH),
        "Every trace reaches the Mines as planned.\nVERDICT: YES",
    ])
    assert rc == 0, capsys.readouterr().err
    rewrites = [r["content"] for r in _records(run_dir / "transcript.jsonl")
                if r["kind"] == "rewrite" and r["role"] == "user"]
    assert "opened a ```python code block but never closed it" in rewrites[0]
    assert "contained no ```python code block" in rewrites[1]


def test_replay_navigation_task_repairs_a_rejected_first_attempt(tmp_path, capsys):
    replay = _replay_file(tmp_path / "recorded.jsonl", [
        _answer("import os\n" + GNOMISH),  # refused by the code check
        _answer(GNOMISH),
        "Every trace reaches the Mines as planned.\nVERDICT: YES",
    ])
    out = tmp_path / "gen"
    rc = generate_code.main(["--task", "gnomish", "--seed", "42", "--backend", "replay", "--replay", str(replay),
                             "--out_dir", str(out)])
    assert rc == 0, capsys.readouterr().err
    run_dir = out / "gnomish" / "_seed42"
    assert (run_dir / "execution.py").read_text() == GNOMISH
    records = _records(run_dir / "transcript.jsonl")
    sandbox = [r for r in records if r["kind"] == "sandbox"]
    assert sandbox[0]["violation"] is True and sandbox[0]["ok"] is False
    assert sandbox[1]["ok"] is True and sandbox[1]["reference_ok"] is True
    rewrite = [r for r in records if r["kind"] == "rewrite" and r["role"] == "user"]
    assert len(rewrite) == 1 and "import of 'os' is not allowed" in rewrite[0]["content"]
    check = [r for r in records if r["kind"] == "check" and r["role"] == "user"][0]["content"]
    assert "step   0 depth= 1 branch=0" in check and "gnomish: 10/10" in check
    assert records[-1]["kind"] == "result" and records[-1]["accepted"] is True

    # the saved transcript reproduces the run
    rc = generate_code.main(["--task", "gnomish", "--seed", "42", "--backend", "replay",
                             "--replay", str(run_dir / "transcript.jsonl"), "--out_dir", str(out)])
    assert rc == 0 and (run_dir / "execution.py").read_text() == GNOMISH
    assert (run_dir / "transcript.1.jsonl").exists()

    # combine: importable module, validated and loaded; no silent overwrite
    root = tmp_path / "meta"
    assert combine_cli.main(["--task", "gnomish", "--seed", "42", "--gen_dir", str(out), "--out_root", str(root)]) == 0
    module = root / "gnomish" / "seed42" / "execution.py"
    text = module.read_text()
    assert "# === UNIT TEST ===" not in text and "run_episode(" not in text
    assert "def skill_termination" in text and "def set_initial_values" in text
    assert all((p / "__init__.py").exists() for p in (root, root / "gnomish", root / "gnomish" / "seed42"))
    policy = meta_policy.load("gnomish", 42, root=root)
    assert policy.next_skill("discoverer", 1, 0, False, False) == "descender"
    assert policy.next_skill("descender", 3, 2, False, False) == "discoverer"
    assert combine_cli.main(["--task", "gnomish", "--seed", "42", "--gen_dir", str(out),
                             "--out_root", str(root)]) == 0  # identical: fine
    module.write_text(text + "\n# edited by hand\n")
    assert combine_cli.main(["--task", "gnomish", "--seed", "42", "--gen_dir", str(out),
                             "--out_root", str(root)]) == 2  # a file in the way: bad input, as for a flag
    assert module.read_text().endswith("# edited by hand\n")
    assert combine_cli.main(["--task", "gnomish", "--seed", "42", "--gen_dir", str(out),
                             "--out_root", str(root), "--force"]) == 0
    assert module.read_text() == text


def test_model_verdict_alone_does_not_accept_a_failing_policy(tmp_path, capsys):
    replay = _replay_file(tmp_path / "recorded.jsonl", [_answer(LAZY), "Looks right.\nVERDICT: YES"])
    out = tmp_path / "gen"
    rc = generate_code.main(["--task", "gnomish", "--seed", "1", "--backend", "replay", "--replay", str(replay),
                             "--out_dir", str(out), "--max_iters", "1"])
    assert rc == 1 and "no code accepted" in capsys.readouterr().err
    assert not (out / "gnomish" / "_seed1" / "execution.py").exists()
    with pytest.raises(CombineError, match="no generated code"):
        combine("gnomish", 1, gen_dir=out, out_root=tmp_path / "meta")


GOLDEN_FIRST = '''class NetHackPlayer:
    def __init__(self, max_depth, branch_depth):
        self.max_depth = max_depth
        self.branch_depth = branch_depth

    def perform_task(self, current_skill, dungeon_depth, branch_number, merchant_precondition,
                     worshipper_precondition):
        return self.plan[dungeon_depth]

# === UNIT TEST ===
sim = run_episode(NetHackPlayer, 0, max_steps=20, verbose=True)
'''

GOLDEN_POLICY = GOLDEN_FIRST.replace("        return self.plan[dungeon_depth]\n", '''        if branch_number == 2 or (self.ready and dungeon_depth > 0):
            return "ascender"
        if current_skill != "discoverer":
            return "discoverer"
        return "descender" if dungeon_depth < 3 else "ascender"
''').replace("        self.branch_depth = branch_depth\n", "        self.branch_depth = branch_depth\n        self.ready = False\n")

GOLDEN_HOOKS = (REPO / "rl_baseline" / "meta_policies" / "goldenexit" / "seed42" / "execution.py").read_text() + '''
# === UNIT TEST ===
sim = run_episode(NetHackPlayer, 0, max_steps=300, verbose=True)
print("gold", sim.gold, "kills", sim.kills, "left the dungeon:", sim.escaped)
'''


def test_replay_composite_task_with_attribute_follow_up(tmp_path):
    rc, run_dir = _replayed_run(tmp_path, "goldenexit", 3, [
        _answer(GOLDEN_FIRST),  # crashes: AttributeError in the unit test
        _answer(GOLDEN_POLICY),
        "The trace follows the plan.\nVERDICT: YES",
        _answer(GOLDEN_HOOKS),
        "Gold and kills are tracked and the hero leaves only afterwards.\nVERDICT: YES",
    ])
    assert rc == 0
    out = tmp_path / "gen"
    code = (run_dir / "execution.py").read_text()
    assert "def update_gold" in code and "def defeat_monster" in code
    records = _records(run_dir / "transcript.jsonl")
    first = [r for r in records if r["kind"] == "sandbox"][0]
    assert first["ok"] is False and "AttributeError" in first["output"]
    attributes = [r for r in records if r["kind"] == "attributes" and r["role"] == "user"]
    assert len(attributes) == 1 and "update_gold" in attributes[0]["content"]
    root = tmp_path / "meta"
    result = combine("goldenexit", 3, gen_dir=out, out_root=root)
    assert "UNIT TEST PASSED" in result.test_output
    policy = meta_policy.load("goldenexit", 3, root=root)
    policy.update_state({"gold": 30, "kills": 26})
    assert policy.player.monsters_defeated == 26


class _ScriptedServer(http.server.BaseHTTPRequestHandler):
    answers: list[str] = []
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body})
        answer = type(self).answers[len(type(self).requests) - 1]
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("backend", ["openai", "hf"])
def test_http_backends_end_to_end_against_a_local_server(tmp_path, backend):
    _ScriptedServer.answers = [_answer(GNOMISH), "It reaches the Mines.\nVERDICT: YES"]
    _ScriptedServer.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _ScriptedServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        rc = generate_code.main(["--task", "gnomish", "--seed", "5", "--backend", backend, "--base_url", url,
                                 "--model", "local-model", "--out_dir", str(tmp_path)])
    finally:
        server.shutdown()
        server.server_close()
    assert rc == 0
    assert (tmp_path / "gnomish" / "_seed5" / "execution.py").read_text() == GNOMISH
    first, second = _ScriptedServer.requests
    assert first["path"] == "/v1/chat/completions"
    if backend == "openai":
        assert first["body"]["model"] == "local-model"
    assert first["body"]["temperature"] == 0.2
    assert first["body"]["max_tokens"] == 10000 and first["body"]["seed"] == 5
    assert [m["role"] for m in first["body"]["messages"]] == ["system", "user"]
    assert [m["role"] for m in second["body"]["messages"]] == ["system", "user", "assistant", "user"]
    assert "VERDICT" in second["body"]["messages"][-1]["content"]


def test_bad_flags_fail_clearly(tmp_path, capsys):
    assert generate_code.main(["--task", "gnomish", "--backend", "replay", "--out_dir", str(tmp_path)]) == 2
    assert "--replay" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        generate_code.main(["--task", "nosuchtask"])
    assert exc.value.code == 2 and "--task: invalid choice: 'nosuchtask'" in capsys.readouterr().err
    assert combine_cli.main(["--task", "delphi", "--seed", "9", "--gen_dir", str(tmp_path),
                             "--out_root", str(tmp_path / "meta")]) == 2
    assert "generate_code" in capsys.readouterr().err


@pytest.mark.parametrize("kind, says", [("a folder", "a folder, not a transcript file"),
                                        ("missing", "transcript not found"),
                                        ("broken", "not a JSON line")])
def test_a_replay_transcript_that_cannot_be_read_is_a_usage_error(tmp_path, capsys, kind, says):
    """A folder, a missing file or a broken file given to --replay is bad input (it exited 1, as a model's server
    that failed, and a folder that exists was "not found")."""
    replay = tmp_path / "transcript.jsonl"
    if kind == "a folder":
        replay.mkdir()
    elif kind == "broken":
        replay.write_text('{"role": "assistant", "content": "cut sh')
    rc = generate_code.main(["--task", "gnomish", "--backend", "replay", "--replay", str(replay),
                             "--out_dir", str(tmp_path / "gen")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and says in err and str(replay) in err
    assert not (tmp_path / "gen").exists()


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_gen_dir_that_is_not_a_folder_is_a_usage_error(tmp_path, capsys, kind):
    """It exited 1, the status of a combined module that fails its checks."""
    gen_dir = tmp_path / "gen"
    if kind == "a file":
        gen_dir.write_text("not a folder")
    rc = combine_cli.main(["--task", "gnomish", "--seed", "42", "--gen_dir", str(gen_dir),
                           "--out_root", str(tmp_path / "meta")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith(f"error: --gen_dir {gen_dir}: {'no such folder' if kind == 'missing' else 'not a folder'}")
    assert err.count("\n") == 1 and not (tmp_path / "meta").exists()


SKILL_FUNCTIONS = """```python
class NetHackPlayer:
""" + "\n".join("    " + line for line in shared_skill_functions().splitlines()) + "\n```\n"


def test_skill_functions_are_generated_and_joined(tmp_path):
    replay = _replay_file(tmp_path / "recorded.jsonl", [SKILL_FUNCTIONS, _answer(GNOMISH), "VERDICT: YES"])
    out = tmp_path / "gen"
    assert generate_code.main(["--task", "gnomish", "--seed", "8", "--backend", "replay", "--replay", str(replay),
                               "--out_dir", str(out), "--skill_functions"]) == 0
    run_dir = out / "gnomish" / "_seed8"
    assert "def skill_termination" in (run_dir / "skill_functions.py").read_text()
    root = tmp_path / "meta"
    combine("gnomish", 8, gen_dir=out, out_root=root)
    text = (root / "gnomish" / "seed8" / "execution.py").read_text()
    assert "skill functions generated by the same run" in text
    assert meta_policy.load("gnomish", 8, root=root).should_terminate("ascender", 1, 3, 4, [False, False])


def test_transformers_backend_with_a_tiny_local_model(tmp_path, capsys):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[PAD]": 1, "[EOS]": 2, "class": 3, "def": 4, "```": 5, "python": 6}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]",
                                        eos_token="[EOS]")
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16384)
    model_dir = tmp_path / "tiny"
    LlamaForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    rc = generate_code.main(["--task", "gnomish", "--seed", "2", "--backend", "transformers", "--model",
                             str(model_dir), "--max_tokens", "4", "--max_iters", "1", "--out_dir", str(tmp_path)])
    assert rc == 1  # random weights write no code: rejected, reported, nothing saved
    assert "no code accepted" in capsys.readouterr().err
    records = _records(tmp_path / "gnomish" / "_seed2" / "transcript.jsonl")
    assert [r for r in records if r.get("role") == "assistant"]
    assert not (tmp_path / "gnomish" / "_seed2" / "execution.py").exists()


@pytest.mark.parametrize("task", ALL_TASKS)
def test_every_task_round_trips_through_generate_and_combine(tmp_path, task):
    reference = (REPO / "rl_baseline" / "meta_policies" / task / "seed42" / "execution.py").read_text()
    code = reference + "\n# === UNIT TEST ===\nsim = run_episode(NetHackPlayer, 0, max_steps=20, verbose=True)\n"
    answers = [_answer(code), "VERDICT: YES"] * (2 if task in COMPOSITE_TASKS else 1)
    replay = _replay_file(tmp_path / "recorded.jsonl", answers)
    out = tmp_path / "gen"
    assert generate_code.main(["--task", task, "--seed", "4", "--backend", "replay", "--replay", str(replay),
                               "--out_dir", str(out)]) == 0
    result = combine(task, 4, gen_dir=out, out_root=tmp_path / "meta")
    assert "UNIT TEST PASSED" in result.test_output
    policy = meta_policy.load(task, 4, root=tmp_path / "meta")
    assert policy.next_skill(policy.initial_skill, 1, 0, False, False) in ("discoverer", "descender")
    assert policy.num_errors == 0


def test_combined_exploration_policy_draws_its_settings_without_importing_random_itself(tmp_path):
    # a generated class that never imports random gets the training policy's random initial values
    reference = (REPO / "rl_baseline" / "meta_policies" / "exploration" / "seed42" / "execution.py").read_text()
    code = reference.replace("import random\n", "").replace(
        "self.max_depth = random.randint(2, 4)", "self.max_depth = 3").replace(
        "self.mines = random.randint(0, 1) == 1", "self.mines = False")
    assert "random" not in code.split("class NetHackPlayer")[1]
    code += "\n# === UNIT TEST ===\nsim = run_episode(NetHackPlayer, 0, max_steps=20, verbose=True)\n"
    replay = _replay_file(tmp_path / "recorded.jsonl", [_answer(code), "VERDICT: YES"])
    out = tmp_path / "gen"
    assert generate_code.main(["--task", "exploration", "--seed", "5", "--backend", "replay", "--replay", str(replay),
                               "--out_dir", str(out)]) == 0
    result = combine("exploration", 5, gen_dir=out, out_root=tmp_path / "meta")
    assert "import random" in result.path.read_text()
    policy = meta_policy.load("exploration", 5, root=tmp_path / "meta")
    depths = set()
    for _ in range(60):
        policy.reset()
        depths.add(policy.player.max_depth)
    assert depths == {2, 3, 4} and policy.num_errors == 0


def test_combine_force_with_a_policy_that_loops_forever_ends_instead_of_hanging(tmp_path, capsys):
    """The sandboxed test flags the loop, --force writes the module anyway, and the in-process check call then
    hung at 100% CPU; it now runs where the runtime runs it (the isolated child, 1 s of wall clock a call) and
    ends with an error naming it."""
    import time

    from code_generation.sandbox import SandboxLimits

    looping = GNOMISH.replace('        if branch_number == 2:\n            return "discoverer"\n',
                              '        while True:\n            dungeon_depth += 1\n')
    run_dir = tmp_path / "gen" / "gnomish" / "_seed5"
    run_dir.mkdir(parents=True)
    (run_dir / "execution.py").write_text(looping)
    start = time.monotonic()
    with pytest.raises(CombineError, match=r"took longer than 1 s, the runtime's bound per call"):
        combine("gnomish", 5, gen_dir=tmp_path / "gen", out_root=tmp_path / "meta", force=True,
                limits=SandboxLimits(wall_seconds=2.0, cpu_seconds=2))
    assert time.monotonic() - start < 30
    # the runtime calls the same module under the same bound and falls back
    policy = meta_policy.load("gnomish", 5, root=tmp_path / "meta")
    assert policy.next_skill("discoverer", 1, 0, False, False) == "discoverer" and policy.num_errors == 1
