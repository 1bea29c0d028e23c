"""The generate / test / refine loop that writes a policy over skills with a language model.

Non-interactive version of the paper's loop, for one task and one seed:

1. ask for the code and its unit test (``{task}/initial_prompt.txt``);
2. extract the python block, check it and run its unit test in the sandbox
   (after the simulated-dungeon harness), then run the task's reference unit test
   on the class;
3. a rejection, a crash or a time-out is fed back as the "output" with the rewrite
   prompt; otherwise the model is shown the output and asked whether it matches the
   strategy (``check_prompt.txt``, answer ``VERDICT: YES/NO``); on NO (or when the
   reference test failed) it is asked to walk through its code and rewrite it
   (``rewrite_prompt.txt``); at most ``max_iters`` code answers;
4. composite tasks then ask for the state attributes and their hooks
   (``attributes_prompt.txt``), checked the same way.

Every message and every sandbox result goes to ``{out_dir}/{task}/_seed{N}/transcript.jsonl``
as it happens; the accepted code goes to ``{out_dir}/{task}/_seed{N}/execution.py``.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from code_generation.prompts import (
    TaskPrompts,
    existing_class_source,
    extract_code,
    no_code_feedback,
    parse_verdict,
)
from code_generation.sandbox import POLICY_METHODS, SandboxLimits, SandboxResult, run_in_sandbox, split_unit_test
from code_generation.skill_rules import time_budget_skills
from common.atomic_io import atomic_write_text
from common.llm import Backend, Message

logger = logging.getLogger(__name__)


@dataclass
class GenerationConfig:
    """One code-generation run."""

    task: str
    seed: int = 42
    out_dir: str | Path = "code_generation"
    max_iters: int = 4
    prompt_dir: str | Path | None = None  # default: the package folder code_generation/
    meta_root: str | Path | None = None  # where the training policy shown to eval tasks is read
    reference_test: bool = True  # also require the task's reference unit test to pass
    skill_functions: bool = False  # also generate skill_precondition / skill_termination
    limits: SandboxLimits = field(default_factory=SandboxLimits)

    @property
    def run_dir(self) -> Path:
        return Path(self.out_dir) / self.task / f"_seed{self.seed}"


@dataclass
class GenerationResult:
    accepted: bool
    rounds: int
    code: str | None
    run_dir: Path
    transcript_path: Path
    execution_path: Path | None
    skill_functions_path: Path | None = None
    reason: str = ""


class Transcript:
    """Append-only JSONL record of a run (flushed line by line)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():  # keep earlier runs: transcript.1.jsonl, transcript.2.jsonl, ...
            n = 1
            while path.with_name(f"{path.stem}.{n}{path.suffix}").exists():
                n += 1
            os.replace(path, path.with_name(f"{path.stem}.{n}{path.suffix}"))
        self.path = path
        self._fh = path.open("w", encoding="utf-8")

    def write(self, **record: Any) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class _Conversation:
    def __init__(self, client: Backend, transcript: Transcript, system: str) -> None:
        self.client = client
        self.transcript = transcript
        self.messages: list[Message] = [{"role": "system", "content": system}]
        transcript.write(kind="system", role="system", content=system)

    def ask(self, text: str, kind: str, round_: int) -> str:
        self.messages.append({"role": "user", "content": text})
        self.transcript.write(kind=kind, role="user", round=round_, content=text)
        answer = self.client.chat(list(self.messages))
        self.messages.append({"role": "assistant", "content": answer})
        self.transcript.write(kind=kind, role="assistant", round=round_, content=answer)
        return answer


def _test_code(code: str, prompts: TaskPrompts, config: GenerationConfig, required: dict[str, int],
               reference_test: bool) -> tuple[SandboxResult, SandboxResult | None, str]:
    """Runs the model's own unit test, then the task's reference test. Returns both and the shown output."""
    own = run_in_sandbox(code, config.limits, required_methods=required, prelude=[prompts.harness])
    output = own.feedback()
    reference = None
    if own.ok and reference_test:
        module_part = split_unit_test(code)[0]
        reference = run_in_sandbox(module_part, config.limits, required_methods=required,
                                   prelude=[prompts.harness], extra_sources=[prompts.reference_test])
        tail = "\n".join(reference.feedback().strip().splitlines()[-15:])
        output += "\n\nReference unit test of the task (not written by you):\n" + tail
    return own, reference, output


def _refine(conv: _Conversation, prompts: TaskPrompts, config: GenerationConfig, first_prompt: str,
            kind: str, required: dict[str, int], attributes: tuple[str, ...] = (),
            reference_test: bool = True) -> tuple[str | None, int]:
    """Asks, tests and rewrites until accepted or ``max_iters`` code answers. Returns (code, rounds)."""
    prompt, prompt_kind = first_prompt, kind
    for round_ in range(1, config.max_iters + 1):
        answer = conv.ask(prompt, prompt_kind, round_)
        code = extract_code(answer)
        if code is None:
            output = no_code_feedback(answer)
            conv.transcript.write(kind="sandbox", round=round_, ok=False, output=output)
            prompt, prompt_kind = prompts.rewrite_text(output), "rewrite"
            continue
        missing = [name for name in attributes if name not in code]
        own, reference, output = _test_code(code, prompts, config, required, reference_test)
        if missing:
            output += "\n\nThe class must keep the attribute(s): " + ", ".join(missing)
        ref_ok = reference is None or reference.ok
        conv.transcript.write(kind="sandbox", round=round_, ok=own.ok, violation=own.violation,
                              timed_out=own.timed_out, returncode=own.returncode,
                              reference_ok=None if reference is None else reference.ok, output=output)
        if not own.ok or missing:
            prompt, prompt_kind = prompts.rewrite_text(output), "rewrite"
            continue
        verdict = parse_verdict(conv.ask(prompts.check_text(output), "check", round_))
        conv.transcript.write(kind="verdict", round=round_, verdict=verdict, reference_ok=ref_ok)
        if verdict and ref_ok:
            return code, round_
        if verdict and not ref_ok:
            output += ("\n\nYou judged the output correct, but the reference unit test of the task failed, "
                       "so the code cannot be accepted.")
        prompt, prompt_kind = prompts.rewrite_text(output), "rewrite"
    return None, config.max_iters


def _budgets_under_test() -> list[str]:
    """The time budgets the skill functions are checked with, set as a task's ``set_initial_values`` sets them:
    500 turns for a skill that may always start, 20 times that for one that needs a shopkeeper or an altar (the
    release's ratio); a budget with a default in its skill file is left unset, as the tasks leave it."""
    lines = [f"self.{s.budget_attribute} = {500 if s.start == 'always' else 10000}"
             for s in time_budget_skills() if s.budget_default is None]
    return lines or ["pass"]


def _generate_skill_functions(client: Backend, prompts: TaskPrompts, config: GenerationConfig,
                              transcript: Transcript) -> str | None:
    """Asks for skill_precondition / skill_termination; accepted when the harness checks pass."""
    conv = _Conversation(client, transcript, prompts.system)
    prompt = prompts.skill_functions or ""
    check = (
        "class SkillFunctionsUnderTest(NetHackPlayer):\n"
        "    def __init__(self, max_depth, branch_depth):\n"
        "        self.max_depth = max_depth\n"
        "        self.branch_depth = branch_depth\n"
        "        self.set_initial_values()\n\n"
        "    def set_initial_values(self):\n"
        + "".join(f"        {line}\n" for line in _budgets_under_test()) + "\n\n"
        "check_skill_functions(SkillFunctionsUnderTest)\n"
        "print('UNIT TEST PASSED')\n"
    )
    required = {"skill_precondition": 4, "skill_termination": 5}
    for round_ in range(1, config.max_iters + 1):
        answer = conv.ask(prompt, "skill_functions", round_)
        code = extract_code(answer)
        if code is None:
            output = no_code_feedback(answer)
            ok = False
        else:
            module_part = split_unit_test(code)[0]
            result = run_in_sandbox(module_part, config.limits, required_methods=required,
                                    prelude=[prompts.harness], extra_sources=[check])
            ok, output = result.ok, result.feedback()
        transcript.write(kind="sandbox", round=round_, ok=ok, output=output, part="skill_functions")
        if ok and code is not None:
            return split_unit_test(code)[0]
        prompt = ("The check of your functions failed. Output:\n" + output
                  + "\nWalk through your code step by step, find the mistake and give the corrected class "
                    "in one ```python block.")
    return None


def generate(config: GenerationConfig, client: Backend) -> GenerationResult:
    """Runs the whole loop for ``config.task`` / ``config.seed`` (see the module docstring)."""
    existing = existing_class_source(config.task, config.seed, config.meta_root, config.prompt_dir)
    prompts = TaskPrompts.load(config.task, existing, config.prompt_dir)
    run_dir = config.run_dir
    transcript = Transcript(run_dir / "transcript.jsonl")
    transcript.write(kind="run", task=config.task, seed=config.seed, max_iters=config.max_iters)
    skill_path: Path | None = None
    try:
        if config.skill_functions:
            functions = _generate_skill_functions(client, prompts, config, transcript)
            if functions is None:
                return GenerationResult(False, config.max_iters, None, run_dir, transcript.path, None,
                                        reason="no accepted skill functions")
            skill_path = run_dir / "skill_functions.py"
            atomic_write_text(skill_path, functions)
        conv = _Conversation(client, transcript, prompts.system)
        # composite tasks meet their reference test only once the state attributes exist
        code, rounds = _refine(conv, prompts, config, prompts.initial, "initial", dict(POLICY_METHODS),
                               reference_test=config.reference_test and prompts.attributes is None)
        if code is None:
            transcript.write(kind="result", accepted=False, rounds=rounds)
            return GenerationResult(False, rounds, None, run_dir, transcript.path, None, skill_path,
                                    reason=f"no code accepted after {rounds} rounds")
        if prompts.attributes is not None:
            required = dict(POLICY_METHODS)
            required.update(prompts.hooks)
            code, more = _refine(conv, prompts, config, prompts.attributes, "attributes", required,
                                 prompts.attributes_required, reference_test=config.reference_test)
            rounds += more
            if code is None:
                transcript.write(kind="result", accepted=False, rounds=rounds)
                return GenerationResult(False, rounds, None, run_dir, transcript.path, None, skill_path,
                                        reason="the attribute code was not accepted")
        execution = run_dir / "execution.py"
        atomic_write_text(execution, code)
        transcript.write(kind="result", accepted=True, rounds=rounds, execution=str(execution))
        logger.info("task %s seed %d: code accepted after %d rounds -> %s", config.task, config.seed, rounds, execution)
        return GenerationResult(True, rounds, code, run_dir, transcript.path, execution, skill_path)
    finally:
        transcript.close()
