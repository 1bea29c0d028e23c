"""Motif's annotation prompts, in this project's words: goal keys, the two template versions, the
answer format, its parser and the retry prompt (``scripts.annotate_pairs_dataset``).

What Motif's paper and release describe, and this module follows:

* the judge sees two short gameplay *descriptions* (the messages of two observations, see
  :func:`rlaif.captions.motif_description`) and first says what it knows of NetHack and of the
  game's aim, analyses each description using only what it says (it may be empty) and its
  knowledge of the game, compares them from first principles, and ends by naming the
  description more likely to show progress towards the goal;
* the goal sentence (``--goal-key``) is put into the prompt: ``defaultgoal`` (a high game score:
  killing monsters, collecting gold, going down the dungeon), ``zeroknowledge`` (no goal sentence:
  the judge relies on its own knowledge of the game), ``combat`` (fighting and killing monsters,
  never gold or going down), ``gold`` (collecting gold, never other ways of scoring or going
  down), ``stairs`` (going down as far as possible, never combat or gold); this project's five
  skill keys put the skill's preference sentence (:data:`rlaif.prompts.SKILL_PREFERENCES`) there;
* ``--prompt-version default`` calls the two texts "descriptions" and asks for
  ``("best_description": 1)``, ``2`` or ``None``; ``reworded`` calls them "messages", asks for
  a summary of each message's meaning, a comment on uncertainty, places the goal after the
  comparison and asks for ``("best_message": ...)``;
* a reply without an answer gets one retry turn asking for the answer alone.

For the MaestroMotif paper's baselines, the goal key may also be one of the nine evaluation tasks
(Motif task-specific: the task's description, :data:`common.vocabulary.TASK_DESCRIPTIONS`, is the
goal), and a *context* may precede the goal (Motif with equivalent prompting:
:func:`equivalent_context` -- the skill descriptions, the task description and the generated policy
over skills, so the judge knows what MaestroMotif's own components know).

The wording here is ours. ``--prompt-file`` supplies any other text (for instance the exact
published one): a template with three ``{}`` fields (goal, first description, second
description, in that order, literal braces doubled as in Python's ``str.format``) or the named
fields ``{goal}``, ``{description_1}``, ``{description_2}``. The answer key stays the version's.

Annotator strings follow Motif's naming: ``llama{size}b_{msg_}{minbl_}{goal}_{version}``.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from common.vocabulary import EVAL_TASKS, SKILL_DESCRIPTIONS, SKILLS, TASK_DESCRIPTIONS
from rlaif.preferences import FIRST, SECOND, TIE, UNKNOWN
from rlaif.prompts import SKILL_PREFERENCES

PROMPT_VERSIONS: tuple[str, ...] = ("default", "reworded")
MOTIF_GOAL_KEYS: tuple[str, ...] = ("defaultgoal", "zeroknowledge", "combat", "gold", "stairs")
#: every goal key scripts.annotate_pairs_dataset accepts: Motif's five, this project's five skills and its nine
#: evaluation tasks (the Motif task-specific baseline)
GOAL_KEYS: tuple[str, ...] = MOTIF_GOAL_KEYS + SKILLS + EVAL_TASKS
#: what may precede the goal sentence (--prompt-context): nothing, or MaestroMotif's knowledge (equivalent prompting)
PROMPT_CONTEXTS: tuple[str, ...] = ("none", "equivalent")
LLM_SIZES: tuple[int, ...] = (7, 13, 70)

# Goal sentences, written from the goals Motif's paper describes (ours, not the published text).
MOTIF_GOALS: dict[str, str] = {
    "defaultgoal": (
        "The goal is a high game score: prefer the player who earns points, for example by killing "
        "monsters, picking up gold or making its way down to deeper dungeon levels."
    ),
    "zeroknowledge": "",
    "combat": (
        "The goal is fighting: prefer the player who engages monsters in combat and kills them. Never "
        "prefer a player who picks up any gold or who goes down to a deeper dungeon level."
    ),
    "gold": (
        "The goal is gold: prefer the player who gathers as much gold as possible. Never prefer a player "
        "who earns points in other ways, such as fighting or killing monsters, or who goes down to a "
        "deeper dungeon level."
    ),
    "stairs": (
        "The goal is depth: prefer the player who goes down the dungeon as far as possible. Never prefer a "
        "player who earns points in other ways, such as fighting, or who picks up any gold."
    ),
}

SYSTEM_PROMPT = (
    "You are a careful, honest judge of how well NetHack is being played and of the progress a player "
    "makes. Help as well as you can while staying truthful, and do not make up facts about the game you "
    "are unsure of."
)

#: the answer key of each version: the judge ends with ("best_description": 1) or ("best_message": 1)
ANSWER_KEYS: dict[str, str] = {"default": "best_description", "reworded": "best_message"}

TEMPLATES: dict[str, str] = {
    "default": (
        "You will read two short descriptions of moments from NetHack games.\n"
        "Start by saying what you know about NetHack and what a player is trying to achieve in it. {goal}\n"
        "Next, for each description, explain what it means, using only what the description says (it can be "
        "empty) and your knowledge of the game.\n"
        "Then compare the two, reasoning from first principles.\n"
        "Last, state which description is more likely to show progress towards the goal by writing "
        "(\"best_description\": 1) or (\"best_description\": 2). You may also write (\"best_description\": None).\n"
        "\n"
        "Description 1:\n\"{description_1}\"\n"
        "\n"
        "Description 2:\n\"{description_2}\"\n"
    ),
    "reworded": (
        "You will read two short messages from NetHack games.\n"
        "Start by saying what you know about NetHack and what a player is trying to achieve in it.\n"
        "Next, summarise what each message means and what it obviously implies, keeping to facts from the "
        "message and your knowledge of the game.\n"
        "Then compare the two from first principles and say how certain you are. {goal}\n"
        "Last, name the message more likely to show an improvement with respect to the goal by writing "
        "(\"best_message\": 1) or (\"best_message\": 2). If you are very uncertain you may write "
        "(\"best_message\": None). Keep exactly to this format.\n"
        "\n"
        "Message 1:\n\"{description_1}\"\n"
        "\n"
        "Message 2:\n\"{description_2}\"\n"
    ),
}

RETRY_PROMPTS: dict[str, str] = {
    version: (f"Which one is better, then? Answer only with (\"{key}\": 1), (\"{key}\": 2) or (\"{key}\": None).")
    for version, key in ANSWER_KEYS.items()
}

TEMPLATE_FIELDS: tuple[str, ...] = ("goal", "description_1", "description_2")


class MotifPromptError(ValueError):
    """A bad goal key, prompt version or prompt file."""


def check_goal_key(goal_key: str) -> str:
    if goal_key not in GOAL_KEYS:
        raise MotifPromptError(f"--goal-key {goal_key!r}: expected one of {', '.join(GOAL_KEYS)}")
    return goal_key


def check_prompt_version(version: str) -> str:
    if version not in PROMPT_VERSIONS:
        raise MotifPromptError(f"--prompt-version {version!r}: expected one of {', '.join(PROMPT_VERSIONS)}")
    return version


def goal_sentence(goal_key: str) -> str:
    """The goal put into the prompt: Motif's goal keys, a skill's preference sentence, or a task's description."""
    check_goal_key(goal_key)
    if goal_key in MOTIF_GOALS:
        return MOTIF_GOALS[goal_key]
    if goal_key in TASK_DESCRIPTIONS:
        return (f"The goal is this task: {TASK_DESCRIPTIONS[goal_key]} Prefer the player who makes more progress "
                "towards completing it.")
    return SKILL_PREFERENCES[goal_key]


def equivalent_context(task: str, policy_code: str) -> str:
    """What MaestroMotif knows about ``task``, for the judge of Motif with equivalent prompting: the five skills
    and their descriptions, the task's description and the policy over skills generated for it (its code)."""
    if task not in TASK_DESCRIPTIONS:
        raise MotifPromptError(f"--goal-key {task!r}: equivalent prompting needs one of the evaluation tasks "
                               f"({', '.join(EVAL_TASKS)}) as the goal")
    if not policy_code.strip():
        raise MotifPromptError("--policy-code: the policy over skills is empty")
    skills = "\n".join(f"- {name}: {SKILL_DESCRIPTIONS[name]}" for name in SKILLS)
    return (
        "Background: the player is controlled through five skills, each described in one sentence:\n"
        f"{skills}\n"
        f"The task the player is given: {TASK_DESCRIPTIONS[task]}\n"
        "The following Python program (the policy over skills) decides, as the game goes on, which skill the player "
        "uses to accomplish the task:\n"
        f"```python\n{policy_code.rstrip()}\n```\n"
        "Use this knowledge when you judge which moment shows more progress towards the task."
    )


def annotator_string(llm_size: int, goal_key: str, prompt_version: str, use_messages: bool = True,
                     use_blstats: bool = False, context: str = "none") -> str:
    """Motif's preference file name: ``llama{size}b_{msg_}{minbl_}{goal}_{version}`` (``_equivalent`` after it
    with the equivalent-prompting context, so the two baselines never share a file)."""
    return (f"llama{int(llm_size)}b_{'msg_' if use_messages else ''}{'minbl_' if use_blstats else ''}"
            f"{goal_key}_{prompt_version}{'' if context == 'none' else '_' + context}")


def answer_pattern(key: str) -> re.Pattern[str]:
    """The answer of a reply: the key (any case, ``_`` or a space optional) followed within a few
    punctuation marks by 1, 2 or none (also "neither"/"tie"/"null")."""
    word = key.split("_", 1)[1]
    return re.compile(rf"best[_\s]*{word}\W{{0,8}}(?:is\s+)?(1|2|none|neither|tie|null)\b", re.IGNORECASE)


_PATTERNS = {version: answer_pattern(key) for version, key in ANSWER_KEYS.items()}
_CODES = {"1": FIRST, "2": SECOND}


def parse_motif_answer(text: Optional[str], version: str = "default") -> int:
    """Preference code of a reply: the LAST answer in it (0 first, 1 second, 2 none, 3 unparseable)."""
    if not text:
        return UNKNOWN
    matches = _PATTERNS[check_prompt_version(version)].findall(text)
    if not matches:
        return UNKNOWN
    return _CODES.get(matches[-1].lower(), TIE)


def template_parts(text: str, source: str) -> list[tuple[str, Optional[str]]]:
    """``text`` as (literal, field) pieces: ``{}`` fields are named goal, description_1, description_2 in
    order; named fields must be among those; each field exactly once, description 1 before 2."""
    try:
        pieces = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise MotifPromptError(f"{source}: not a template ({exc}); write literal braces as {{{{ and }}}}") from exc
    out: list[tuple[str, Optional[str]]] = []
    positional = 0
    for literal, field_name, spec, conversion in pieces:
        name = field_name
        if field_name == "":
            if positional >= len(TEMPLATE_FIELDS):
                raise MotifPromptError(f"{source}: more than {len(TEMPLATE_FIELDS)} {{}} fields "
                                       "(goal, description 1, description 2)")
            name = TEMPLATE_FIELDS[positional]
            positional += 1
        elif field_name is not None and field_name not in TEMPLATE_FIELDS:
            raise MotifPromptError(f"{source}: unknown field {{{field_name}}}; the fields are "
                                   f"{', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)} (or three {{}} in that order)")
        if spec or conversion:
            raise MotifPromptError(f"{source}: field {{{field_name}}} has a format spec or conversion")
        out.append((literal, name))
    names = [n for _, n in out if n is not None]
    for name in TEMPLATE_FIELDS:
        if names.count(name) != 1:
            raise MotifPromptError(f"{source}: the field {name} must appear exactly once (found {names.count(name)})")
    if names.index("description_1") > names.index("description_2"):
        raise MotifPromptError(f"{source}: the first description must come before the second")
    return out


def load_prompt_file(path: Optional[str]) -> Optional[str]:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise MotifPromptError(f"--prompt-file {path}: no such file")
    text = p.read_text(encoding="utf-8")
    template_parts(text, f"--prompt-file {path}")
    return text


@dataclass
class MotifPromptBuilder:
    """Conversations of one Motif annotation run: version, goal and (optionally) the user's template."""

    goal_key: str
    version: str = "default"
    template: Optional[str] = None  # None: this project's text of the version
    system_prompt: str = SYSTEM_PROMPT
    context: str = ""  # text put before the goal sentence (equivalent prompting); "" for none

    def __post_init__(self) -> None:
        check_goal_key(self.goal_key)
        check_prompt_version(self.version)
        text = self.template if self.template is not None else TEMPLATES[self.version]
        parts = template_parts(text, "prompt template")
        goal = goal_sentence(self.goal_key)
        if self.context:
            goal = f"{self.context}\n{goal}"
        # Pre-fill the goal, then split around the two descriptions (as rlaif.prompts.PromptBuilder does).
        chunks: list[str] = [""]
        for literal, name in parts:
            chunks[-1] += literal
            if name == "goal":
                chunks[-1] += goal
            elif name is not None:
                chunks.append("")
        head, middle, tail = chunks
        self._parts = (head, middle, tail)
        self._system = {"role": "system", "content": self.system_prompt}
        self.answer_key = ANSWER_KEYS[self.version]

    @property
    def parts(self) -> tuple[str, str, str]:
        """The fixed text around the descriptions: prompt = parts[0] + d1 + parts[1] + d2 + parts[2]."""
        return self._parts

    def user_prompt(self, description_1: str, description_2: str) -> str:
        head, middle, tail = self._parts
        return head + description_1 + middle + description_2 + tail

    def conversation(self, description_1: str, description_2: str) -> list[dict[str, str]]:
        return [self._system, {"role": "user", "content": self.user_prompt(description_1, description_2)}]

    def parse(self, text: Optional[str]) -> int:
        return parse_motif_answer(text, self.version)

    def retry_conversation(self, conversation: list[dict[str, str]], reply: str) -> list[dict[str, str]]:
        return conversation + [{"role": "assistant", "content": reply},
                               {"role": "user", "content": RETRY_PROMPTS[self.version]}]


__all__ = [
    "ANSWER_KEYS",
    "GOAL_KEYS",
    "LLM_SIZES",
    "MOTIF_GOALS",
    "MOTIF_GOAL_KEYS",
    "MotifPromptBuilder",
    "MotifPromptError",
    "PROMPT_CONTEXTS",
    "PROMPT_VERSIONS",
    "annotator_string",
    "check_goal_key",
    "equivalent_context",
    "goal_sentence",
    "load_prompt_file",
    "parse_motif_answer",
    "template_parts",
]
