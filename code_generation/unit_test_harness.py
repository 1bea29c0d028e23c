## A template: code_generation/skill_rules.py fills each {{placeholder}} from the skill files (skills/*.toml)
## and drops these lines; the language model and the sandbox see the result (prompts.harness_text). The
## placeholders are no names to the linter, and the checks that use term and none are rendered:
## ruff: noqa: F821, F841
# Unit-test harness for policies over skills: a small simulated dungeon.
#
# This file is plain Python that is appended after a NetHackPlayer class and run in
# the sandbox (code_generation/sandbox.py), so it obeys the same rules as generated
# code (standard-library imports only, no file access). It is also shown to the
# language model in the initial prompts, so that its unit tests use it.
#
# The simulation works at the level of skills: every call of perform_task picks the
# next skill, which then runs to completion:
# {{sim_skill_notes}}
# branch_number follows NetHack: 0 the Dungeons of Doom, 2 the Gnomish Mines.
# branch_depth is -2 until the Mines entrance is known, then the depth of the Dungeons
# of Doom level holding it (as in the game run-time): known once both down staircases of
# that level were seen (half of the explorations of that level see them) or once a
# descent led into the Mines.
import random

SIM_SKILLS = {{sim_skills}}
SIM_COLOR_MAP = {
    "black": 0, "red": 1, "green": 2, "brown": 3, "blue": 4, "magenta": 5, "cyan": 6,
    "gray": 7, "no_color": 8, "orange": 9, "bright_green": 10, "yellow": 11,
    "bright_blue": 12, "bright_magenta": 13, "bright_cyan": 14, "white": 15,
    "@": 15, "_": 7,
}


class SimDungeon:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        rng = self.rng
        self.mines_entrance = rng.randint(2, 4)
        self.oracle_depth = rng.randint(5, 9)
        self.minetown_depth = self.mines_entrance + rng.randint(3, 4)
        self.mines_bottom = self.minetown_depth + 4
        self.dungeon_bottom = 25
        self.shops = {(0, d) for d in range(2, 10) if rng.random() < 0.4}
        self.shops.add((2, self.minetown_depth))
        self.altars = {(0, d) for d in range(1, 10) if rng.random() < 0.3}
        self.altars.add((2, self.minetown_depth))
        self.depth = 1
        self.branch = 0
        self.branch_depth = -2
        self.turn = 0
        self.gold = 0
        self.kills = 0
        self.xp_level = 1
        self.hunger_clock = 0
        self.hunger = 1
        self.just_eaten = False
        self.ate_in_mines = False
        self.items = 0
        self.sold = 0
        self.price_identified = 0
        self.buc = 0
        self.escaped = False
        self.adjacent = None
        self.max_dungeon_depth = 1
        self.history = []

    def preconditions_truth(self):
        worshipper_ok = self.adjacent == "altar" and self.items > 0
        merchant_ok = self.adjacent == "shop" and self.items > 0
        return worshipper_ok, merchant_ok

    def neighbourhood(self):
        # The 7x7 window the game run-time passes: four rows above the hero, two below, the
        # hero at [4][3] with colour 0. A green '@' (a watchman) and a cyan '_' (an iron
        # chain) are always in view: neither is a shopkeeper or an altar.
        chars = [[ord(".")] * 7 for _ in range(7)]
        colors = [[7] * 7 for _ in range(7)]
        chars[4][3] = ord("@")
        colors[4][3] = 0
        chars[6][6] = ord("@")
        colors[6][6] = SIM_COLOR_MAP["green"]
        chars[0][6] = ord("_")
        colors[0][6] = SIM_COLOR_MAP["cyan"]
        if self.adjacent == "shop":
            chars[2][5] = ord("@")
            colors[2][5] = SIM_COLOR_MAP["@"]
        if self.adjacent == "altar":
            chars[5][1] = ord("_")
            colors[5][1] = SIM_COLOR_MAP["_"]
        return chars, colors

    def step(self, skill):
        if skill not in SIM_SKILLS:
            raise ValueError("perform_task returned an unknown skill: " + repr(skill))
        rng = self.rng
        self.just_eaten = False
        if {{explores_skills}}:
            spent = 100
            self.gold += rng.randint(0, 4)
            self.kills += rng.randint(0, 2)
            self.xp_level = min(14, 1 + self.kills // 6)
            if rng.random() < 0.5:
                self.items += 1
            here = (self.branch, self.depth)
            if here == (0, self.mines_entrance) and rng.random() < 0.5:
                self.branch_depth = self.mines_entrance  # both down staircases seen
            self.adjacent = None
            if self.items > 0 and here in self.shops and rng.random() < 0.6:
                self.adjacent = "shop"
            elif self.items > 0 and here in self.altars and rng.random() < 0.6:
                self.adjacent = "altar"
            if self.hunger >= 2:
                self.just_eaten = True
                self.hunger_clock = 0
                self.hunger = 1
                if self.branch == 2:
                    self.ate_in_mines = True
        elif {{descends_skills}}:
            spent = 50
            self.adjacent = None
            if self.branch == 0 and self.depth == self.mines_entrance and rng.random() < 0.5:
                self.branch = 2
                self.depth += 1
                self.branch_depth = self.mines_entrance
            elif self.branch == 2:
                self.depth = min(self.depth + 1, self.mines_bottom)
            else:
                self.depth = min(self.depth + 1, self.dungeon_bottom)
        elif {{ascends_skills}}:
            spent = 50
            self.adjacent = None
            if self.branch == 0 and self.depth == 1:
                self.escaped = True
            elif self.branch == 2 and self.depth == self.mines_entrance + 1:
                self.branch = 0
                self.depth -= 1
            else:
                self.depth -= 1
        elif {{sells_skills}}:
            spent = 200
            if self.adjacent == "shop" and self.items > 0:
                self.items -= 1
                self.sold += 1
                self.price_identified += 1
            self.adjacent = None
        else:
            spent = 200
            if self.adjacent == "altar" and self.items > 0:
                self.buc += self.items
            self.adjacent = None
        self.turn += spent
        self.hunger_clock += spent
        if self.hunger_clock >= 900:
            self.hunger = 2
        if self.branch == 0:
            self.max_dungeon_depth = max(self.max_dungeon_depth, self.depth)


def sim_sync_player(player, sim, seen_kills):
    """Passes the game state to the player the way the run-time does."""
    if sim.branch_depth != -2:
        player.branch_depth = sim.branch_depth
    if hasattr(player, "update_gold"):
        player.update_gold(sim.gold)
    if hasattr(player, "defeat_monster"):
        for _ in range(sim.kills - seen_kills):
            player.defeat_monster()
    if hasattr(player, "update_xp_level"):
        player.update_xp_level(sim.xp_level)
    if hasattr(player, "update_hunger"):
        player.update_hunger(sim.hunger)
    if sim.just_eaten and sim.branch == 2 and hasattr(player, "eaten_food"):
        player.eaten_food = True
    return sim.kills


def run_episode(player_class, seed, max_steps=200, max_depth=5, stop=None, verbose=False):
    """Runs one simulated episode; returns the SimDungeon with its history.

    Each history entry is a dict of the state when the skill was chosen: step, skill,
    depth, branch, branch_depth, merchant_ok, worshipper_ok, gold, kills, xp_level, turn, sold,
    ate_in_mines. The module-level random generator is seeded with ``seed`` first, so a
    policy that draws its settings with ``random`` behaves the same in every run.
    """
    random.seed(seed)
    sim = SimDungeon(seed)
    player = player_class(max_depth, -2)
    if hasattr(player, "set_initial_values"):
        player.set_initial_values()
    skill = player.skill if hasattr(player, "skill") else {{first_skill}}
    seen_kills = 0
    for step in range(max_steps):
        seen_kills = sim_sync_player(player, sim, seen_kills)
        truth = sim.preconditions_truth()
        if hasattr(player, "skill_precondition"):
            chars, colors = sim.neighbourhood()
            worshipper_ok, merchant_ok = player.skill_precondition(chars, colors, sim.items, SIM_COLOR_MAP)
            if (bool(worshipper_ok), bool(merchant_ok)) != truth:
                raise AssertionError("skill_precondition returned " + repr((worshipper_ok, merchant_ok))
                                     + " but the truth is " + repr(truth))
        else:
            worshipper_ok, merchant_ok = truth
        skill = player.perform_task(skill, sim.depth, sim.branch, merchant_ok, worshipper_ok)
        sim.history.append({"step": step, "skill": skill, "depth": sim.depth, "branch": sim.branch,
                            "branch_depth": sim.branch_depth,
                            "merchant_ok": bool(merchant_ok), "worshipper_ok": bool(worshipper_ok),
                            "gold": sim.gold, "kills": sim.kills, "xp_level": sim.xp_level,
                            "turn": sim.turn, "sold": sim.sold, "ate_in_mines": sim.ate_in_mines})
        if verbose and step < 60:
            print("step %3d depth=%2d branch=%d branch_depth=%2d merchant_ok=%d worshipper_ok=%d "
                  "gold=%3d kills=%3d xp=%2d hunger=%d -> %s"
                  % (step, sim.depth, sim.branch, sim.branch_depth, merchant_ok, worshipper_ok,
                     sim.gold, sim.kills, sim.xp_level, sim.hunger, skill))
        sim.step(skill)
        if sim.escaped or (stop is not None and stop(sim)):
            break
    return sim


def check_skill_functions(player_class):
    """Checks skill_termination / skill_precondition when the class has them."""
    player = player_class(5, -2)
    if hasattr(player, "set_initial_values"):
        player.set_initial_values()
    if hasattr(player, "skill_termination"):
        term = player.skill_termination
        none = [False, False]
        # {{termination_checks}}
    if hasattr(player, "skill_precondition"):
        sim = SimDungeon(0)
        sim.items = 2
        for adjacent, expected in ((None, (False, False)), ("shop", (False, True)), ("altar", (True, False))):
            sim.adjacent = adjacent
            chars, colors = sim.neighbourhood()
            got = player.skill_precondition(chars, colors, sim.items, SIM_COLOR_MAP)
            assert (bool(got[0]), bool(got[1])) == expected, "skill_precondition wrong near " + repr(adjacent)
        sim.items = 0
        sim.adjacent = "shop"
        chars, colors = sim.neighbourhood()
        got = player.skill_precondition(chars, colors, 0, SIM_COLOR_MAP)
        assert not got[1], "merchant needs items to sell"
    print("skill functions: OK")


def run_trials(player_class, trials=10, max_steps=200, max_depth=5, stop=None, verbose_trials=1):
    """Runs simulated episodes with seeds 0..trials-1; prints the trace of the first ones."""
    sims = []
    for seed in range(trials):
        if seed < verbose_trials:
            print("--- trace of simulated episode %d ---" % seed)
        sims.append(run_episode(player_class, seed, max_steps, max_depth, stop, verbose=seed < verbose_trials))
    return sims


def check_initiation(sims, way_first_near_entrance=False):
    """Every time a shopkeeper (altar) was near the hero with items held, {{shopkeeper_skills}} ({{altar_skills}}) was chosen.

    way_first_near_entrance: except on the level of the known Mines entrance and the level below it,
    where a policy may take the staircase first."""
    for sim in sims:
        for entry in sim.history:
            if way_first_near_entrance and entry["depth"] in (entry["branch_depth"], entry["branch_depth"] + 1):
                continue
            if entry["merchant_ok"] and {{not_a_shopkeeper_skill}}:
                raise AssertionError("step %d: a shopkeeper was near the hero but %s was chosen"
                                     % (entry["step"], entry["skill"]))
            if entry["worshipper_ok"] and not entry["merchant_ok"] and {{not_an_altar_skill}}:
                raise AssertionError("step %d: an altar was near the hero but %s was chosen"
                                     % (entry["step"], entry["skill"]))


def report(task, successes, trials, needed):
    print("%s: %d/%d simulated episodes succeeded (need %d)" % (task, successes, trials, needed))
    if successes < needed:
        raise AssertionError("%s: unit test failed (%d/%d < %d)" % (task, successes, trials, needed))
    print("UNIT TEST PASSED")
