"""The authors' evaluation protocol ("release"), next to this project's own task definitions.

This module states what the MaestroMotif release measures when it is started with
``--evaluation True --eval_target <task>`` and re-expresses it on top of what our environment
reports. :mod:`rl_baseline.tasks.detectors` keeps the project's own success definitions
("project": the Oracle seen for Delphi, town features for Minetown, identifying offers for
price, altar flashes for BUC, interaction episodes played to the end); evaluation computes
both on every episode (:mod:`rl_baseline.evaluation`).

What the release does (read from its ``rl_baseline/monk_tasks_nle.py``,
``rl_baseline/obs_wrappers.py``, ``sample_factory/algorithms/appo/{appo,learner,
actor_worker,policy_worker}.py`` and its README; summarised, not quoted)
==========================================================================================

**The run.** Evaluation is the training run itself with learning switched off: the README's
command starts APPO with 24 workers x 20 environments (480 games at once) and
``--stats_avg 1000`` from the shipped checkpoint; the learner still receives batches but
skips the backward pass and the optimiser step. Actions are sampled from the policy (not
argmax). Every finished episode pushes its last ``info`` values into per-key queues holding
the ``stats_avg`` most recent values. Every report (about every 5 s) the mean of the metric's
queue is appended to ``{experiment}/{task}_eval_stats_seed{code_seed}.csv``; once the policy
workers have served more than 3,000,000 samples (env steps; written in the code as 2M
"warm-up" + 1M) the process exits. The result is the last row: the mean over the (at most)
1000 episodes that finished last; games still running at the stop are never counted. The
step count is only looked at in that report loop, so the release runs a little past 3M.

**The metric.** ``reached`` (0/1), averaged over the window, except that the report code
switches to ``num_buc`` when the target name contains "altar" and to ``num_sold`` when it
contains "shop" (and prints ``num_price_id`` for "priceid"). The README's names for those
tasks are ``buc``, ``transactions`` and ``price``, which contain none of these words, so the
release as published writes the ``reached`` rate for them too. We report the count (the
paper's tables give counts for these tasks) and the ``reached`` rate next to it.
Counts are averaged only over episodes that *saw* a shop (``num_sold``, ``num_price_id``,
``num_sell``: ``shop_seen``) or an altar (``num_buc``: ``altar_seen``); "seen" means the
merchant / worshipper initiation condition (shopkeeper or altar of the expected colour in
the 7x7 window around the hero, while holding an item that was not in the starting kit)
held on some step. The release removes an unseen episode by appending its value and popping
it again; when the queue is already full the append has pushed out the oldest value, so the
window can hold fewer than ``stats_avg`` values. :func:`release_window` reproduces exactly
that queue.

**When ``reached`` is set (per env step, evaluation mode).** A step *checks* when the task's
prerequisite already held before the step, the game did not end on this step, and the
step's message contains ``"You descend the stairs."`` (NetHack 3.6 prints it for every
ordinary walk down a staircase; the release keeps it across ``--More--``; falling down the
stairs, trap doors, holes and level teleports do not print it) -- or on every step for
goldenexit and levelupsell. A checking step types ``#overview`` and searches the task's
strings in the 24x80 terminal while the overview is open (one screen row at a time, first
page only). ``reached`` ends the episode. The rule per task:

==================  ===========================================================================
gnomish             ``"Gnomish Mines"`` in the overview: the Mines were entered (their dungeon
                    header) or the branch staircase is listed under its Dungeons level.
delphi              ``"Level 7"``: a ``Level 7:`` line, i.e. depth 7 was reached in some branch
                    (the current level is always listed) -- "the average depth of Delphi";
                    meeting the Oracle plays no part.
minetown            ``"The Gnomish Mines: levels 2 to 4"``, ``"... 3 to 5"`` or ``"... 4 to 6"``:
                    the Mines header shows the third Mines level as the deepest reached. With
                    the Mines entrance on DL 2-4 the Mines start at DL 3-5, so the first string
                    cannot occur and games whose Mines start at DL 5 cannot succeed.
discoveryhunger     prerequisite: ate (the eat prompt was answered) while in the Gnomish Mines
                    (dungeon number 2); no hunger condition. Then ``"Level 7"`` as delphi.
goldenexit          prerequisite: at least 25 steps whose message contains "kill" or "destroy",
                    gold (the previous step's value) >= 20, deepest depth >= 3. Then every step
                    checks for ``"climb"``: in evaluation the release leaves the question
                    "Beware, there will be no return!  Still climb? [yn]" open for this task,
                    the ``#overview`` keys fall into it (the last Return answers the default
                    "n") and the question stays on the top line -- so ``reached`` means the
                    agent tried to leave the dungeon by the up stairs of level 1.
levelupsell         prerequisite: a step whose message contains "sold". Then every later step
                    that does not end the game adds one; ``reached`` on the 301st. Neither the
                    experience level nor staying on dungeon level 1 is checked.
transactions,       no strings: the prerequisite holds from the start, so the first checking
price, buc          step sets ``reached`` -- these episodes END AT THE FIRST STAIR DESCENT.
                    The counts come from the wrapper's bookkeeping up to then: ``num_sold`` +1
                    per step whose message contains "sold"; ``num_price_id`` +1 when such a
                    step directly follows a step whose message contains "Sell" (the offer) and
                    whose offered price x 2 is a base price of the item's class, the class being
                    read from the offer's words; ``num_buc`` +1 per drop step whose message
                    mentions "altar" and neither "cursed" nor "blessed".
==================  ===========================================================================

The prerequisites and counts are updated after the step's check, so the step that meets a
prerequisite cannot also check. The bookkeeping ran only with ``--llm_reward > 0`` (always
so in the release's commands).

How the same facts are read from our environment
================================================

* Messages: all messages of the step (``info["messages"]``, also those dismissed with
  ``--More--``), where the release saw the step's last message (plus the kept descent
  message). At most one count per step, as in the release.
* ``#overview``: :class:`rl_baseline.envs.monk_env.NetHackScoreMonk` re-reads the dungeon
  overview without game time whenever the level changes and passes it as
  ``info["overview"]``; a stair descent changes the level, so on the checking step that text
  is what the release's screen showed (all pages instead of the first). The strings are
  searched line by line (:func:`rl_baseline.envs.overview.overview_has_text`).
* goldenexit's "climb": as in the release, the goldenexit evaluation's environment leaves the exit
  question open for the agent (``exit_question_to_agent``), so it is on screen at the end of the
  step and in ``info["messages"]``; it is recognised with
  :func:`rl_baseline.tasks.detectors.is_leave_dungeon_prompt`. Before the prerequisite, the agent's
  ``y`` leaves the dungeon and ends the episode, unreached.
* ``#overview`` every step (goldenexit, levelupsell): the release types ``#overview`` and Return on every
  checking step of these two tasks, also when the agent's last key left a question or a ``--More--``
  open, where those keys answer it (Return takes a question's default: "Sell it? [ynaq] (y)" sells). We
  read the overview without keys (a deviation, named in docs/fidelity.md) and count the checking steps
  that end with a prompt open (``info["prompt_open"]``): the episodes where the release's keys would have
  answered a prompt (``overview_keys_into_prompt``).
* "game ended on this step": ``info["end_status"]`` is NLE's DEATH (the step limit ends the
  episode after the check, as in the release).
* Gold: ``info["gold"]`` of the step (the release used the previous step's value). Eating:
  ``info["just_eaten"]`` (the agent picked food at the inventory prompt, as the release counts it) with
  ``info["dungeon_number"] == 2``.
* Shop/altar seen: the skill runtime's initiation conditions after the step (the same 7x7
  window rule), handed over by evaluation as ``info["skill_preconditions"]``
  ``(worshipper, merchant)``.
* The drop action: the action name ``"drop"``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from common.nethack.blstats import DNUM_GNOMISH_MINES
from common.nethack.prices import PRICE_TABLES
from common.vocabulary import EVAL_TASKS, TASK_MEASURE
from rl_baseline.envs.overview import overview_has_text
from rl_baseline.tasks.detectors import is_death, is_leave_dungeon_prompt, step_messages

__all__ = [
    "RELEASE_ENV_STEPS",
    "RELEASE_NUM_ENVS",
    "RELEASE_STATS_AVG",
    "DESCEND_MESSAGE",
    "ReleaseRule",
    "RELEASE_RULES",
    "ReleaseTracker",
    "make_release_tracker",
    "release_price_identified",
    "release_window",
    "PROTOCOLS",
]

#: the release's evaluation length: more than 2M + 1M samples served by the policy workers
RELEASE_ENV_STEPS = 3_000_000
#: 24 rollout workers x 20 environments each (the README's evaluation command)
RELEASE_NUM_ENVS = 24 * 20
#: ``--stats_avg 1000`` of the README's command: the window of finished episodes
RELEASE_STATS_AVG = 1000
#: NetHack 3.6's message for an ordinary walk down a staircase (``flags.verbose``)
DESCEND_MESSAGE = "You descend the stairs."

#: evaluation protocols: which rule set ends the episodes and how many are run
PROTOCOLS = ("release", "project")

MINETOWN_STRINGS = (
    "The Gnomish Mines: levels 2 to 4",
    "The Gnomish Mines: levels 3 to 5",
    "The Gnomish Mines: levels 4 to 6",
)
#: base prices per price-table class (the release's table lists the same values)
CLASS_BASE_PRICES: dict[str, frozenset[int]] = {c: frozenset(t.values()) for c, t in PRICE_TABLES.items()}


@dataclass(frozen=True)
class ReleaseRule:
    """One task's rule in the release (see the module docstring's table)."""

    task: str
    #: strings searched in the overview on a checking step (any one suffices)
    overview_strings: tuple[str, ...] = ()
    #: goldenexit: the "Still climb?" question seen on a checking step
    exit_question: bool = False
    #: every step checks (goldenexit, levelupsell), not only stair descents
    every_step: bool = False
    #: the first checking step reaches (interaction tasks: the first stair descent)
    reached_at_first_check: bool = False
    #: None (holds from the start), "ate_in_mines", "kills_gold_depth" or "sold"
    prerequisite: Optional[str] = None
    #: levelupsell: checking steps to survive after the prerequisite
    survive_steps: int = 0
    #: the count averaged for interaction tasks (None: the ``reached`` rate)
    count_key: Optional[str] = None
    #: episodes enter the count's window only when this was seen ("shop_seen" / "altar_seen")
    seen_key: Optional[str] = None
    summary: str = ""

    @property
    def metric(self) -> str:
        return self.count_key or "reached"


RELEASE_RULES: dict[str, ReleaseRule] = {
    "gnomish": ReleaseRule(
        "gnomish", overview_strings=("Gnomish Mines",),
        summary="on a stair descent the overview mentions 'Gnomish Mines'"),
    "delphi": ReleaseRule(
        "delphi", overview_strings=("Level 7",),
        summary="on a stair descent the overview lists 'Level 7' (depth 7 reached)"),
    "minetown": ReleaseRule(
        "minetown", overview_strings=MINETOWN_STRINGS,
        summary="on a stair descent the Mines header reads 'levels 2 to 4', '3 to 5' or '4 to 6'"),
    "transactions": ReleaseRule(
        "transactions", reached_at_first_check=True, count_key="num_sold", seen_key="shop_seen",
        summary="episode ends at the first stair descent; count = steps with 'sold', over shop-seen episodes"),
    "price": ReleaseRule(
        "price", reached_at_first_check=True, count_key="num_price_id", seen_key="shop_seen",
        summary="episode ends at the first stair descent; count = sales right after an offer whose "
                "price x 2 is a base price of the class, over shop-seen episodes"),
    "buc": ReleaseRule(
        "buc", reached_at_first_check=True, count_key="num_buc", seen_key="altar_seen",
        summary="episode ends at the first stair descent; count = drops with an 'altar' message naming "
                "neither cursed nor blessed, over altar-seen episodes"),
    "goldenexit": ReleaseRule(
        "goldenexit", exit_question=True, every_step=True, prerequisite="kills_gold_depth",
        summary="after 25 kill messages, gold >= 20 and depth 3 reached: the 'Still climb?' question "
                "on level 1"),
    "levelupsell": ReleaseRule(
        "levelupsell", every_step=True, prerequisite="sold", survive_steps=300,
        summary="a 'sold' message, then 300 more steps without the game ending (reached on the 301st)"),
    "discoveryhunger": ReleaseRule(
        "discoveryhunger", overview_strings=("Level 7",), prerequisite="ate_in_mines",
        summary="ate in the Gnomish Mines, then a stair descent with 'Level 7' in the overview"),
}
assert set(RELEASE_RULES) == set(EVAL_TASKS), "every eval target needs a release rule"
assert all((r.count_key is not None) == (TASK_MEASURE[t] == "count") for t, r in RELEASE_RULES.items())

KILLS, GOLD, DEPTH = 25, 20, 3  # goldenexit prerequisite


def release_price_identified(message: str) -> bool:
    """The release's test of a shopkeeper's sell offer (``... offers N gold pieces for your
    X.  Sell it? ...``): True when ``2 * N`` is a base price of X's class.

    The class is read from the words as the release did: when "scroll" occurs anywhere, the
    word after "your"; otherwise the word just before "Sell", without its full stop. Only
    the class names potion, scroll, ring, wand, cloak, boots and helmet are recognised, so
    e.g. "potion of healing" (last word "healing"), "tattered cape" or plural offers never
    count, and whether the type was already known is not checked.
    """
    words = (message or "").split()
    if "gold" not in words:
        return False
    at = words.index("gold")
    try:
        price = int(words[at - 1])
    except (ValueError, IndexError):
        return False
    if "scroll" in message:
        if "your" not in words or words.index("your") + 1 >= len(words):
            return False
        cls = words[words.index("your") + 1]
    else:
        if "Sell" not in words or words.index("Sell") == 0:
            return False
        cls = words[words.index("Sell") - 1].replace(".", "")
    prices = CLASS_BASE_PRICES.get(cls)
    return prices is not None and price * 2 in prices


def _any(msgs: Iterable[str], *needles: str) -> bool:
    return any(n in m for m in msgs for n in needles)


class ReleaseTracker:
    """Per-episode state of the release's rule for one task (interface of
    :class:`rl_baseline.tasks.detectors.TaskTracker`: ``reset(info)``, ``update(info,
    action_name)``, ``done``, ``value``, ``success``, ``count``).

    Once ``reached`` is set the tracker stops changing: the release ended the episode there,
    so when another protocol lets the episode go on, the release's numbers stay those of
    that step.
    """

    def __init__(self, task: str) -> None:
        if task not in RELEASE_RULES:
            raise ValueError(f"unknown eval task {task!r}; valid tasks: {', '.join(EVAL_TASKS)}")
        self.task = task
        self.rule = RELEASE_RULES[task]
        self.measure = TASK_MEASURE[task]
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self, info: Optional[dict] = None) -> None:
        self.reached = False
        self.prerequisite_met = self.rule.prerequisite is None
        self.counts: dict[str, int] = {"num_buc": 0, "num_sold": 0, "num_price_id": 0, "num_sell": 0}
        self.altar_seen = False
        self.shop_seen = False
        self.kills = 0
        self.gold = 0
        self.max_depth = 1  # the deepest dungeon level of the episode (goldenexit's prerequisite reads it)
        self.entered_mines = False
        self.descents = 0
        self.ate_in_mines = False
        self.survived = 0
        self.steps = 0
        self.checks = 0  # checking steps (descents, or every step for goldenexit/levelupsell)
        # steps that end with a question, a text prompt or a --More-- open; and of those, the checking steps of
        # goldenexit and levelupsell, where the release types "#overview" and Return into the open prompt
        self.prompt_open_steps = 0
        self.overview_keys_into_prompt = 0
        self._offer_identified = False

    @property
    def success(self) -> bool:
        return self.reached

    @property
    def count(self) -> int:
        return self.counts[self.rule.count_key] if self.rule.count_key else 0

    @property
    def seen(self) -> Optional[bool]:
        """Whether the episode enters the count's window (None: no such filter)."""
        if self.rule.seen_key == "shop_seen":
            return self.shop_seen
        if self.rule.seen_key == "altar_seen":
            return self.altar_seen
        return None

    @property
    def value(self) -> float:
        return float(self.count) if self.rule.count_key else float(self.reached)

    @property
    def done(self) -> bool:
        """The release ends the episode (``reached``)."""
        return self.reached

    # ------------------------------------------------------------------ per step
    def update(self, info: dict, action_name: Optional[str] = None) -> None:
        if self.reached:
            return
        self.steps += 1
        msgs = step_messages(info)
        descended = _any(msgs, DESCEND_MESSAGE)  # read once: the check and the bookkeeping both need it
        self._check(info, msgs, descended)
        self._bookkeeping(info, msgs, action_name, descended)

    def _check(self, info: dict, msgs: list[str], descended: bool) -> None:
        rule = self.rule
        if not self.prerequisite_met or is_death(info):
            return
        if not (rule.every_step or descended):
            return
        self.checks += 1
        if rule.every_step and info.get("prompt_open"):
            self.overview_keys_into_prompt += 1
        if rule.reached_at_first_check:
            self.reached = True
        overview = info.get("overview") or ""
        if any(overview_has_text(overview, s) for s in rule.overview_strings):
            self.reached = True
        if rule.exit_question and any(is_leave_dungeon_prompt(m) for m in msgs):
            self.reached = True
        if rule.survive_steps:
            self.survived += 1
            if self.survived > rule.survive_steps:
                self.reached = True

    def _bookkeeping(self, info: dict, msgs: list[str], action_name: Optional[str], descended: bool) -> None:
        rule = self.rule
        self.prompt_open_steps += bool(info.get("prompt_open"))
        # where the episode got to, for every task: why a navigation task was (not) reached
        if info.get("depth") is not None:
            self.max_depth = max(self.max_depth, int(info["depth"]))
        if int(info.get("dungeon_number", -1)) == DNUM_GNOMISH_MINES:
            self.entered_mines = True
        if descended:
            self.descents += 1
        if rule.prerequisite == "ate_in_mines":
            if info.get("just_eaten") and int(info.get("dungeon_number", -1)) == DNUM_GNOMISH_MINES:
                self.ate_in_mines = True
                self.prerequisite_met = True
        elif rule.prerequisite == "kills_gold_depth":
            self.gold = int(info.get("gold") or 0)
            if _any(msgs, "kill", "destroy"):
                self.kills += 1
            if self.kills >= KILLS and self.gold >= GOLD and self.max_depth >= DEPTH:
                self.prerequisite_met = True
        pre = info.get("skill_preconditions")
        if pre is not None:
            worshipper, merchant = bool(pre[0]), bool(pre[1])
            self.altar_seen |= worshipper
            self.shop_seen |= merchant
        if action_name == "drop" and any(
            "altar" in m and "cursed" not in m and "blessed" not in m for m in msgs
        ):
            self.counts["num_buc"] += 1
        if _any(msgs, "sold"):
            if self._offer_identified:
                self.counts["num_price_id"] += 1
                self._offer_identified = False
            self.counts["num_sold"] += 1
            if rule.prerequisite == "sold":
                self.prerequisite_met = True
        offer = next((m for m in msgs if "Sell" in m), None)
        if offer is not None:
            self._offer_identified = release_price_identified(offer)
            self.counts["num_sell"] += 1
        else:
            self._offer_identified = False

    def episode_record(self) -> dict[str, Any]:
        """What the release's statistics read from the episode's last step."""
        return {
            "reached": bool(self.reached),
            "count": self.count if self.rule.count_key else None,
            "seen": self.seen,
            "counts": dict(self.counts),
            "altar_seen": bool(self.altar_seen),
            "shop_seen": bool(self.shop_seen),
            "prerequisite_met": bool(self.prerequisite_met),
            "max_depth": int(self.max_depth),
            "entered_mines": bool(self.entered_mines),
            "descents": int(self.descents),
            "steps": int(self.steps),
            "prompt_open_steps": int(self.prompt_open_steps),
            "overview_keys_into_prompt": int(self.overview_keys_into_prompt),
        }

    def __repr__(self) -> str:
        return f"ReleaseTracker({self.task}, reached={self.reached}, counts={self.counts})"


def make_release_tracker(task: str) -> ReleaseTracker:
    """A fresh release-rule tracker for eval target ``task``."""
    return ReleaseTracker(task)


@dataclass
class ReleaseWindow:
    """The release's statistics over the last finished episodes."""

    metric: str
    stats_avg: int
    finished: int
    #: values in the metric's queue (oldest first)
    values: list[float] = field(default_factory=list)
    #: ``reached`` of the last ``stats_avg`` finished episodes
    reached: list[float] = field(default_factory=list)
    #: indices (into the finished episodes) whose value is in ``values``
    indices: list[int] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return float(sum(self.values) / len(self.values)) if self.values else float("nan")

    @property
    def reached_rate(self) -> float:
        return float(sum(self.reached) / len(self.reached)) if self.reached else float("nan")


def release_window(task: str, episodes: Sequence[dict], stats_avg: int = RELEASE_STATS_AVG) -> ReleaseWindow:
    """Replays the release's statistics queues over ``episodes`` (finished episodes in the
    order they finished, each an :meth:`ReleaseTracker.episode_record`).

    ``reached`` goes into a queue of length ``stats_avg``. For interaction tasks the count
    goes into its own queue of that length, and an episode that did not see a shop/altar is
    taken out again by appending and popping -- which, on a full queue, also drops the
    oldest value (the release's behaviour).
    """
    if int(stats_avg) < 1:
        raise ValueError(f"stats_avg must be at least 1, got {stats_avg}")
    rule = RELEASE_RULES[task]
    n = int(stats_avg)
    reached: deque = deque(maxlen=n)
    values: deque = deque(maxlen=n)
    for i, ep in enumerate(episodes):
        reached.append(float(bool(ep["reached"])))
        if rule.count_key is None:
            values.append((i, float(bool(ep["reached"]))))
            continue
        values.append((i, float(ep["counts"][rule.count_key])))
        if not ep.get(rule.seen_key, ep.get("seen")):
            values.pop()
    return ReleaseWindow(
        metric=rule.metric, stats_avg=n, finished=len(episodes),
        values=[v for _, v in values], reached=list(reached), indices=[i for i, _ in values],
    )
