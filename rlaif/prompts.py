"""Annotation prompts: the judge's system prompt, the skills' preference sentences
(read from the skill files), the pair template, the answer format and its parser,
and the retry prompt sent once when a reply holds no parseable answer.

The judge is asked to end its reply with a line ``Answer: 1``, ``Answer: 2`` or
``Answer: none``; :func:`parse_answer` maps that to the preference codes of
:mod:`rlaif.preferences` (0 first, 1 second, 2 tie/neither, 3 unknown).

Conversations are lists of ``{"role": ..., "content": ...}`` dicts; each
backend formats them with the model's own chat template (locally through
``tokenizer.apply_chat_template``, remotely through the server's chat endpoint).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from common.vocabulary import SKILL_SPECS, SKILLS
from rlaif.preferences import FIRST, SECOND, TIE, UNKNOWN

SYSTEM_PROMPT = (
    "You are an expert NetHack player acting as a careful and fair judge. You compare short "
    "descriptions of moments from NetHack games and decide which moment shows more progress "
    "towards a stated goal. Base your judgement only on what the descriptions say, be honest "
    "when neither is better, and keep your reasoning brief."
)

#: What the judge should prefer for each skill: its skill file's ``[text] preference`` (the content and the strength
#: of the release's goals, its rlaif/prompts.py goal_strings, in this project's words). The Motif-layout prompts
#: (rlaif.motif_prompts) read them here.
SKILL_PREFERENCES: dict[str, str] = {name: spec.preference for name, spec in SKILL_SPECS.items()}

GOD_WARNING = (
    "Above all else, whatever the goal, reject outright any moment in which the player angers or "
    "displeases its god, for instance when the god thunders or its voice booms out."
)

ANSWER_INSTRUCTIONS = (
    "First explain in a few sentences what happens in each moment and how it relates to the goal. "
    "Then finish your reply with a single last line of exactly this form:\n"
    "Answer: 1\n"
    "if the first moment is better, \"Answer: 2\" if the second moment is better, or "
    "\"Answer: none\" only if both moments show something undesirable for the goal."
)

#: The answer-only instructions of ``--answer_mode constrained``: the model replies with the answer line alone,
#: under constrained decoding (:data:`ANSWER_CHOICES`), without explaining first.
DIRECT_ANSWER_INSTRUCTIONS = (
    "Reply with a single line of exactly this form:\n"
    "Answer: 1\n"
    "if the first moment is better, \"Answer: 2\" if the second moment is better, or "
    "\"Answer: none\" only if both moments show something undesirable for the goal."
)

#: The three answer lines, the only replies constrained decoding allows (``--answer_mode``)
ANSWER_CHOICES: tuple[str, ...] = ("Answer: 1", "Answer: 2", "Answer: none")
#: How the answer is asked (``scripts.annotate_pairs --answer_mode``): "release", the paper's reply (reasoning, then
#: the answer line) and one free retry; "constrained_retry", the retry restricted to :data:`ANSWER_CHOICES`;
#: "constrained", the answer line alone (:data:`DIRECT_ANSWER_INSTRUCTIONS`), restricted
ANSWER_MODES: tuple[str, ...] = ("release", "constrained_retry", "constrained")

DEFAULT_TEMPLATE = (
    "Here are two moments from a game of NetHack, each described by the message the game "
    "showed before and after one step and by how the player's status changed.\n\n"
    "Goal: {preference} {god_warning}\n\n"
    "Moment 1:\n{caption_1}\n\n"
    "Moment 2:\n{caption_2}\n\n"
    "{answer_instructions}"
)

RETRY_PROMPT = (
    "Your reply did not end with a line in the required form. Reply now with only that line: "
    "\"Answer: 1\", \"Answer: 2\" or \"Answer: none\"."
)

TEMPLATE_FIELDS: tuple[str, ...] = ("preference", "caption_1", "caption_2")

# The last "answer: X" wins; a few forms models tend to produce are accepted
# (bold markers, quotes, brackets, "Moment 2", "none"/"neither"/"tie"/"null").
_ANSWER_RE = re.compile(
    r"answer\W{0,6}[:=][\s*\"'`(\[{]*(?:moment\s*|option\s*|#)?(1|2|none|neither|tie|null|equal)\b",
    re.IGNORECASE,
)
_CODES = {"1": FIRST, "2": SECOND}


class PromptError(ValueError):
    """A custom prompt template is missing or malformed."""


def parse_answer(text: str | None) -> int:
    """Preference code of a reply: 0 first, 1 second, 2 tie/neither, 3 unknown (no parseable answer)."""
    if not text:
        return UNKNOWN
    matches = _ANSWER_RE.findall(text)
    if not matches:
        return UNKNOWN
    return _CODES.get(matches[-1].lower(), TIE)


@dataclass
class PromptBuilder:
    """Builds annotation conversations for one skill."""

    skill: str
    template: str = DEFAULT_TEMPLATE
    system_prompt: str = SYSTEM_PROMPT
    #: what the prompt asks the reply to hold: reasoning then the answer line (the paper's), or
    #: :data:`DIRECT_ANSWER_INSTRUCTIONS`
    answer_instructions: str = ANSWER_INSTRUCTIONS

    def __post_init__(self) -> None:
        if self.skill not in SKILL_PREFERENCES:
            raise ValueError(f"unknown skill {self.skill!r}; valid skills: {', '.join(SKILLS)}")
        check_template(self.template, "prompt template")
        # Pre-fill everything that does not depend on the pair, once.
        fixed = self.template.replace("{preference}", SKILL_PREFERENCES[self.skill])
        fixed = fixed.replace("{god_warning}", GOD_WARNING).replace("{answer_instructions}", self.answer_instructions)
        head, _, rest = fixed.partition("{caption_1}")
        middle, _, tail = rest.partition("{caption_2}")
        self._parts = (head, middle, tail)
        self._system = {"role": "system", "content": self.system_prompt}

    @property
    def parts(self) -> tuple[str, str, str]:
        """The fixed text around the captions: user prompt = parts[0] + c1 + parts[1] + c2 + parts[2]."""
        return self._parts

    def user_prompt(self, caption_1: str, caption_2: str) -> str:
        head, middle, tail = self._parts
        return head + caption_1 + middle + caption_2 + tail

    def conversation(self, caption_1: str, caption_2: str) -> list[dict[str, str]]:
        return [self._system, {"role": "user", "content": self.user_prompt(caption_1, caption_2)}]

    def parse(self, text: str | None) -> int:
        """Preference code of a reply (:func:`parse_answer`)."""
        return parse_answer(text)

    def retry_conversation(self, conversation: list[dict[str, str]], reply: str) -> list[dict[str, str]]:
        return retry_conversation(conversation, reply)


def retry_conversation(conversation: list[dict[str, str]], reply: str) -> list[dict[str, str]]:
    """The conversation continued with the unparseable reply and the retry prompt."""
    return conversation + [{"role": "assistant", "content": reply}, {"role": "user", "content": RETRY_PROMPT}]


def check_template(template: str, source: str) -> str:
    for name in TEMPLATE_FIELDS:
        placeholder = "{" + name + "}"
        if template.count(placeholder) != 1:
            raise PromptError(f"{source}: must contain {placeholder} exactly once")
    if template.index("{caption_1}") > template.index("{caption_2}"):
        raise PromptError(f"{source}: {{caption_1}} must come before {{caption_2}}")
    return template


def load_template(prompt: str | None) -> str:
    """``None``/``"default"`` gives :data:`DEFAULT_TEMPLATE`; anything else is a path to a
    text file holding a template with ``{preference}``, ``{caption_1}`` and ``{caption_2}``
    (optionally ``{god_warning}`` and ``{answer_instructions}``)."""
    if prompt in (None, "", "default"):
        return DEFAULT_TEMPLATE
    path = Path(prompt)
    if not path.is_file():
        raise PromptError(f"--prompt: {prompt!r} is neither 'default' nor an existing template file")
    return check_template(path.read_text(encoding="utf-8"), f"--prompt {path}")
