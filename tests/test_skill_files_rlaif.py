"""The annotation layer reads its per-skill tables from the skill files (``skills/*.toml``) and does exactly what it
did when they were written in code (commit 3f94365):

* every annotation prompt built for a designed skill (this project's layout with both answer instructions and the
  retry, Motif's layout in both versions with the retry, the equivalent-prompting context of each task) is
  byte-identical to what that code built;
* the rule-based stand-in's replies (the full text and the parsed label) on 360 caption pairs per skill, and its
  replies on 300 pairs of Motif descriptions per goal key (skills, tasks, Motif's goals), are byte-identical;
* the release's label shares are the same numbers;
* a sixth skill given only as a file is scored by its own ``[stand_in]`` rules (named patterns, phrases, both
  places, stat terms), directly and in a process that chose it with ``MAESTROMOTIF_SKILLS``;
* the stand-in defines exactly the named patterns and stat terms a file may name.

The expected hashes were computed once by importing this file in a checkout of commit 3f94365 (with
``common.skill_files``, which that commit lacks, stubbed) and calling :func:`prompt_hashes` and
:func:`reply_hashes` there.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.nethack import blstats as B
from common.skill_files import (
    DEFAULT_SKILLS_DIR,
    DESIGNED_SKILLS,
    SKILLS_ENV,
    STAND_IN_PATTERNS,
    STAND_IN_STATS,
    load_skill_set,
)
from common.vocabulary import EVAL_TASKS, SKILL_SPECS
from rlaif import heuristic
from rlaif.captions import caption_from_values, motif_description
from rlaif.motif_prompts import MOTIF_GOAL_KEYS, PROMPT_VERSIONS, MotifPromptBuilder, equivalent_context, goal_sentence
from rlaif.preferences import RELEASE_LABEL_SHARES
from rlaif.prompts import DIRECT_ANSWER_INSTRUCTIONS, SYSTEM_PROMPT, PromptBuilder, parse_answer

REPO = Path(__file__).resolve().parents[1]
DESIGNED = ("discoverer", "descender", "ascender", "worshipper", "merchant")

# ------------------------------------------------------------------ a fixed corpus of real NetHack messages
MESSAGES: tuple[str, ...] = (
    "",
    "There is a staircase down here.",
    "There is a staircase up here.",
    "There are stairs down here.",
    "You see here a scroll labeled ZELGO MER.",
    "f - a scroll labeled ELBIB YLOH.",
    "F - 2 uncursed scrolls labeled FOOBIE BLETCH.",
    "$ - 17 gold pieces.",
    "You see here 3 gold pieces.",
    "g - an uncursed +0 dagger (weapon in hand).",
    "You have a little trouble lifting k - a boulder.",
    "You kill the newt!",
    "You destroy the kobold zombie!",
    "The jackal is killed!",
    "You hit the grid bug.",
    "You miss the jackal.",
    "You kick the jackal.",
    "The jackal bites!",
    "The gnome lord hits!",
    "The giant bee stings!",
    "You find a hidden passage.",
    "You find 12 gold pieces.",
    "There is an altar to Anhur (chaotic) here.",
    "There is a black flash as the ring hits the altar.",
    "There is an amber flash as the wand hits the altar.",
    "You drop a scroll labeled FOOBIE BLETCH.",
    "A potion lands on the altar.",
    "You begin praying to Mitra.",
    "You feel a hopeful feeling.",
    "You feel that Anhur is displeased.",
    '"Thou hast angered me."',
    "You feel guilty.",
    '"Hello, Agent, welcome to Asidonhopo\'s general store!"',
    "Asidonhopo offers 45 gold pieces for your scroll labeled ZELGO MER.  Sell it? [ynaq] (y)",
    "You sold a scroll labeled ZELGO MER for 45 gold pieces.",
    "You bought a lamp for 13 gold pieces.",
    "For you, esteemed sir; only 66 zorkmids for this potion.",
    "Itemized billing? [yn] (n)",
    "You stole 120 zorkmids worth of merchandise.",
    "You owe Asidonhopo 30 zorkmids.",
    "Asidonhopo gets angry!",
    "The Keystone Kops appear!",
    "Usage fee, 5 zorkmids.",
    "You are beginning to feel hungry.",
    "You are beginning to feel weak.",
    "You finish eating the food ration.",
    "This food really hits the spot!",
    "Welcome to experience level 2.",
    "You climb up the stairs.",
    "You climb down the stairs.",
    "You fall through a trap door!",
    "It's a wall.",
    "You die...",
    "You die from starvation.",
    "The jackal is killed by the falling rock!",
    "Hello Agent, welcome to NetHack!  You are a neutral male human Monk.",
    "You stop.  Your little dog is in the way.",
    "Things that are here:",
)
# stat changes: (depth before, after), (gold), (hp before, after, max before, after), (xp level), (hunger)
DEPTHS = ((1, 1), (3, 3), (2, 3), (1, 3), (4, 3), (5, 2))
GOLDS = ((0, 0), (3, 17), (20, 5))
HPS = ((12, 12, 12, 12), (12, 7, 12, 12), (7, 12, 12, 12), (10, 10, 12, 14))
XPS = ((1, 1), (1, 2), (3, 2))
HUNGERS = ((1, 1), (1, 2), (2, 1))
NUM_CAPTION_PAIRS = 360
NUM_DESCRIPTION_PAIRS = 300


def _draws(seed: int):
    """A fixed stream of numbers (a linear congruential generator: the same on every Python)."""
    x = seed
    while True:
        x = (x * 1103515245 + 12345) % 2**31
        yield x >> 8


def caption_pairs() -> list[tuple[str, str]]:
    """360 caption pairs; every tenth pair is one caption twice (a tie)."""
    draw = _draws(7)
    captions = []
    for _ in range(2 * NUM_CAPTION_PAIRS):
        before, after = MESSAGES[next(draw) % len(MESSAGES)], MESSAGES[next(draw) % len(MESSAGES)]
        depth, gold = DEPTHS[next(draw) % len(DEPTHS)], GOLDS[next(draw) % len(GOLDS)]
        hp, xp, hunger = HPS[next(draw) % len(HPS)], XPS[next(draw) % len(XPS)], HUNGERS[next(draw) % len(HUNGERS)]
        s0 = [depth[0], gold[0], hp[0], hp[2], xp[0], hunger[0]]
        s1 = [depth[1], gold[1], hp[1], hp[3], xp[1], hunger[1]]
        captions.append(caption_from_values(before, after, s0, s1))
    pairs = [(captions[2 * i], captions[2 * i + 1]) for i in range(NUM_CAPTION_PAIRS)]
    return [(a, a) if i % 10 == 0 else (a, b) for i, (a, b) in enumerate(pairs)]


def description_pairs() -> list[tuple[str, str]]:
    """300 pairs of Motif descriptions: one to four observations' messages (repeats folded), half with stats."""
    draw = _draws(11)
    descriptions = []
    for k in range(2 * NUM_DESCRIPTION_PAIRS):
        n = 1 + next(draw) % 4
        messages = [MESSAGES[next(draw) % len(MESSAGES)] for _ in range(n)]
        if next(draw) % 3 == 0:  # a run of one message
            messages.append(messages[-1])
        stats = None
        if k % 2:
            stats = np.zeros((len(messages), B.NUM_BLSTATS), np.int64)
            depth, gold = DEPTHS[next(draw) % len(DEPTHS)], GOLDS[next(draw) % len(GOLDS)]
            stats[:, B.BL_DEPTH], stats[:, B.BL_GOLD] = depth[0], gold[0]
            stats[:, B.BL_HP], stats[:, B.BL_HPMAX], stats[:, B.BL_XP_LEVEL], stats[:, B.BL_HUNGER] = 9, 12, 1, 1
            stats[-1, B.BL_DEPTH], stats[-1, B.BL_GOLD] = depth[1], gold[1]
        descriptions.append(motif_description(messages, stats))
    return [(descriptions[2 * i], descriptions[2 * i + 1]) for i in range(NUM_DESCRIPTION_PAIRS)]


POLICY_CODE = "def select_skill(state):\n    return 'descender' if state.depth < 5 else 'discoverer'\n"


def _sha(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()


def prompt_hashes() -> dict[str, str]:
    """Per designed skill, every prompt built for it; "equivalent": the tasks' equivalent-prompting prompts."""
    c1, c2 = caption_pairs()[1]
    d1, d2 = description_pairs()[1]
    out = {}
    for skill in DESIGNED:
        texts: list[object] = [SYSTEM_PROMPT, goal_sentence(skill)]
        for builder in (PromptBuilder(skill), PromptBuilder(skill, answer_instructions=DIRECT_ANSWER_INSTRUCTIONS)):
            conversation = builder.conversation(c1, c2)
            texts += [list(builder.parts), conversation, builder.retry_conversation(conversation, "I cannot tell.")]
        for version in PROMPT_VERSIONS:
            motif = MotifPromptBuilder(skill, version)
            conversation = motif.conversation(d1, d2)
            texts += [list(motif.parts), conversation, motif.retry_conversation(conversation, "Hard to say.")]
        out[skill] = _sha(texts)
    out["equivalent"] = _sha([MotifPromptBuilder(task, "default", context=equivalent_context(task, POLICY_CODE))
                              .conversation(d1, d2) for task in EVAL_TASKS])
    return out


def reply_hashes() -> dict[str, str]:
    """Per designed skill, the stand-in's replies and labels on the caption pairs; per Motif goal key (skill,
    task, Motif's own), its replies on the description pairs."""
    out = {}
    for skill in DESIGNED:
        builder = PromptBuilder(skill)
        replies = []
        for c1, c2 in caption_pairs():
            reply = heuristic.judge(builder.user_prompt(c1, c2), skill)
            replies.append([reply, parse_answer(reply)])
        out[skill] = _sha(replies)
    for goal in DESIGNED + EVAL_TASKS + MOTIF_GOAL_KEYS:
        motif = MotifPromptBuilder(goal, "default")
        out["motif_" + goal] = _sha([heuristic.judge_descriptions(motif.user_prompt(d1, d2), goal, motif.parts,
                                                                  motif.answer_key)
                                     for d1, d2 in description_pairs()])
    return out


# computed from commit 3f94365 (the module docstring)
EXPECTED_PROMPTS: dict[str, str] = {
    "discoverer": "85593669a4066a7b84ef89866cea46f3e3861aaf2ddb9ccc22046f395395ac98",
    "descender": "abd8b6c4c115945868696bb31e4ac9517f711bb44287f2cdd69e4aac6c737539",
    "ascender": "1798ca0d8073689b40f876fbbf8af0b1a865d1e128d2898d2278ccbe5056ad42",
    "worshipper": "42473bb53b2c855079408c9a57a670e56a08be415aca0455ee6a3f77a26908e8",
    "merchant": "93387b040e65c1e6e885287f0d4a2874adc000024d872e771e9883424d61b9f3",
    "equivalent": "17fb344e1a18b85462ea0a68451044a1ab5dc575419b18c7abc3125b1ad65039",
}
EXPECTED_REPLIES: dict[str, str] = {
    "discoverer": "dc2a1eb483b211b76d199e255cf8834bbf146d7862b5de6c3e08c56edc7146b3",
    "descender": "6e78e826c092abcf916f239065ae8177b5adc472e7d60442dac128cb0f58bac6",
    "ascender": "6890ec96353959d703f070da7f1d8d49cfaca3386297d73323fe14ce51a6d918",
    "worshipper": "ea3b8d74a7dac9b4a2f4c7fd3f0ce9af6f58206248986bc7f0caab3e3c1907f6",
    "merchant": "8bbeb52fd9cf9c344c96de650b8a86eb83c132454339af6cc2b47d59c9f999df",
    "motif_discoverer": "e0f0ff64205d2e12ff34711bb9c0d12768a9e94a87799304be19161248c77472",
    "motif_descender": "5938f56685d5380a626dd13279088675fc9c69462ffc9d813675d955bb7bc381",
    "motif_ascender": "93add6371a759e1543af83ebabf41a3d79e230e0ec69c45e21ad4253508a3381",
    "motif_worshipper": "6761c0c85fec5dd71744a855bf30703bbb5f158fde972b78f5d9bafb4205c33f",
    "motif_merchant": "686e90fb3c9555fbac28ccc7e09f284a1bfaa9751a6da62506f86f52bc84507d",
    "motif_gnomish": "b6d06a726c893fc499f4be846ebc810e49463b21b0a3c004bb582d5370da0957",
    "motif_delphi": "e212b3fa49203f7afb329a5836ef238a791db01a8a927c3159b3abaadd0417ae",
    "motif_minetown": "fd16381d36be076626d0ed960c0a056e17370e1d79f027ddc36a6a7f59ad0d73",
    "motif_transactions": "64c092390cf2d0b90a04c51c49237ff519cead722b920a69526106875abb15ae",
    "motif_price": "ccc17c0745985a17c3a90471eacbef667ca3ee6abfd36e70756e333a49ba4588",
    "motif_buc": "be4b73efe05f9c4a9d306ac6f0942a0e1c87cf4762139fd42d1c4455e6193650",
    "motif_goldenexit": "35ed15e660a6df00383ea948c2f38e2135ea3b917c6f60a7711adc300df0107f",
    "motif_levelupsell": "59057570a413acfb1286920571769c51166fd2f4828e08f1f5f1b1752b75c4ae",
    "motif_discoveryhunger": "71573f24cec80ff772d8e678ff446a78181501794b5e475ac4b9b132578f92db",
    "motif_defaultgoal": "d918745929f19442a59f1080501d91533411d3146545b438f6b7863b60d40aab",
    "motif_zeroknowledge": "0270cd11b72718ee17d96d7c8022cd59dc4e8e33668f6ff9805f86d1b4610e03",
    "motif_combat": "b77de8c46a684bfa2c29bb40512b5cebd8d3a8e22686a56d900af046e240c969",
    "motif_gold": "6fb8d485b6460e6561490582b3e0aa0498132fa9437c1579cc689d40539fa002",
    "motif_stairs": "6dccc0954823aa25c6987631209708f97bd3ab5b76065ebb4172b5dc3eb7ffa2",
}


# ------------------------------------------------------------------ the designed skills: byte for byte
def test_the_corpus_covers_every_rule_and_both_answers() -> None:
    """The pairs are varied enough to test the rules: every named pattern fires somewhere, and every skill's
    replies hold all three answers."""
    texts = [c for pair in caption_pairs() for c in pair]
    for name, pattern in heuristic.NAMED_PATTERNS.items():
        assert any(pattern.search(t if name == "pickup" else t.lower()) for t in texts), name
    for skill in DESIGNED:
        labels = {parse_answer(heuristic.judge(PromptBuilder(skill).user_prompt(*pair), skill))
                  for pair in caption_pairs()}
        assert labels == {0, 1, 2}, skill


def test_every_annotation_prompt_is_the_one_built_before_the_skill_files() -> None:
    assert prompt_hashes() == EXPECTED_PROMPTS


def test_the_stand_in_replies_as_before_the_skill_files() -> None:
    heuristic._MESSAGE_CACHE.clear()  # replies from the rules, then the same replies from the cache
    assert reply_hashes() == EXPECTED_REPLIES
    assert reply_hashes() == EXPECTED_REPLIES


def test_the_release_label_shares_are_the_skill_files() -> None:
    assert RELEASE_LABEL_SHARES == {
        "discoverer": (0.525, 0.447, 0.028, 0.0),
        "descender": (0.455, 0.485, 0.060, 0.0),
        "ascender": (0.326, 0.414, 0.260, 0.0),
        "worshipper": (0.562, 0.416, 0.022, 0.0),
        "merchant": (0.513, 0.466, 0.021, 0.0),
    }


def test_the_stand_in_defines_exactly_what_a_file_may_name() -> None:
    assert set(heuristic.NAMED_PATTERNS) == set(STAND_IN_PATTERNS)
    assert set(heuristic._STAT_TERMS) == set(STAND_IN_STATS)


def test_an_unknown_skill_is_refused_with_the_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown skill 'miner'; valid skills: discoverer, descender"):
        heuristic.judge(PromptBuilder("descender").user_prompt(*caption_pairs()[1]), "miner")
    with pytest.raises(ValueError, match="valid skills: discoverer"):
        PromptBuilder("miner")


# ------------------------------------------------------------------ a sixth skill, from its file alone
SIXTH = '''name = "fountaineer"
index = 5

[text]
description = """quaff from fountains"""
preference = """Prefer the moment where the player quaffs from a fountain."""
can_start = """always."""
ends = """after a fixed number of game turns."""

[rules]
start = "always"
end = "time_budget"

[reward]
quantile = 0.9
experiment = "llama3_fountaineer_default"
paper_pairs = 1000

[measures]
names = ["cells_revealed"]
main = "cells_revealed"
progress = "cells_revealed"

[stand_in]
stats = { xp_gained = 1.5, level_change = -4.0, hp_lost_on_level = -0.5 }
message = [
    { phrases = ["Fountain", "you quaff"], score = 4.0 },
    { phrases = ["water moccasin"], where = "both", score = -3.0 },
    { match = ["kill", "pickup"], phrases = ["you find"], score = 1.0 },
]
'''
# (message before, message after, depth change, gold change, xp change, hp change) and the score the file gives
SIXTH_CASES: tuple[tuple[str, str, int, int, int, int, float], ...] = (
    ("", "There is a fountain here.", 0, 0, 0, 0, 4.0),  # a phrase, whatever its case
    ("You quaff from the fountain.", "", 0, 0, 0, 0, 0.0),  # where = "current": the previous message is not read
    ("A water moccasin appears!", "", 0, 0, 0, 0, -3.0),  # where = "both"
    ("", "You kill the water moccasin! f - a wand.", 0, 0, 0, 0, -2.0),  # kill and pickup: the rule adds once
    ("", "You find a hidden door.", 0, 0, 0, 0, 1.0),
    ("", "You die...", 0, 0, 0, 0, -20.0),  # every skill's rules
    ("", "You feel guilty.", 0, 0, 0, 0, -10.0),
    ("", "", 2, 5, 1, -3, -6.5),  # -4 * 2 levels + 1.5 xp; hit points lost off the level do not count
    ("", "", -1, 0, 0, -3, -4.0),
    ("", "", 0, 0, 0, -3, -0.5),
    ("", "", 0, 9, 0, 4, 0.0),  # gold is not weighed
)


@pytest.fixture()
def six_skills(tmp_path: Path) -> Path:
    for path in DEFAULT_SKILLS_DIR.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "fountaineer.toml").write_text(SIXTH, encoding="utf-8")
    return tmp_path


def test_a_sixth_skill_is_scored_by_its_file(six_skills: Path) -> None:
    spec = load_skill_set([six_skills])["fountaineer"]
    rules = heuristic.StandInRules.from_spec(spec)
    for before, after, depth, gold, xp, hp, expected in SIXTH_CASES:
        got = rules.message_score(before, after) + rules.stats_score(depth, gold, xp, hp)
        assert got == expected, (before, after, depth, gold, xp, hp)


def test_a_process_that_chose_a_sixth_skill_annotates_it(six_skills: Path) -> None:
    """The whole path: MAESTROMOTIF_SKILLS chooses the set, the prompt carries the file's preference and the
    stand-in's reply scores the two moments by the file's rules."""
    script = (
        "import json\n"
        "from rlaif import heuristic\n"
        "from rlaif.captions import caption_from_values\n"
        "from rlaif.preferences import RELEASE_LABEL_SHARES\n"
        "from rlaif.prompts import PromptBuilder\n"
        "b = PromptBuilder('fountaineer')\n"
        "c1 = caption_from_values('', 'You quaff from the fountain.', [1, 0, 9, 9, 1, 1], [1, 0, 9, 9, 1, 1])\n"
        "c2 = caption_from_values('', 'f - a wand.', [1, 0, 9, 9, 1, 1], [2, 0, 6, 9, 2, 1])\n"
        "prompt = b.user_prompt(c1, c2)\n"
        "print(json.dumps([heuristic.judge(prompt, 'fountaineer'), 'quaffs from a fountain' in prompt,\n"
        "                  sorted(RELEASE_LABEL_SHARES)]))\n"
    )
    env = {**os.environ, SKILLS_ENV: str(six_skills)}
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    reply, has_preference, shared = json.loads(out.stdout.strip().splitlines()[-1])
    # moment 2: the pickup 1, a level down -4, experience gained 1.5
    assert reply == "Rule-based stand-in (fountaineer): moment 1 scores 4, moment 2 scores -1.5.\nAnswer: 1"
    assert has_preference
    assert shared == sorted(DESIGNED)  # the sixth file gives no released label shares


def test_the_releases_goal_strings_are_kept_beside_the_rewording_and_used_by_no_prompt():
    from rlaif.prompts import SKILL_PREFERENCES, SYSTEM_PROMPT

    for name in DESIGNED_SKILLS:
        release = SKILL_SPECS[name].release_preference
        assert release and release != SKILL_SPECS[name].preference
        assert release not in SKILL_PREFERENCES[name] and release not in SYSTEM_PROMPT
