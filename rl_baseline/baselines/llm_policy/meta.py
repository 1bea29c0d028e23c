"""The hierarchical LLM policy: the trained skills, with a language model choosing the next skill.

:class:`LLMMetaPolicy` has the interface of :class:`rl_baseline.skills.meta_policy.MetaPolicy`, so
the skill runtime (:class:`rl_baseline.skills.runtime.SkillRuntime`) and the evaluation use it
exactly as they use MaestroMotif's generated policy over skills. Only the choice of the next skill
changes:

* when a skill may start (``preconditions``) and when it ends (``should_terminate``) stay the
  task's shipped skill functions: the guarded module ``{meta_policy_root}/{task}/seed{N}`` answers
  them, and its state hooks still receive every ``update_state``;
* ``next_skill`` -- called at every skill termination, and at the start of an episode
  (``initial_skill`` is None, so the runtime asks) -- asks the language model instead of the
  module's ``perform_task``. The prompt (:func:`rl_baseline.baselines.llm_policy.prompts.skill_conversation`)
  holds MaestroMotif's prior knowledge of the task, the skill that ended, the skills whose start
  condition holds now and the hero's state.

Every skill of the set is offered when its file's start rule holds (:data:`START_RULE_HOLDS`). A reply without a
valid ``Skill:`` line, or naming a skill whose start condition does not hold (the merchant without a shopkeeper in
view, ...), gets the runtime's fallback (:data:`rl_baseline.skills.meta_policy.FALLBACK_SKILL`, the discoverer);
both are counted (``parse_errors``, ``invalid_choices``). ``num_errors`` stays the count of exceptions the
skill functions raised, as for MaestroMotif.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Optional, Sequence

from common.skill_files import START_RULES
from common.vocabulary import SKILL_SPECS, SKILLS
from rl_baseline.baselines.llm_policy.client import EpisodeLLMStats, LLMClient, LLMSettings, shared_client
from rl_baseline.baselines.llm_policy.parse import parse_skill
from rl_baseline.baselines.llm_policy.prompts import skill_conversation
from rl_baseline.baselines.llm_policy.render import DUNGEON_NAMES, HUNGER_NAMES
from rl_baseline.skills.meta_policy import FALLBACK_SKILL, MetaPolicyConfig, load

logger = logging.getLogger(__name__)

HISTORY = 8  # skills shown in the prompt

#: whether a start rule (a skill file's ``[rules] start``) holds, from the task module's two start checks
START_RULE_HOLDS: dict[str, Callable[[bool, bool], bool]] = {
    "always": lambda merchant_ok, worshipper_ok: True,
    "shopkeeper_in_view": lambda merchant_ok, worshipper_ok: merchant_ok,
    "altar_in_view": lambda merchant_ok, worshipper_ok: worshipper_ok,
}
# a start rule missing here would leave its skills never offered
assert set(START_RULE_HOLDS) == set(START_RULES), "the LLM policy checks another set of start rules"


def startable_skills(merchant_ok: bool, worshipper_ok: bool) -> list[str]:
    """The skills whose start rule holds now, in index order."""
    return [s for s in SKILLS if START_RULE_HOLDS[SKILL_SPECS[s].start](merchant_ok, worshipper_ok)]


class LLMMetaPolicy:
    """A policy over skills whose ``next_skill`` asks a language model (module docstring)."""

    def __init__(self, inner: Any, client: LLMClient, task: str) -> None:
        self.inner = inner
        self.client = client
        self.task = task
        self.state: dict[str, Any] = {}
        self.history: list[str] = []
        self.started = False
        self.stats = EpisodeLLMStats()
        self.parse_errors = 0
        self.invalid_choices = 0
        self._logged = 0

    # -- the MetaPolicy interface ------------------------------------------------
    @property
    def num_errors(self) -> int:
        return int(getattr(self.inner, "num_errors", 0))

    @property
    def initial_skill(self) -> Optional[str]:
        return None  # the runtime then asks next_skill: the model chooses the first skill too

    def reset(self) -> None:
        self.inner.reset()
        self.state = {}
        self.history = []
        self.started = False

    def preconditions(self, chars: Any, colors: Any, num_items: int) -> tuple[bool, bool]:
        return self.inner.preconditions(chars, colors, num_items)

    def should_terminate(self, skill: str, skill_time: int, current_depth: int, previous_depth: int,
                         preconditions: Sequence[bool]) -> bool:
        return self.inner.should_terminate(skill, skill_time, current_depth, previous_depth, preconditions)

    def update_state(self, info: Mapping[str, Any]) -> None:
        self.inner.update_state(info)
        self.state = dict(info)

    def next_skill(self, current_skill: str, depth: int, branch_number: int, merchant_ok: bool,
                   worshipper_ok: bool) -> str:
        can_start = startable_skills(merchant_ok, worshipper_ok)
        ended = current_skill if self.started else ""
        conv = skill_conversation(self.task, self._state_text(depth, branch_number), ended, can_start, self.history)
        reply = self.client.ask([conv])[0]
        self.stats.add(reply)
        choice = parse_skill(reply.text, SKILLS)
        if choice is None:
            self.stats.parse_errors += 1
            self.parse_errors += 1
            self._warn("no valid 'Skill:' line in the reply", reply.text)
            choice = FALLBACK_SKILL
        elif choice not in can_start:
            self.stats.invalid_choices += 1
            self.invalid_choices += 1
            self._warn(f"the model chose {choice}, whose start condition does not hold", reply.text)
            choice = FALLBACK_SKILL
        self.started = True
        self.history.append(f"- {choice} (chosen on depth {depth}, {DUNGEON_NAMES.get(branch_number, branch_number)})")
        self.history = self.history[-HISTORY:]
        return choice

    # -- helpers -----------------------------------------------------------------
    def _state_text(self, depth: int, branch_number: int) -> dict[str, Any]:
        s = self.state
        out: dict[str, Any] = {"depth": depth, "in": DUNGEON_NAMES.get(branch_number, f"dungeon {branch_number}")}
        if int(s.get("branch_depth", -2)) > 0:
            out["Gnomish Mines entrance on depth"] = int(s["branch_depth"])
        for key, name in (("hp", "HP"), ("gold", "gold"), ("xp_level", "experience level"), ("time", "turn"),
                          ("kills", "monsters defeated")):
            if key in s:
                out[name] = s[key]
        if "hp" in s and "hpmax" in s:
            out["HP"] = f"{s['hp']}/{s['hpmax']}"
        if "hunger" in s:
            out["hunger"] = HUNGER_NAMES.get(int(s["hunger"]), s["hunger"])
        if s.get("message"):
            out["last message"] = repr(str(s["message"]))
        return out

    def _warn(self, what: str, text: str) -> None:
        if self._logged < 5:
            self._logged += 1
            logger.warning("hierarchical LLM policy: %s (using %s, counted): %r", what, FALLBACK_SKILL, text[-200:])

    def take_episode_stats(self) -> EpisodeLLMStats:
        """The counts since the last call (one episode's, when called as the episode ends)."""
        out, self.stats = self.stats, EpisodeLLMStats()
        return out


def make_llm_meta_policy(task: str, seed: int, root: Optional[str], settings: LLMSettings,
                         config: Optional[MetaPolicyConfig] = None) -> LLMMetaPolicy:
    """The factory the skill environment calls: the task's guarded module for its skill functions,
    the process-wide client for the model (:func:`rl_baseline.baselines.llm_policy.client.shared_client`)."""
    return LLMMetaPolicy(load(task, seed, root, config), shared_client(settings), task)
