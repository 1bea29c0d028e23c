"""Indices into NLE's ``blstats`` vector (the bottom-line statistics).

This is the one place the project names them; they mirror ``nle.nethack.NLE_BL_*``
(NLE 1.0.0, NetHack 3.6) and a test checks that they stay equal.
"""
from __future__ import annotations

BL_X = 0
BL_Y = 1
BL_STR25 = 2
BL_STR125 = 3
BL_DEX = 4
BL_CON = 5
BL_INT = 6
BL_WIS = 7
BL_CHA = 8
BL_SCORE = 9
BL_HP = 10
BL_HPMAX = 11
BL_DEPTH = 12
BL_GOLD = 13
BL_ENERGY = 14
BL_ENERGY_MAX = 15
BL_AC = 16
BL_MONSTER_LEVEL = 17
BL_XP_LEVEL = 18
BL_XP_POINTS = 19
BL_TIME = 20
BL_HUNGER = 21
BL_CAPACITY = 22
BL_DUNGEON_NUMBER = 23
BL_DUNGEON_LEVEL = 24
BL_CONDITION = 25
BL_ALIGNMENT = 26

NUM_BLSTATS = 27

# Hunger states as NetHack numbers them (u.uhs).
HUNGER_SATIATED = 0
HUNGER_NOT_HUNGRY = 1
HUNGER_HUNGRY = 2
HUNGER_WEAK = 3
HUNGER_FAINTING = 4

# Dungeon numbers (u.uz.dnum) of the branches the tasks talk about.
DNUM_DUNGEONS_OF_DOOM = 0
DNUM_GEHENNOM = 1
DNUM_GNOMISH_MINES = 2

# Names of the blstats the NLE mirror is checked against.
NLE_NAMES = {
    BL_X: "NLE_BL_X",
    BL_Y: "NLE_BL_Y",
    BL_STR25: "NLE_BL_STR25",
    BL_STR125: "NLE_BL_STR125",
    BL_DEX: "NLE_BL_DEX",
    BL_CON: "NLE_BL_CON",
    BL_INT: "NLE_BL_INT",
    BL_WIS: "NLE_BL_WIS",
    BL_CHA: "NLE_BL_CHA",
    BL_SCORE: "NLE_BL_SCORE",
    BL_HP: "NLE_BL_HP",
    BL_HPMAX: "NLE_BL_HPMAX",
    BL_DEPTH: "NLE_BL_DEPTH",
    BL_GOLD: "NLE_BL_GOLD",
    BL_ENERGY: "NLE_BL_ENE",
    BL_ENERGY_MAX: "NLE_BL_ENEMAX",
    BL_AC: "NLE_BL_AC",
    BL_MONSTER_LEVEL: "NLE_BL_HD",
    BL_XP_LEVEL: "NLE_BL_XP",
    BL_XP_POINTS: "NLE_BL_EXP",
    BL_TIME: "NLE_BL_TIME",
    BL_HUNGER: "NLE_BL_HUNGER",
    BL_CAPACITY: "NLE_BL_CAP",
    BL_DUNGEON_NUMBER: "NLE_BL_DNUM",
    BL_DUNGEON_LEVEL: "NLE_BL_DLEVEL",
    BL_CONDITION: "NLE_BL_CONDITION",
    BL_ALIGNMENT: "NLE_BL_ALIGN",
}
