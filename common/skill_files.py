"""The designer's skills as data: one TOML file per skill, read here and nowhere else.

A skill file (``skills/descender.toml``; docs/extending.md shows every field) holds the skill's index, its texts
(the annotation prompts' preference, the code-generation prompts' description, start and end), its rules
(chosen from the menus the skill runtime can detect), its reward settings, its measures and the rule-based
stand-in annotator's rules for it. Every table of the project that has one entry per skill is derived from
the loaded :class:`SkillSet` (:mod:`common.vocabulary` exposes the active one).

The skill set is the union of skill files and folders (each folder's ``*.toml``); ``--skills`` on every entry
point chooses it (:func:`activate_from_argv`, called by ``scripts/__init__.py`` before anything else is imported)
and the environment variable :data:`SKILLS_ENV` carries it to the processes a phase starts. The order of the
skills is the files' ``index`` fields, never the files' names: it is the order of the policy's one-hot, of
``--reward_dir`` and of the threshold quantiles.

A bad file is refused before any work: :class:`SkillFileError` names the file and the field, and entry points
exit 2 with that one line.

Pure Python on purpose (``tomllib``): every layer reads it, annotation and code generation without NLE.
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from common.nethack.message_measures import MESSAGE_MEASURES, RATE_MEASURES

#: the folder of the designed skills, at the repository's top level
DEFAULT_SKILLS_DIR = Path(__file__).resolve().parent.parent / "skills"
#: where an entry point leaves the chosen skill set for the processes it starts (os.pathsep-separated paths)
SKILLS_ENV = "MAESTROMOTIF_SKILLS"
FLAG = "--skills"

#: when a skill may start, as the skill runtime detects it (``skill_precondition`` of the policies over skills:
#: a shopkeeper or an altar in the 7x7 window while the hero holds items it did not start with)
START_RULES: tuple[str, ...] = ("always", "shopkeeper_in_view", "altar_in_view")
#: when a skill must end, besides a shopkeeper or an altar coming into view (which ends every skill)
END_RULES: tuple[str, ...] = ("time_budget", "depth_increase", "depth_decrease")

#: the measures :class:`rl_baseline.tasks.skill_measures.SkillMeasures` computes itself, from the map, the levels
#: and the task detectors (it asserts that it computes exactly these); a skill file may name any of them, and
#: :mod:`common.nethack.message_measures` adds the ones counted from the game's messages by one function each
BUILTIN_MEASURES: tuple[str, ...] = (
    "cells_per_1000_steps", "cells_revealed", "new_levels",
    "levels_descended", "depth_increases", "steps_to_first_descent", "down_stairs_known_share",
    "down_stairs_reached", "levels_ascended",
    "shops_entered", "sale_offers", "prices_identified", "items_sold",
    "altars_found", "altar_drops", "buc_identified",
)

#: the rule-based stand-in annotator's named message patterns (rlaif/heuristic.py defines each and asserts that
#: it defines exactly these); a rule may also give literal ``phrases``
STAND_IN_PATTERNS: tuple[str, ...] = (
    "pickup", "kill", "find", "down_stairs", "up_stairs", "busy", "flash", "altar", "drop", "pray",
    "shop_good", "sale", "shop_bad", "fight",
)
#: where a stand-in message rule looks: the current message (lower-cased), or the previous and the current
STAND_IN_WHERE: tuple[str, ...] = ("current", "both")
#: the stand-in's stat terms: per level gone down, per level gone up, per level changed either way, gold
#: gained, experience gained, hit points lost while staying on the level
STAND_IN_STATS: tuple[str, ...] = ("level_down", "level_up", "level_change", "gold_gained", "xp_gained",
                                   "hp_lost_on_level")

_NAME_RE = re.compile(r"^[a-z][a-z0-9]*$")
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve")


class SkillFileError(ValueError):
    """A skill file (or a skill set) that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class MessageRule:
    """The stand-in adds ``score`` when one of ``match`` (named patterns) or ``phrases`` is found ``where``."""

    score: float
    where: str = "current"
    match: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillSpec:
    """One skill, as its file says."""

    name: str
    index: int
    path: str
    # texts
    description: str
    preference: str
    can_start: str
    ends: str
    # rules
    start: str
    end: str
    budget_default: Optional[int]
    # reward settings
    quantile: float
    experiment: str
    paper_pairs: int
    release_label_shares: Optional[tuple[float, float, float, float]]
    # measures
    measures: tuple[str, ...]
    main_measure: str
    progress_measure: str
    # the stand-in annotator
    stand_in_messages: tuple[MessageRule, ...] = ()
    stand_in_stats: dict[str, float] = field(default_factory=dict)
    sha256: str = ""
    #: the authors' release's goal string for the skill, verbatim, where ``preference`` rewords it (a record for
    #: comparison: no prompt uses it)
    release_preference: Optional[str] = None

    @property
    def budget_attribute(self) -> str:
        """The policy-over-skills attribute that holds a time-budget skill's budget in game turns."""
        return f"{self.name}_skill_steps"


# ------------------------------------------------------------------ reading one file
_SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "": {"name": str, "index": int},
    "text": {"description": str, "preference": str, "can_start": str, "ends": str},
    "rules": {"start": str, "end": str},
    "reward": {"quantile": float, "experiment": str, "paper_pairs": int},
    "measures": {"names": list, "main": str, "progress": str},
    "stand_in": {"stats": dict, "message": list},
}
_OPTIONAL: dict[str, dict[str, type | tuple[type, ...]]] = {
    "text": {"release_preference": str},
    "rules": {"budget_default": int},
    "reward": {"release_label_shares": list},
    "stand_in": {"message": list},
}


def _where(path: Path, key: str) -> str:
    return f"{path}: {key}"


def _check_table(path: Path, section: str, table: Any) -> None:
    prefix = f"{section}." if section else ""
    if not isinstance(table, dict):
        raise SkillFileError(f"{path}: [{section}] must be a table")
    known = {**_SCHEMA[section], **_OPTIONAL.get(section, {})}
    for key in table:
        if key in _SCHEMA and not section:
            continue
        if key not in known:
            raise SkillFileError(f"{_where(path, prefix + key)}: unknown field (fields of [{section or 'top'}]: "
                                 f"{', '.join(known)})")
    for key, kind in _SCHEMA[section].items():
        if key not in table and key not in _OPTIONAL.get(section, {}):
            raise SkillFileError(f"{_where(path, prefix + key)}: missing field")
    for key, kind in known.items():
        if key not in table:
            continue
        value = table[key]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise SkillFileError(f"{_where(path, prefix + key)}: expected {kind.__name__}, got {type(value).__name__}")


def _message_rule(path: Path, i: int, raw: Any) -> MessageRule:
    key = f"stand_in.message[{i}]"
    if not isinstance(raw, dict):
        raise SkillFileError(f"{_where(path, key)}: must be a table")
    unknown = set(raw) - {"match", "phrases", "where", "score"}
    if unknown:
        raise SkillFileError(f"{_where(path, key + '.' + sorted(unknown)[0])}: unknown field "
                             "(fields: match, phrases, where, score)")
    if "score" not in raw or not isinstance(raw["score"], (int, float)) or isinstance(raw["score"], bool):
        raise SkillFileError(f"{_where(path, key + '.score')}: missing or not a number")
    where = raw.get("where", "current")
    if where not in STAND_IN_WHERE:
        raise SkillFileError(f"{_where(path, key + '.where')}: {where!r} is not one of {', '.join(STAND_IN_WHERE)}")
    match = raw.get("match", [])
    phrases = raw.get("phrases", [])
    if not isinstance(match, list) or not all(isinstance(m, str) for m in match):
        raise SkillFileError(f"{_where(path, key + '.match')}: expected a list of pattern names")
    if not isinstance(phrases, list) or not all(isinstance(p, str) and p for p in phrases):
        raise SkillFileError(f"{_where(path, key + '.phrases')}: expected a list of non-empty strings")
    for m in match:
        if m not in STAND_IN_PATTERNS:
            raise SkillFileError(f"{_where(path, key + '.match')}: {m!r} is not one of the stand-in's patterns "
                                 f"({', '.join(STAND_IN_PATTERNS)}); give literal phrases instead")
    if not match and not phrases:
        raise SkillFileError(f"{_where(path, key)}: needs match or phrases")
    return MessageRule(score=float(raw["score"]), where=where, match=tuple(match),
                       phrases=tuple(p.lower() for p in phrases))


def known_measures() -> tuple[str, ...]:
    """Every measure a skill file may name: the map measures and the message measures (with their rates)."""
    return BUILTIN_MEASURES + tuple(MESSAGE_MEASURES) + tuple(RATE_MEASURES)


def read_skill_file(path: str | Path) -> SkillSpec:
    """One skill file, checked field by field (:class:`SkillFileError` names the file and the field)."""
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as e:
        raise SkillFileError(f"{path}: cannot read the skill file ({e.strerror or e})") from None
    try:
        data = tomllib.loads(raw_bytes.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SkillFileError(f"{path}: not a valid TOML file ({e})") from None
    _check_table(path, "", data)
    for section in ("text", "rules", "reward", "measures", "stand_in"):
        if section not in data:
            raise SkillFileError(f"{_where(path, section)}: missing table [{section}]")
        _check_table(path, section, data[section])
    name, index = data["name"], data["index"]
    if not _NAME_RE.match(name):
        raise SkillFileError(f"{_where(path, 'name')}: {name!r} must be lower-case letters and digits, "
                             "starting with a letter")
    if index < 0:
        raise SkillFileError(f"{_where(path, 'index')}: {index} must be 0 or more")
    text, rules, reward, measures, stand_in = (data[s] for s in ("text", "rules", "reward", "measures", "stand_in"))
    for key in ("description", "preference", "can_start", "ends"):
        if not text[key].strip():
            raise SkillFileError(f"{_where(path, 'text.' + key)}: empty")
    if rules["start"] not in START_RULES:
        raise SkillFileError(f"{_where(path, 'rules.start')}: {rules['start']!r} is not one of the start rules the "
                             f"runtime detects ({', '.join(START_RULES)})")
    if rules["end"] not in END_RULES:
        raise SkillFileError(f"{_where(path, 'rules.end')}: {rules['end']!r} is not one of the end rules the "
                             f"runtime detects ({', '.join(END_RULES)})")
    budget = rules.get("budget_default")
    if budget is not None and (rules["end"] != "time_budget" or budget <= 0):
        raise SkillFileError(f"{_where(path, 'rules.budget_default')}: only a time_budget skill has one, and it "
                             "must be above 0")
    quantile = float(reward["quantile"])
    if not 0.0 < quantile < 1.0:
        raise SkillFileError(f"{_where(path, 'reward.quantile')}: {quantile} must lie strictly between 0 and 1")
    if reward["paper_pairs"] <= 0:
        raise SkillFileError(f"{_where(path, 'reward.paper_pairs')}: must be above 0")
    if not reward["experiment"] or name not in reward["experiment"].split("_"):
        raise SkillFileError(f"{_where(path, 'reward.experiment')}: {reward['experiment']!r} must contain the "
                             f"skill's name as a '_'-separated part (llama3_{name}_default)")
    shares = reward.get("release_label_shares")
    if shares is not None and (len(shares) != 4 or not all(isinstance(x, (int, float)) for x in shares)):
        raise SkillFileError(f"{_where(path, 'reward.release_label_shares')}: four numbers (first, second, tie, "
                             "unknown)")
    names = measures["names"]
    known = known_measures()
    if not names or not all(isinstance(m, str) for m in names) or len(set(names)) != len(names):
        raise SkillFileError(f"{_where(path, 'measures.names')}: a non-empty list of distinct measure names")
    for m in names:
        if m not in known:
            raise SkillFileError(f"{_where(path, 'measures.names')}: no measure {m!r} exists (the measures: "
                                 f"{', '.join(known)}; a new one is one function in "
                                 "common/nethack/message_measures.py)")
    for key in ("main", "progress"):
        value = measures[key]
        if value not in known:
            raise SkillFileError(f"{_where(path, 'measures.' + key)}: no measure {value!r} exists")
        if value not in names:
            raise SkillFileError(f"{_where(path, 'measures.' + key)}: {value!r} is not in measures.names")
    stats = stand_in["stats"]
    for key, value in stats.items():
        if key not in STAND_IN_STATS:
            raise SkillFileError(f"{_where(path, 'stand_in.stats.' + key)}: unknown field (the stat terms: "
                                 f"{', '.join(STAND_IN_STATS)})")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SkillFileError(f"{_where(path, 'stand_in.stats.' + key)}: not a number")
    rules_in = stand_in.get("message", [])
    return SkillSpec(
        name=name, index=index, path=str(path),
        description=text["description"], preference=text["preference"],
        can_start=text["can_start"], ends=text["ends"],
        start=rules["start"], end=rules["end"], budget_default=budget,
        quantile=quantile, experiment=reward["experiment"], paper_pairs=reward["paper_pairs"],
        release_label_shares=tuple(float(x) for x in shares) if shares is not None else None,
        measures=tuple(names), main_measure=measures["main"], progress_measure=measures["progress"],
        stand_in_messages=tuple(_message_rule(path, i, r) for i, r in enumerate(rules_in)),
        stand_in_stats={k: float(v) for k, v in stats.items()},
        sha256=hashlib.sha256(raw_bytes).hexdigest(),
        release_preference=text.get("release_preference"),
    )


# ------------------------------------------------------------------ the set
@dataclass(frozen=True)
class SkillSet:
    """The skills of a run, in index order."""

    specs: tuple[SkillSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def __getitem__(self, name: str) -> SkillSpec:
        for s in self.specs:
            if s.name == name:
                return s
        raise KeyError(name)

    def record(self) -> list[dict[str, Any]]:
        """What a run's config keeps of its skill set: each skill's name, index and file hash."""
        return [{"name": s.name, "index": s.index, "sha256": s.sha256} for s in self.specs]

    @property
    def number_word(self) -> str:
        """The number of skills in words, as the code-generation prompts say it ("five")."""
        n = len(self.specs)
        return _NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else str(n)


def _expand(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(p.glob("*.toml"))  # sorted only to read them in a fixed order: the index decides
            if not found:
                raise SkillFileError(f"{p}: a skills folder with no *.toml skill file")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise SkillFileError(f"{p}: no such skill file or folder ({FLAG})")
    seen: set[Path] = set()
    unique = []
    for f in files:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(f)
    return unique


def load_skill_set(paths: Iterable[str | Path] = (DEFAULT_SKILLS_DIR,)) -> SkillSet:
    """The union of skill files and folders, checked: distinct names and indexes, no gap from 0."""
    specs = [read_skill_file(f) for f in _expand(paths)]
    if not specs:
        raise SkillFileError(f"no skill files in {', '.join(str(p) for p in paths)}")
    by_name: dict[str, SkillSpec] = {}
    by_index: dict[int, SkillSpec] = {}
    for s in specs:
        if s.name in by_name:
            raise SkillFileError(f"{s.path}: name: {s.name!r} is also the name in {by_name[s.name].path}")
        if s.index in by_index:
            raise SkillFileError(f"{s.path}: index: {s.index} is also the index of {by_index[s.index].name!r} "
                                 f"({by_index[s.index].path})")
        by_name[s.name] = s
        by_index[s.index] = s
    for i in range(len(specs)):
        if i not in by_index:
            last = max(by_index)
            raise SkillFileError(f"{by_index[last].path}: index: {last} leaves a gap (no skill has index {i}; the "
                                 f"indexes must run 0 to {len(specs) - 1})")
    if not any(s.start == "always" for s in specs):
        raise SkillFileError(f"{by_index[0].path}: rules.start: no skill of the set may always start (start = "
                             "\"always\"): a policy over skills falls back on one when nothing else can start")
    return SkillSet(tuple(by_index[i] for i in range(len(specs))))


# ------------------------------------------------------------------ the active set and --skills
def split_skills_value(value: str) -> list[str]:
    """``--skills`` takes files and folders, separated by commas or given as several words."""
    return [p for p in re.split(r"[,\s]+", value.strip()) if p]


def skills_from_argv(argv: list[str]) -> Optional[list[str]]:
    """The paths given to ``--skills`` in ``argv`` (``--skills A B``, ``--skills A,B`` or ``--skills=A``)."""
    out: Optional[list[str]] = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == FLAG:
            out = []
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                out.extend(split_skills_value(argv[i]))
                i += 1
            continue
        if arg.startswith(FLAG + "="):
            out = split_skills_value(arg.split("=", 1)[1])
        i += 1
    return out


def activate(paths: list[str]) -> SkillSet:
    """Makes ``paths`` the skill set of this process and of the processes it starts (checked first)."""
    skill_set = load_skill_set(paths)
    os.environ[SKILLS_ENV] = os.pathsep.join(str(Path(p).resolve()) for p in paths)
    return skill_set


def activate_from_argv(argv: Optional[list[str]] = None) -> None:
    """Reads ``--skills`` before any module reads :mod:`common.vocabulary`; a bad file exits 2 with one line."""
    paths = skills_from_argv(list(sys.argv[1:] if argv is None else argv))
    try:
        if paths is not None:
            if not paths:
                raise SkillFileError(f"{FLAG}: give at least one skill file or folder")
            activate(paths)
        else:
            active_skill_set()
    except SkillFileError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def active_paths() -> list[str]:
    value = os.environ.get(SKILLS_ENV, "")
    return [p for p in value.split(os.pathsep) if p] or [str(DEFAULT_SKILLS_DIR)]


_ACTIVE: dict[str, SkillSet] = {}


def active_skill_set() -> SkillSet:
    """The skill set of this process: :data:`SKILLS_ENV`'s paths, else the designed five in ``skills/``."""
    key = os.environ.get(SKILLS_ENV, "")
    if key not in _ACTIVE:
        _ACTIVE[key] = load_skill_set(active_paths())
    return _ACTIVE[key]


def add_skills_flag(parser: Any) -> None:
    """``--skills`` for an entry point's parser (the value is read earlier, by :func:`activate_from_argv`)."""
    parser.add_argument(FLAG, nargs="+", default=[str(DEFAULT_SKILLS_DIR)], metavar="FILE_OR_FOLDER",
                        help="the skill set: skill files (.toml) and folders of them, their union (default: the "
                             "five designed skills in skills/); recorded in a run's config, and a run refuses to "
                             "resume or evaluate with another set")


def check_same_skill_set(recorded: Optional[list[dict[str, Any]]], current: SkillSet, where: str) -> None:
    """Refuses a run folder whose recorded skill set differs from this process's (names both)."""
    if recorded is None:
        if current.names != DESIGNED_SKILLS:
            raise SkillFileError(f"{where}: records no skill set (it was made with the designed five: "
                                 f"{', '.join(DESIGNED_SKILLS)}), and this run's skill set is "
                                 f"{', '.join(current.names)}; pass {FLAG} skills/")
        return
    names = tuple(r["name"] for r in sorted(recorded, key=lambda r: r["index"]))
    if names != current.names:
        raise SkillFileError(f"{where}: made with the skills {', '.join(names)}; this run's skill set is "
                             f"{', '.join(current.names)} ({FLAG} chooses it)")


#: the paper's five skills, in their index order: the skill set of every run made before skill files existed
DESIGNED_SKILLS: tuple[str, ...] = ("discoverer", "descender", "ascender", "worshipper", "merchant")
