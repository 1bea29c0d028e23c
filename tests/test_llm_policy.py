"""The paper's LLM baselines: the LLM policy (zero-shot and equivalent prompting) and the hierarchical
LLM policy. Unit tests of the text rendering, prompts, parsing, cache, token counts, stand-in rules and
the policy over skills; the bad inputs; the pipeline's phases and slurm jobs; and (slow) every baseline
end to end at smoke scale, through the in-process rule-based stand-in and through a real HTTP server on
127.0.0.1 (the project's stand-in server, as its own process)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from bench.fixtures import free_port
from common.llm import Backend, Completion, Conversation
from common.vocabulary import EVAL_TASKS, SKILLS
from rl_baseline.baselines.llm_policy.client import LLMClient, LLMSettings, approx_conversation_tokens
from rl_baseline.baselines.llm_policy.parse import parse_action, parse_skill
from rl_baseline.baselines.llm_policy.prompts import action_conversation, coder_knowledge, skill_conversation

REPO = Path(__file__).resolve().parents[1]
MODEL = "stand-in"
NAMES = ("more", "north", "east", "south", "west", "northeast", "southeast", "southwest", "northwest",
         "far_north", "far_east", "far_south", "far_west", "far_northeast", "far_southeast", "far_southwest",
         "far_northwest", "up", "down", "wait", "kick", "eat", "search", "cast", "enhance", "pray", "quaff", "drop")


@contextmanager
def stand_in_server(log: Path, mode: str = "normal") -> Iterator[str]:
    """The project's stand-in server (scripts.serve_stand_in_llm) on a free port; yields its base URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "scripts.serve_stand_in_llm", "--port", str(port), "--model", MODEL, "--mode", mode,
           "--log", str(log)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from rl_baseline.baselines.oni.service import wait_for_server

        wait_for_server(f"http://127.0.0.1:{port}/v1", MODEL, timeout_s=30, poll_s=0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _wait_until_log_settles(log)  # the server logs a request just after its reply: let that land first
        proc.kill()
        proc.wait()


def _wait_until_log_settles(log: Path, quiet_s: float = 0.3, timeout_s: float = 5.0) -> None:
    """Until the server's log has not grown for ``quiet_s`` (at most ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = log.stat().st_size if log.exists() else 0
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def requests_in(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# ----------------------------------------------------------------------------- parsing


def test_the_last_answer_line_counts_and_anything_else_is_a_failure():
    assert parse_action("I could go north.\nAction: east", NAMES) == NAMES.index("east")
    assert parse_action("Action: north\nOn second thought...\n**Action:** far north.", NAMES) == NAMES.index("far_north")
    assert parse_action("action = North-East", NAMES) == NAMES.index("northeast")
    assert parse_action("Action: `down` (the stairs are here)", NAMES) == NAMES.index("down")
    for bad in ("I would go east.", "Action: fly", "Action:", ""):
        assert parse_action(bad, NAMES) is None, bad
    assert parse_skill("The level is explored.\nSkill: Descender", SKILLS) == "descender"
    assert parse_skill("Skill: wizard", SKILLS) is None


# ----------------------------------------------------------------------------- prompts and rendering


def test_a_live_observation_as_text():
    from rl_baseline.baselines.llm_policy.render import relative, render_observation
    from rl_baseline.envs import make_monk_env

    env = make_monk_env(max_episode_steps=20)
    obs, info = env.reset(seed=5)
    try:
        text = render_observation(obs, info["messages"])
    finally:
        env.close()
    lines = text.splitlines()
    assert lines[0].startswith("Message: ") and lines[1].startswith("Status: depth 1 (The Dungeons of Doom, level 1)")
    assert "HP 1" in lines[1] and "hunger: not hungry" in lines[1] and "turn 1" in lines[1]
    hero_rows = [line for line in lines if "<- the hero's row" in line]
    assert len(hero_rows) == 1 and "@" in hero_rows[0]
    next_to = next(line for line in lines if line.startswith("Next to the hero: "))
    assert all(f"{d} '" in next_to for d in ("north", "northeast", "east", "southeast", "south", "southwest", "west",
                                             "northwest"))
    inventory = next(line for line in lines if line.startswith("Inventory: "))
    assert "a - " in inventory and "robe" in inventory  # the Monk's starting kit
    assert relative(3, -2) == "3 east and 2 north" and relative(0, 4) == "4 south" and relative(0, 0) == "here"


def test_equivalent_prompting_adds_maestromotifs_knowledge_and_zero_shot_does_not():
    from code_generation.prompts import skills_text

    facts, goal = coder_knowledge("gnomish")
    assert "Gnomish Mines" in facts and goal.startswith('Task "gnomish". Goal:') and "max_depth" not in goal
    zero = action_conversation("gnomish", "zero_shot", "OBS", [], NAMES)[1]["content"]
    equivalent = action_conversation("gnomish", "equivalent", "OBS", [], NAMES)[1]["content"]
    assert skills_text() in equivalent and goal in equivalent and facts in equivalent
    assert "discoverer" not in zero and "depth 2, 3 or 4" not in zero
    delphi_goal = coder_knowledge("delphi")[1]
    assert "depth 10" in delphi_goal  # the task's max_depth (initial_values.txt, the release's 10) filled in
    for task in EVAL_TASKS:  # every task has its knowledge and its zero-shot goal
        assert coder_knowledge(task)[1]
        assert action_conversation(task, "zero_shot", "OBS", [], NAMES)[1]["content"].startswith(f"Task: {task}.")


# ----------------------------------------------------------------------------- client: cache and tokens


class CountingBackend(Backend):
    """Answers 'Action: east' and counts the questions; reports usage when ``usage`` is set."""

    name = "counting"

    def __init__(self, usage: tuple[int, int] | None = None) -> None:
        self.asked: list[Conversation] = []
        self.usage = usage

    def generate(self, conversations: Sequence[Conversation]) -> list[str]:
        return [c.text for c in self.complete(conversations)]

    def complete(self, conversations: Sequence[Conversation]) -> list[Completion]:
        self.asked += list(conversations)
        u = self.usage or (None, None)
        return [Completion(f"Action: east ({len(self.asked)})", *u) for _ in conversations]


def conv(text: str) -> Conversation:
    return [{"role": "system", "content": "rules"}, {"role": "user", "content": text}]


def test_cache_answers_repeated_questions_from_disk_in_this_run_and_the_next(tmp_path):
    settings = LLMSettings(backend="openai", model="m", base_url="http://unused", cache_dir=str(tmp_path / "cache"))
    first = CountingBackend()
    client = LLMClient(settings, backend=first)
    replies = client.ask([conv("a"), conv("b"), conv("a")])
    assert len(first.asked) == 2  # the duplicate in the batch is asked once
    assert [r.cached for r in replies] == [False, False, True] and replies[0].text == replies[2].text
    again = client.ask([conv("b")])
    assert len(first.asked) == 2 and again[0].cached and again[0].text == replies[1].text
    # a new process, the same cache folder: nothing is asked
    second = CountingBackend()
    later = LLMClient(settings, backend=second).ask([conv("a"), conv("b")])
    assert second.asked == [] and [r.text for r in later] == [replies[0].text, replies[1].text]
    assert later[0].prompt_tokens == replies[0].prompt_tokens  # counts survive the disk
    # another model, other sampling or a stand-in never reuses these replies
    for other in (LLMSettings(backend="openai", model="other", base_url="x", cache_dir=settings.cache_dir),
                  LLMSettings(backend="openai", model="m", base_url="x", temperature=0.7, cache_dir=settings.cache_dir),
                  LLMSettings(backend="stand_in", model="m", cache_dir=settings.cache_dir)):
        backend = CountingBackend()
        LLMClient(other, backend=backend).ask([conv("a")])
        assert len(backend.asked) == 1, other


def test_token_counts_are_the_backends_usage_when_reported_else_the_approximation(tmp_path):
    exact = LLMClient(LLMSettings(backend="openai", model="m", base_url="x"), backend=CountingBackend(usage=(111, 7)))
    r = exact.ask([conv("hello")])[0]
    assert (r.prompt_tokens, r.completion_tokens, r.exact) == (111, 7, True)
    approx = LLMClient(LLMSettings(backend="stand_in"), backend=CountingBackend())
    r = approx.ask([conv("x" * 400)])[0]
    assert not r.exact and r.prompt_tokens == approx_conversation_tokens(conv("x" * 400)) == 100 + 2 + 2 * 4
    assert approx.stats.calls == 1 and approx.stats.sent_tokens == r.tokens


@pytest.mark.serial
def test_openai_backend_reads_the_servers_usage(tmp_path):
    from common.llm import make_backend

    with stand_in_server(tmp_path / "log.jsonl") as url:
        backend = make_backend("openai", model=MODEL, base_url=url)
        try:
            prompt = action_conversation("gnomish", "zero_shot", "Message: hi\nNext to the hero: north '.'", [], NAMES)
            (c,) = backend.complete([prompt])
        finally:
            backend.close()
    (logged,) = requests_in(tmp_path / "log.jsonl")
    assert c.text == logged["answer"] and "Action:" in c.text
    assert (c.prompt_tokens, c.completion_tokens) == (logged["usage"]["prompt_tokens"],
                                                     logged["usage"]["completion_tokens"])


# ----------------------------------------------------------------------------- the stand-in rules


def test_stand_in_answers_both_questions_in_the_format_asked():
    from rl_baseline.baselines.llm_policy.stand_in import action_answer, answer, skill_answer

    obs = ("Message: Asidonhopo offers 10 gold pieces for your dagger.  Sell it? [ynaq] (y)\nStatus: depth 1 "
           "(The Dungeons of Doom, level 1), HP 9/9, gold 0, experience level 1, hunger: not hungry, turn 5, "
           "armour class 4, power 1/1\nNext to the hero: north '.', east '.'\nSeen on the map: nothing notable")
    reply = action_answer(action_conversation("transactions", "zero_shot", obs, [], NAMES)[1]["content"])
    assert reply.startswith("Rule-based stand-in (no language model)") and parse_action(reply, NAMES) == \
        NAMES.index("northwest")  # yes to the sale
    walk = obs.replace("Asidonhopo offers 10 gold pieces for your dagger.  Sell it? [ynaq] (y)", "(none)")
    walk = walk.replace("Seen on the map: nothing notable", "Seen on the map: down staircase '>' 3 east")
    assert parse_action(action_answer(action_conversation("gnomish", "zero_shot", walk, [], NAMES)[1]["content"]),
                        NAMES) == NAMES.index("east")
    state = {"depth": 2}
    merchant = skill_conversation("transactions", state, "discoverer", ["discoverer", "descender", "ascender",
                                                                        "merchant"], [])[1]["content"]
    assert parse_skill(skill_answer(merchant), SKILLS) == "merchant"
    no_shop = skill_conversation("transactions", state, "discoverer", ["discoverer", "descender", "ascender"],
                                 [])[1]["content"]
    assert parse_skill(skill_answer(no_shop), SKILLS) == "descender"
    assert answer("Compare these two messages.") is None  # not a baseline's question


# ----------------------------------------------------------------------------- the hierarchical policy over skills


class ScriptedInner:
    """The task module's part: preconditions and termination, counted."""

    num_errors = 3

    def __init__(self) -> None:
        self.calls: list[str] = []

    def reset(self) -> None:
        self.calls.append("reset")

    def preconditions(self, chars, colors, num_items):
        self.calls.append("preconditions")
        return True, False

    def should_terminate(self, skill, skill_time, current_depth, previous_depth, preconditions):
        self.calls.append("should_terminate")
        return skill_time > 5

    def update_state(self, info):
        self.calls.append("update_state")


class ScriptedBackend(Backend):
    name = "scripted"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def generate(self, conversations):
        self.prompts += [c[-1]["content"] for c in conversations]
        return [self.replies.pop(0) for _ in conversations]


def test_llm_meta_policy_asks_the_model_and_keeps_the_tasks_skill_functions():
    from rl_baseline.baselines.llm_policy.meta import LLMMetaPolicy

    inner = ScriptedInner()
    backend = ScriptedBackend(["Skill: descender", "Skill: merchant", "no idea", "Skill: worshipper"])
    meta = LLMMetaPolicy(inner, LLMClient(LLMSettings(backend="openai", model="m", base_url="x"), backend=backend),
                         "buc")
    meta.reset()
    assert meta.initial_skill is None  # the runtime asks next_skill for the first skill too
    assert meta.preconditions(None, None, 1) == (True, False) and meta.should_terminate("discoverer", 9, 1, 1, [1, 0])
    meta.update_state({"depth": 1, "gold": 7, "hp": 10, "hpmax": 12, "message": "You kill the newt!"})
    assert inner.calls == ["reset", "preconditions", "should_terminate", "update_state"]
    assert meta.next_skill("discoverer", 1, 0, False, True) == "descender"
    assert "The episode just started" in backend.prompts[0] and "gold 7" in backend.prompts[0]
    assert "Skills that can start now: discoverer, descender, ascender, worshipper." in backend.prompts[0]
    # the merchant cannot start (no shopkeeper): counted, the fallback is taken
    assert meta.next_skill("descender", 2, 0, False, True) == "discoverer"
    assert "The descender skill just ended." in backend.prompts[1]
    assert meta.next_skill("discoverer", 2, 0, False, True) == "discoverer"  # no answer line: counted
    assert meta.next_skill("discoverer", 2, 0, False, True) == "worshipper"
    assert (meta.invalid_choices, meta.parse_errors, meta.num_errors) == (1, 1, 3)
    episode = meta.take_episode_stats()
    assert (episode.calls, episode.invalid_choices, episode.parse_errors) == (4, 1, 1)
    assert meta.take_episode_stats().calls == 0


# ----------------------------------------------------------------------------- bad input: nothing started


@pytest.mark.parametrize("argv, named", [
    (["--eval_target", "gnomish", "--backend", "vllm"], "--backend openai --base_url http://HOST:8000/v1"),
    (["--eval_target", "gnomish", "--backend", "openai"], "--base_url"),
    (["--eval_target", "gnomish", "--backend", "openai", "--base_url", "http://127.0.0.1:9/v1"], "cannot reach"),
    (["--eval_target", "gnomish", "--backend", "replay"], "--replay"),
    (["--eval_target", "gnomish", "--backend", "replay", "--replay", "missing.jsonl"], "--replay missing.jsonl"),
    (["--eval_target", "sokoban", "--backend", "stand_in"], "--eval_target"),
    (["--eval_target", "gnomish", "--backend", "stand_in", "--max_episode_steps", "0"], "--max_episode_steps"),
])
def test_llm_policy_without_a_usable_backend_or_task_stops_before_anything(tmp_path, capsys, argv, named):
    from scripts import llm_policy

    out = tmp_path / "out"
    assert llm_policy.main(argv + ["--out_dir", str(out)]) == 2
    assert named in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("extra, named", [
    ([], "--meta_llm_backend"),
    (["--meta_llm_backend", "openai"], "--meta_llm_base_url"),
    (["--meta_llm_backend", "vllm"], "--meta_llm_backend openai --meta_llm_base_url http://HOST:8000/v1"),
    (["--meta_llm_backend", "replay"], "--meta_llm_replay"),
    (["--meta_llm_backend", "gpt"], "--meta_llm_backend 'gpt'"),
])
def test_hierarchical_llm_without_a_usable_backend_stops_before_anything(tmp_path, capsys, extra, named):
    from scripts import main as main_script

    eval_dir = tmp_path / "eval"
    argv = ["--train_dir", str(tmp_path), "--experiment", "none", "--evaluation", "True", "--eval_target", "buc",
            "--meta_policy", "llm", "--eval_dir", str(eval_dir), *extra]
    assert main_script.main(argv) == 2
    assert named in capsys.readouterr().err
    assert not eval_dir.exists() and not (tmp_path / "none").exists()


def test_meta_policy_llm_is_an_evaluation_of_a_task():
    from rl_baseline.sf.cfg import ConfigError, parse_cfg

    with pytest.raises(ConfigError, match="--evaluation True"):
        parse_cfg(["--meta_policy", "llm", "--meta_llm_backend", "stand_in"])
    with pytest.raises(ConfigError, match="--eval_skill"):
        parse_cfg(["--evaluation", "True", "--eval_skill", "descender", "--meta_policy", "llm",
                   "--meta_llm_backend", "stand_in"])
    cfg = parse_cfg(["--evaluation", "True", "--eval_target", "buc", "--meta_policy", "llm", "--meta_llm_backend",
                     "openai", "--meta_llm_base_url", "http://h:8000/v1", "--eval_dir", "/x/hl/eval"])
    from rl_baseline.sf.cfg import meta_llm_settings

    s = meta_llm_settings(cfg)
    assert (s.backend, s.base_url, s.cache_dir) == ("openai", "http://h:8000/v1", "/x/hl/llm_cache")


# ----------------------------------------------------------------------------- the pipeline and its slurm jobs

LLM_BASELINES = ("llm_policy", "llm_policy_equivalent", "hierarchical_llm")


def _parse(argv: list[str]):
    from tests.test_slurm import parse

    return parse(argv)


def test_paper_plan_prints_and_writes_every_llm_baseline(tmp_path, capsys):
    from orchestration.pipeline import build_plan, make_config
    from orchestration.slurm import SlurmSettings, write_slurm
    from scripts import pipeline
    from tests.test_slurm import commands_in

    assert pipeline.main(["--preset", "paper", "--baselines", ",".join(LLM_BASELINES)]) == 0
    printed = capsys.readouterr().out
    for name in LLM_BASELINES:
        assert f"baselines/{name}/eval  (slurm array 0-{len(EVAL_TASKS) - 1})" in printed
    cfg = make_config("paper", baselines=LLM_BASELINES)
    plan = build_plan(cfg)
    workdir = tmp_path / "checkout"
    write_slurm(plan, tmp_path / "jobs", cfg, SlurmSettings(workdir=str(workdir)))
    jobs = tmp_path / "jobs"
    for name in LLM_BASELINES:
        path = jobs / f"baseline_{name}_eval.sbatch"
        subprocess.run(["bash", "-n", str(path)], check=True)
        text = path.read_text()
        assert f"#SBATCH --array=0-{len(EVAL_TASKS) - 1}" in text and "#SBATCH --gpus-per-node=8" in text
        assert ("vllm serve meta-llama/Llama-3.1-405B-Instruct-FP8 --served-model-name "
                "meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 8") in text
        assert "python -m scripts.wait_llm_server --addr 127.0.0.1 --port 8000" in text and "venv-vllm" in text
        seen = []
        for i in range(len(EVAL_TASKS)):
            wait, argv = commands_in(path, {"SLURM_ARRAY_TASK_ID": str(i)})
            assert wait[2] == "scripts.wait_llm_server"  # the server is ready before the evaluation starts
            args = _parse(argv)
            if name == "hierarchical_llm":
                assert args.evaluation and args.meta_policy == "llm" and args.meta_llm_backend == "openai"
                assert args.meta_llm_base_url == "http://127.0.0.1:8000/v1" and args.meta_llm_server_gpus == 8
                assert args.eval_dir == "train_dir/baselines/hierarchical_llm/eval"
                assert args.train_dir == "train_dir/skill_policy" and args.experiment == "default"
                seen.append(args.eval_target)
            else:
                assert args.backend == "openai" and args.base_url == "http://127.0.0.1:8000/v1"
                assert args.model == "meta-llama/Llama-3.1-405B-Instruct" and args.server_gpus == 8
                assert args.prompt == ("equivalent" if name == "llm_policy_equivalent" else "zero_shot")
                assert args.out_dir == f"train_dir/baselines/{name}" and args.max_episode_steps == 5000
                seen.append(args.eval_target)
        assert seen == list(EVAL_TASKS)
    submit = (jobs / "submit_all.sh").read_text()
    hier = next(line for line in submit.splitlines() if line.startswith("BASELINES_HIERARCHICAL_LLM_EVAL="))
    assert "${TRAIN_SKILLS}" in hier and "${GENERATE_GNOMISH}" in hier  # the trained skills, the tasks' modules
    assert next(line for line in submit.splitlines() if line.startswith("BASELINES_LLM_POLICY_EVAL=")) == \
        'BASELINES_LLM_POLICY_EVAL=$(submit "$HERE/baseline_llm_policy_eval.sbatch")'  # needs nothing trained
    report = next(line for line in submit.splitlines() if line.startswith("REPORT="))
    assert all("${" + f"BASELINES_{n.upper()}_EVAL" + "}" in report for n in LLM_BASELINES)


def test_small_plan_runs_the_stand_in_on_cpu_and_labels_it(tmp_path):
    from orchestration.pipeline import build_plan, make_config

    cfg = make_config("ci", out_dir=str(tmp_path / "run"), baselines=LLM_BASELINES)
    phases = [p for p in build_plan(cfg) if p.name.split("/")[0] == "baselines" and p.name.split("/")[1] in LLM_BASELINES]
    assert len(phases) == 3 * len(EVAL_TASKS)
    for p in phases:
        _, name, _, task = p.name.split("/")
        assert "RULE-BASED STAND-IN" in p.note and p.outputs[-1] == str(tmp_path / "run" / "baselines" / name /
                                                                        "cost.json")
        args = _parse(p.argv("python"))
        if name == "hierarchical_llm":
            assert args.meta_llm_backend == "stand_in" and args.eval_target == task
            assert args.train_dir == cfg.policy_train_dir and args.experiment == cfg.experiment
            assert args.max_episode_steps == cfg.max_episode_steps and p.after == ("train/skills",)
        else:
            assert args.backend == "stand_in" and args.eval_target == task
            assert args.max_episode_steps == cfg.max_episode_steps and args.eval_episodes == cfg.eval_episodes


def test_cost_json_sums_the_tasks_of_a_method(tmp_path):
    from common.atomic_io import atomic_write_json
    from rl_baseline.baselines.llm_policy.cost import update_cost_json

    for task, tokens, cpu in (("gnomish_seed2", 100, 36.0), ("buc_seed2", 50, 72.0)):
        atomic_write_json(tmp_path / "eval" / f"{task}.json", {"cost": {
            "label": "LLM policy, stand-in", "llm_calls": 2, "llm_tokens": tokens, "llm_tokens_sent": tokens,
            "tokens_counted_by": "approximation", "cpu_seconds": cpu, "gpu_seconds": 0.0, "env_steps": 10}})
    (tmp_path / "eval" / "gnomish_seed2.csv").write_text("not json")
    cost = update_cost_json(tmp_path, "llm_policy")
    assert json.loads((tmp_path / "cost.json").read_text()) == cost
    assert cost["method"] == "llm_policy" and cost["label"] == "LLM policy, stand-in"
    assert (cost["llm_tokens"], cost["env_steps"], cost["llm_calls"]) == (150, 20, 4)
    assert cost["cpu_hours"] == pytest.approx(0.03) and cost["gpu_hours"] == 0.0
    assert isinstance(cost["llm_tokens"], int) and isinstance(cost["cpu_hours"], float)
    assert set(cost["tasks"]) == {"gnomish_seed2", "buc_seed2"}


# ============================================================================= end to end (slow)


def _run_llm_policy(argv: list[str]) -> int:
    from scripts import llm_policy

    return llm_policy.main(argv + ["--no_progress"])


def _result(out: Path, task: str, seed: int = 2) -> dict:
    return json.loads((out / "eval" / f"{task}_seed{seed}.json").read_text())


@pytest.mark.slow
def test_llm_policy_end_to_end_with_the_stand_in_and_its_step_cap(tmp_path):
    out = tmp_path / "llm_policy"
    cap = 60
    assert _run_llm_policy(["--eval_target", "gnomish", "--backend", "stand_in", "--eval_episodes", "3",
                            "--eval_num_envs", "2", "--max_episode_steps", str(cap), "--out_dir", str(out)]) == 0
    r = _result(out, "gnomish")
    for key in ("mean", "stderr", "episodes", "protocol", "project", "release", "run", "per_episode"):
        assert key in r
    assert r["episodes"] == 3 and r["protocol"] == "project" and r["method"] == "llm_policy"
    assert "rule-based stand-in (no LLM)" in r["label"] and f"{cap}-step cap" in r["label"]
    lengths = [e["length"] for e in r["per_episode"]]
    assert all(n <= cap for n in lengths) and any(e["ended_by"] == "step_limit" and e["length"] == cap
                                                  for e in r["per_episode"])
    llm = r["llm"]
    assert llm["is_llm"] is False and llm["backend"] == "stand_in" and llm["parse_errors"] == 0
    assert llm["tokens_counted_by"].startswith("approximation")
    # one question per step of every game still running, no more (finished games are not asked)
    assert llm["calls"] == r["run"]["env_steps_run"]
    assert [e["llm"]["calls"] for e in r["per_episode"]] == lengths
    assert sum(e["llm"]["tokens"] for e in r["per_episode"]) <= llm["tokens"]
    cost = json.loads((out / "cost.json").read_text())
    assert cost["method"] == "llm_policy" and cost["label"] == r["label"]
    assert cost["llm_tokens"] == llm["tokens"] > 0 and cost["env_steps"] == r["run"]["env_steps_run"]
    assert cost["cpu_hours"] > 0 and cost["gpu_hours"] == 0.0
    assert (out / "eval" / "gnomish_seed2.csv").exists() and (out / "eval" / "gnomish_seed2.png").exists()

    # equivalent prompting: MaestroMotif's knowledge reaches the model; its own method folder
    eq = tmp_path / "llm_policy_equivalent"
    transcript = tmp_path / "equivalent.jsonl"
    assert _run_llm_policy(["--eval_target", "buc", "--prompt", "equivalent", "--backend", "stand_in",
                            "--eval_episodes", "1", "--max_episode_steps", "20", "--out_dir", str(eq),
                            "--record", str(transcript)]) == 0
    r = _result(eq, "buc")
    assert r["method"] == "llm_policy_equivalent" and "equivalent prompting" in r["label"]
    users = [json.loads(line)["content"] for line in transcript.read_text().splitlines()
             if json.loads(line)["role"] == "user"]
    assert len(users) == r["llm"]["calls"] == 20
    assert all("worshipper: use an altar" in u and 'Task "buc". Goal:' in u for u in users)
    assert json.loads((eq / "cost.json").read_text())["method"] == "llm_policy_equivalent"


@pytest.mark.serial
@pytest.mark.slow
def test_llm_policy_over_http_counts_usage_caches_replies_and_replays(tmp_path):
    log = tmp_path / "server.jsonl"
    out = tmp_path / "run"
    transcript = tmp_path / "transcript.jsonl"
    argv = ["--eval_target", "transactions", "--backend", "openai", "--model", MODEL, "--eval_episodes", "2",
            "--eval_num_envs", "2", "--max_episode_steps", "40", "--out_dir", str(out)]
    with stand_in_server(log) as url:
        assert _run_llm_policy(argv + ["--base_url", url, "--record", str(transcript)]) == 0
        first = _result(out, "transactions")
        asked = requests_in(log)
        llm = first["llm"]
        # every question reached the server once; the tokens are the server's usage, summed
        assert llm["calls"] == len(asked) == first["run"]["env_steps_run"] and llm["cache_hits"] == 0
        assert llm["prompt_tokens"] == sum(a["usage"]["prompt_tokens"] for a in asked)
        assert llm["completion_tokens"] == sum(a["usage"]["completion_tokens"] for a in asked)
        assert llm["tokens_counted_by"] == "backend usage (exact)" and llm["model"] == MODEL
        # the same run again: every reply comes from the cache, the server is asked nothing
        assert _run_llm_policy(argv + ["--base_url", url]) == 0
        second = _result(out, "transactions")
        assert len(requests_in(log)) == len(asked)
        assert second["llm"]["cache_hits"] == second["llm"]["calls"] == llm["calls"]
        assert second["llm"]["sent_tokens"] == 0 and second["llm"]["tokens"] == llm["tokens"]
        assert [e["length"] for e in second["per_episode"]] == [e["length"] for e in first["per_episode"]]
    # the recorded transcript replays the run without any server or cache
    replay_out = tmp_path / "replayed"
    assert _run_llm_policy(["--eval_target", "transactions", "--backend", "replay", "--replay", str(transcript),
                            "--eval_episodes", "2", "--eval_num_envs", "2", "--max_episode_steps", "40",
                            "--cache_dir", "none", "--out_dir", str(replay_out)]) == 0
    replayed = _result(replay_out, "transactions")
    assert [e["length"] for e in replayed["per_episode"]] == [e["length"] for e in first["per_episode"]]
    assert replayed["llm"]["calls"] == llm["calls"] and "replayed transcript" in replayed["label"]
    assert not (replay_out / "llm_cache").exists()


@pytest.mark.serial
@pytest.mark.slow
def test_llm_policy_counts_every_unreadable_reply_and_acts_safely(tmp_path):
    log = tmp_path / "server.jsonl"
    out = tmp_path / "run"
    with stand_in_server(log, mode="garbage") as url:
        assert _run_llm_policy(["--eval_target", "gnomish", "--backend", "openai", "--base_url", url, "--model", MODEL,
                                "--eval_episodes", "1", "--max_episode_steps", "15", "--out_dir", str(out)]) == 0
    r = _result(out, "gnomish")
    asked = requests_in(log)
    assert r["llm"]["parse_errors"] == r["llm"]["calls"] == 15 == r["per_episode"][0]["llm"]["parse_errors"]
    assert len(asked) == 15 - r["llm"]["cache_hits"] > 0  # a repeated view (a Monk's free move) is a cache hit
    # every step fell back to the safe action, as the history in the later prompts shows
    history = [line for a in asked for line in a["prompt"].splitlines() if line.startswith("- message:")]
    assert history and all(line.endswith("-> action: search") for line in history)
    assert r["per_episode"][0]["length"] == 15


# ----------------------------------------------------------------------------- the hierarchical LLM policy (slow)


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    """A ci-preset pipeline folder with tiny reward models and a skill policy trained for 1,000 env steps
    by the pipeline's own training phase: what the hierarchical baseline's phases read."""
    from bench.fixtures import build_tiny_reward_dirs
    from orchestration.pipeline import build_plan, make_config, run_plan

    root = tmp_path_factory.mktemp("pipeline_ci")
    build_tiny_reward_dirs(root)  # {root}/skill_rewards/llama3_{skill}_default, as the plan names them
    cfg = make_config("ci", out_dir=str(root), train_for_env_steps=1000, eval_targets=("buc", "gnomish"),
                      baselines=LLM_BASELINES)
    plan = build_plan(cfg)
    results = run_plan([p for p in plan if p.name == "train/skills"], root)
    assert results[-1].status == "ok", results[-1].log_path.read_text()[-3000:]
    return cfg, plan


def _patched_meta_policies(tmp: Path) -> Path:
    """The shipped policies over skills with the buc discoverer budget cut to 8 turns: several skill ends per
    short episode."""
    import shutil

    root = tmp / "meta_policies"
    shutil.copytree(REPO / "rl_baseline" / "meta_policies", root)
    path = root / "buc" / "seed42" / "execution.py"
    source = path.read_text()
    assert "self.discoverer_skill_steps = 500" in source
    path.write_text(source.replace("self.discoverer_skill_steps = 500", "self.discoverer_skill_steps = 8"))
    return root


@pytest.mark.slow
def test_pipeline_phases_of_every_baseline_run_at_smoke_scale(pipeline_run):
    """The small plan's own commands, run by the pipeline's runner: each writes its result and cost.json."""
    from orchestration.pipeline import run_plan

    cfg, plan = pipeline_run
    phases = [p for p in plan if p.name.split("/")[0] == "baselines" and p.name.split("/")[1] in LLM_BASELINES]
    assert {p.name.split("/")[1] for p in phases} == set(LLM_BASELINES)
    results = run_plan(phases, cfg.out)
    assert [r.status for r in results] == ["ok"] * len(phases), results[-1].log_path.read_text()[-3000:]
    for name in LLM_BASELINES:
        cost = json.loads((cfg.out / "baselines" / name / "cost.json").read_text())
        assert cost["method"] == name and "stand-in" in cost["label"] and len(cost["tasks"]) == 2
        assert {"llm_tokens", "cpu_hours", "gpu_hours", "env_steps"} <= set(cost) and cost["llm_tokens"] > 0
    hier = json.loads((cfg.out / "baselines" / "hierarchical_llm" / "eval" / "buc_seed42.json").read_text())
    assert hier["meta_policy"] == "llm" and hier["checkpoint"].startswith(cfg.policy_train_dir)
    assert hier["skill_experiment"] == cfg.experiment
    # a report over the whole run files every baseline under its own name, never under MaestroMotif's experiment
    from orchestration.report import find_eval_results

    found = {(r.experiment, r.task) for r in find_eval_results(cfg.out)}
    assert {(n, t) for n in LLM_BASELINES for t in ("buc", "gnomish")} <= found
    assert not any(e == cfg.experiment for e, _ in found)
    # ... and the report gives each its own column, labelled as the stand-in it is, and a cost row
    from orchestration.report import build_report

    md = build_report([cfg.out], cfg.out / "report_test", plots=False).markdown
    head = next(line for line in md.splitlines() if line.startswith("| task | measure |"))
    for title in ("LLM policy (stand-in)", "LLM policy (equivalent prompting) (stand-in)",
                  "Hierarchical LLM policy (stand-in)"):
        assert f"| {title} |" in head
    for name in LLM_BASELINES:
        assert f"\n| {name} | " in md.split("## Cost per method")[1]
    assert hier["cost"]["training_env_steps"] >= 1000
    assert not list((Path(cfg.policy_train_dir) / cfg.experiment).glob("eval/*"))  # MaestroMotif's folder untouched


@pytest.mark.serial
@pytest.mark.slow
def test_hierarchical_llm_over_http_chooses_every_skill_and_counts_it(pipeline_run, tmp_path):
    cfg, _ = pipeline_run
    log = tmp_path / "server.jsonl"
    eval_dir = tmp_path / "hierarchical_llm" / "eval"
    root = _patched_meta_policies(tmp_path)
    with stand_in_server(log) as url:
        proc = subprocess.run(
            [sys.executable, "-m", "scripts.main", "--train_dir", cfg.policy_train_dir, "--experiment", cfg.experiment,
             "--evaluation", "True", "--eval_target", "buc", "--eval_protocol", "project", "--eval_episodes", "2",
             "--eval_num_envs", "2", "--max_episode_steps", "120", "--meta_policy_root", str(root),
             "--meta_policy", "llm", "--meta_llm_backend", "openai", "--meta_llm_base_url", url,
             "--meta_llm_model", MODEL, "--eval_dir", str(eval_dir), "--device", "cpu"],
            cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1"), capture_output=True,
            text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads((eval_dir / "buc_seed42.json").read_text())
    asked = requests_in(log)
    llm = r["llm"]
    # the first skill and every skill end after it; a question asked before (the same state) comes from the cache
    assert llm["calls"] > r["episodes"] == 2 and len(asked) == llm["calls"] - llm["cache_hits"] > 0
    assert all("Skills that can start now:" in a["prompt"] for a in asked)
    assert sum(e["llm"]["calls"] for e in r["per_episode"]) == llm["calls"]
    assert llm["sent_tokens"] == sum(a["usage"]["total_tokens"] for a in asked)
    assert llm["tokens_counted_by"] == "backend usage (exact)"
    chosen = [a["answer"].splitlines()[-1] for a in asked]
    assert "Skill: discoverer" in chosen and "Skill: descender" in chosen  # the stand-in's alternation
    assert r["skill_time_share"]["descender"] > 0 and r["skill_time_share"]["discoverer"] > 0
    assert r["label"].startswith("Hierarchical LLM policy") and "stand-in" not in r["label"].lower().split("by")[0]
    cost = json.loads((eval_dir.parent / "cost.json").read_text())
    assert cost["method"] == "hierarchical_llm" and cost["llm_tokens"] == llm["tokens"]
    assert cost["env_steps"] == r["run"]["env_steps_run"] and "note" in cost

    # the server gone: the run stops before the first game, names it, writes nothing
    other = tmp_path / "down" / "eval"
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.main", "--train_dir", cfg.policy_train_dir, "--experiment", cfg.experiment,
         "--evaluation", "True", "--eval_target", "buc", "--eval_protocol", "project", "--eval_episodes", "1",
         "--meta_policy", "llm", "--meta_llm_backend", "openai", "--meta_llm_base_url", url,
         "--meta_llm_model", MODEL, "--eval_dir", str(other), "--device", "cpu"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1"), capture_output=True,
        text=True, timeout=300)
    assert proc.returncode == 2 and "cannot reach the server" in proc.stdout + proc.stderr
    assert not (tmp_path / "down").exists()


# ----------------------------------------------------------------------------- a real (tiny, local) model


@pytest.mark.slow  # loading transformers takes seconds
def test_transformers_backend_reports_the_tokenizers_counts(tmp_path):
    from common.llm import make_backend
    from tests.test_annotation import _tiny_model

    _tiny_model(tmp_path / "tiny", answer_token_first=True)  # greedy decoding repeats one token
    backend = make_backend("transformers", model=str(tmp_path / "tiny"), temperature=0.0, max_tokens=3, device="cpu")
    conversations = [conv("descender a"), conv("b b b b b b b b")]
    completions = backend.complete(conversations)
    tok = backend.tokenizer
    for c, cv in zip(completions, conversations):
        text = tok.apply_chat_template(cv, tokenize=False, add_generation_prompt=True)
        assert c.prompt_tokens == len(tok(text, add_special_tokens=False)["input_ids"])  # padding not counted
        assert c.completion_tokens == 3 and c.text.startswith("Answer: 1")


@pytest.mark.slow
def test_llm_policy_with_a_local_model_counts_its_tokens_exactly_and_its_unusable_replies(tmp_path):
    from tests.test_annotation import _tiny_model

    _tiny_model(tmp_path / "tiny", answer_token_first=True)  # it can only say "Answer: 1": never an action
    out = tmp_path / "run"
    assert _run_llm_policy(["--eval_target", "delphi", "--backend", "transformers", "--model", str(tmp_path / "tiny"),
                            "--temperature", "0", "--max_tokens", "2", "--eval_episodes", "1", "--max_episode_steps",
                            "5", "--out_dir", str(out)]) == 0
    r = _result(out, "delphi")
    llm = r["llm"]
    assert llm["is_llm"] and llm["model"] == str(tmp_path / "tiny") and llm["tokens_counted_by"] == "backend usage (exact)"
    assert llm["calls"] == 5 == llm["parse_errors"] and llm["completion_tokens"] == 2 * llm["calls"]
    assert "via transformers" in r["label"] and "stand-in" not in r["label"]
