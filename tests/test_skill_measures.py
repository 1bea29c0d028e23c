"""Skill measures (rl_baseline/tasks/skill_measures.py) on live wizard-mode games.

One tracker scores what a skill achieved while active, for the training statistics and for
the forced-skill evaluation (``--eval_skill``); these tests drive real NetHack games through
the skill runtime with one skill held.
"""
from __future__ import annotations

import numpy as np
import pytest

from common.nethack.actions import WIZARD_KEYS, action_index
from common.vocabulary import SKILLS
from rl_baseline.envs import make_monk_env
from rl_baseline.sf.cfg import ConfigError, SkillEnvConfig, parse_cfg
from rl_baseline.sf.env import StartDepth
from rl_baseline.skills.intrinsic_reward import IntrinsicReward, ScoreCache
from rl_baseline.skills.runtime import SingleSkillPolicy, SkillRuntime
from rl_baseline.tasks.skill_measures import SkillMeasures, altar_in_view, is_shop_greeting


class ZeroModel:
    def score(self, messages, depth_change):
        return np.zeros(len(messages), dtype=np.float32)

    def threshold(self, q):
        return 1.0


def held(skill: str, start_depth: int = 1, max_episode_steps: int = 400) -> SkillRuntime:
    reward = IntrinsicReward([ZeroModel() for _ in SKILLS], [0.5] * len(SKILLS), beta=3.0, llm_coef=0.1,
                             extrinsic_coef=0.0, cache=ScoreCache())
    env = make_monk_env(wizard=True, final_death=True, max_episode_steps=max_episode_steps)
    if start_depth > 1:
        env = StartDepth(env, start_depth)
    return SkillRuntime(env, lambda: SingleSkillPolicy(skill), reward)


def _reset(env: SkillRuntime, seed: int):
    env.unwrapped.seed(seed, seed + 1000, reseed=False)  # NLE 1.0 ignores reset(seed=...)
    return env.reset()


def _hero(raw: dict) -> tuple[int, int]:
    return int(raw["blstats"][0]), int(raw["blstats"][1])


MOVES = ("east", "west", "north", "south", "northeast", "southwest", "northwest", "southeast")
BACK = dict(zip(MOVES, ("west", "east", "south", "north", "southwest", "northeast", "southeast", "northwest")))


def test_worshipper_finds_an_altar_and_is_credited_with_drops_and_identifications():
    env = held("worshipper")
    try:
        _reset(env, 3)
        game = env.unwrapped
        game.wizard_wish("altar")  # under the hero, who hides it
        altar_at = _hero(game.current_observation())
        for move in MOVES:
            env.step(action_index(move))
            if _hero(game.current_observation()) != altar_at:
                break
        else:
            pytest.fail("the hero could not move on seed 3's map: the test's setup no longer holds")
        raw = game.current_observation()
        assert altar_in_view(raw["chars"], raw["colors"])
        assert env.stats.measures.values["worshipper"]["altars_found"] == 1
        env.step(action_index(BACK[move]))
        assert _hero(game.current_observation()) == altar_at
        game.wizard_wish("cursed scroll of teleportation")
        _, _, _, _, info = env.step(action_index("drop"))  # drops the first new item
        assert any("black flash" in m for m in info["messages"]), info["messages"]
        game.wizard_wish("uncursed ring of adornment")  # a wish does not tell the hero its status
        _, _, _, _, info = env.step(action_index("drop"))
        assert any("lands on the altar" in m for m in info["messages"]), info["messages"]
        values = env.stats.measures.values["worshipper"]
        assert values == {"altars_found": 1.0, "altar_drops": 2.0, "buc_identified": 2.0}
        # an item whose status the hero knew lands on the altar but identifies nothing
        raw = game.current_observation()
        known = {"depth": 1, "dungeon_number": 0, "dungeon_level": 1,
                 "messages": ["There is a black flash as a cursed scroll labeled FOO hits the altar."]}
        env.stats.measures.update(known, raw["chars"], raw["colors"], "worshipper")
        values = env.stats.measures.values["worshipper"]
        assert values["altar_drops"] == 3.0 and values["buc_identified"] == 2.0
        # the training statistics hand out the same numbers
        summary = env.stats.summary(env.skill_names, 0.0)
        assert summary["measures/worshipper/buc_identified"] == 2.0 == summary["skills/worshipper_success"]
        assert "measures/merchant/items_sold" not in summary  # the merchant was never active
    finally:
        env.close()


def test_discoverer_cells_per_1000_steps_count_each_newly_seen_cell_once():
    env = held("discoverer")
    try:
        obs, info = _reset(env, 5)
        game = env.unwrapped
        best = int(np.count_nonzero(game.current_observation()["chars"] != ord(" ")))
        revealed, steps = 0, 0
        rng = np.random.default_rng(0)
        for _ in range(120):
            _, _, term, trunc, info = env.step(action_index(MOVES[int(rng.integers(4))]))
            steps += 1
            assert not (term or trunc) and info["depth"] == 1
            cells = int(np.count_nonzero(game.current_observation()["chars"] != ord(" ")))
            revealed += max(0, cells - best)
            best = max(best, cells)
        assert revealed > 0, "walking around should reveal part of the map"
        values = env.stats.measures.values["discoverer"]
        assert values["cells_per_1000_steps"] == pytest.approx(1000.0 * revealed / steps)
        assert values["cells_revealed"] == revealed
        assert values["new_levels"] == 0
    finally:
        env.close()


def _wizard_game_measured():
    """A wizard-mode game (level teleports) and a :class:`SkillMeasures` reset on its first observation."""
    env = make_monk_env(wizard=True, max_episode_steps=100)
    _, info = env.reset()
    raw = env.current_observation()
    m = SkillMeasures()
    m.reset(info, raw["chars"], raw["colors"])
    return env, m


def test_descent_and_ascent_are_credited_to_the_active_skill_only():
    env, m = _wizard_game_measured()
    try:
        info = env.wizard_level_teleport(3)
        raw = env.current_observation()
        m.update(info, raw["chars"], raw["colors"], "descender")
        assert info["depth"] == 3
        info = env.wizard_level_teleport(2)
        raw = env.current_observation()
        m.update(info, raw["chars"], raw["colors"], "discoverer")  # going up is not the descender's
        info = env.wizard_level_teleport(1)
        raw = env.current_observation()
        m.update(info, raw["chars"], raw["colors"], "ascender")
        values = m.values
        assert values["descender"]["levels_descended"] == 2 and values["descender"]["steps_to_first_descent"] == 1
        assert values["ascender"]["levels_ascended"] == 1
        assert values["discoverer"]["new_levels"] == 1  # level 2 was new, level 1 was not
    finally:
        env.close()


def test_the_ascender_is_paid_a_level_once_per_turn_not_per_return_trip():
    """Up, down and up the same stairs in one turn of the ascender climbs one level, not two (the progress bound's
    ascender learnt that loop when every depth decrease counted); a new turn, after another skill took the hero
    down, counts its climb again. Live game, wizard-mode level teleports."""
    env, m = _wizard_game_measured()
    try:
        def go(depth: int, skill: str) -> None:
            info = env.wizard_level_teleport(depth)
            raw = env.current_observation()
            assert info["depth"] == depth
            m.update(info, raw["chars"], raw["colors"], skill)

        go(4, "descender")
        for depth in (3, 4, 3, 4, 3, 2):  # one turn of the ascender: up, down, up, down, up, up
            go(depth, "ascender")
        assert m.values["ascender"]["levels_ascended"] == 2  # 4 -> 2; the old sum of decreases said 4
        go(4, "descender")
        go(3, "ascender")  # a new turn: its climb counts
        assert m.values["ascender"]["levels_ascended"] == 3
    finally:
        env.close()


def test_descender_measures_tell_finding_the_stairs_from_reaching_them_from_going_down():
    env = held("descender")
    try:
        _reset(env, 5)
        game = env.unwrapped
        assert ord(">") not in game.current_observation()["chars"]  # not in view at the start of this game
        env.step(action_index("search"))
        assert env.stats.measures.values["descender"]["down_stairs_known_share"] == 0.0
        game.wizard_keys(bytes([WIZARD_KEYS["wizmap"]]))  # the whole level mapped: '>' on the map
        env.step(action_index("search"))
        game.wizard_keys(b"\x14>.")  # teleport to the cell the cursor's '>' key picks: the staircase down
        stairs = np.argwhere(game.current_observation()["chars"] == ord("@"))
        env.step(action_index("search"))
        env.step(action_index("search"))  # still there: one arrival, not two
        values = env.stats.measures.values["descender"]
        assert values["down_stairs_reached"] == 1.0 and values["levels_descended"] == 0.0
        assert values["down_stairs_known_share"] == pytest.approx(3 / 4)
        _, _, _, _, info = env.step(action_index("down"))
        assert info["depth"] == 2 and len(stairs) >= 1
        values = env.stats.measures.values["descender"]
        assert values["levels_descended"] == 1.0 and values["steps_to_first_descent"] == 5.0
        # level 2's staircase down has not been seen: that step does not count as knowing it
        known_on_2 = ord(">") in game.current_observation()["chars"]
        assert values["down_stairs_known_share"] == pytest.approx((3 + known_on_2) / 5)
    finally:
        env.close()


def test_a_trip_up_and_down_one_staircase_pair_counts_and_pays_nothing():
    """One descent, then three trips up and down the same staircase pair: one new level. Before, the descender's
    measure and its progress reward counted every depth increase (4 levels, paid 4)."""
    reward = IntrinsicReward([], [], beta=3.0, llm_coef=1.0, extrinsic_coef=0.0)
    env = SkillRuntime(make_monk_env(wizard=True, final_death=True, max_episode_steps=400),
                       lambda: SingleSkillPolicy("descender"), reward, skill_reward="progress")
    try:
        _reset(env, 5)
        game = env.unwrapped
        game.wizard_keys(bytes([WIZARD_KEYS["wizmap"]]) + b"\x14>.")  # onto level 1's staircase down
        paid, depths = [], []
        for action in ("down", "up", "down", "up", "down", "up", "down"):
            _, _, term, trunc, info = env.step(action_index(action))
            assert not (term or trunc)
            paid.append(info["intrinsic_reward"])
            depths.append(info["depth"])
        assert depths == [2, 1, 2, 1, 2, 1, 2]  # the hero arrives on the staircase back each time
        values = env.stats.measures.values["descender"]
        assert values["levels_descended"] == 1.0 and values["depth_increases"] == 4.0
        assert env.stats.measures.progress("descender") == 1.0
        assert paid == [1.0, 0, 0, 0, 0, 0, 0]
    finally:
        env.close()


def test_new_deepest_levels_are_counted_per_dungeon_branch():
    m = SkillMeasures()
    blank = np.full((21, 79), ord(" "), dtype=np.uint8)
    colours = np.zeros_like(blank)

    def at(depth: int, dungeon: int = 0, skill: str = "descender") -> None:
        m.update({"depth": depth, "dungeon_number": dungeon, "dungeon_level": depth if dungeon == 0 else depth - 2},
                 blank, colours, skill)

    m.reset({"depth": 1, "dungeon_number": 0, "dungeon_level": 1}, blank, colours)
    at(2), at(3)  # down the main dungeon: 2 new levels
    at(2, skill="ascender"), at(3)  # back up and down again: nothing new
    at(4, dungeon=2)  # into the Gnomish Mines from level 3: a new level of that branch
    at(3, skill="ascender"), at(4)  # the main dungeon's level 4: new in its branch
    at(5, skill="discoverer"), at(4, skill="ascender"), at(5)  # level 5 was reached by another skill first
    values = m.values["descender"]
    assert values["levels_descended"] == 4.0 and values["depth_increases"] == 6.0


def test_the_discoverer_is_not_paid_on_a_level_it_took_the_stairs_to():
    """The discoverer explores the level it is on; cells it reveals on a level it went to itself pay it nothing
    (measure and progress reward), so a descent is never the discoverer's gain."""
    m = SkillMeasures()
    few = np.full((21, 79), ord(" "), dtype=np.uint8)
    few[0, :10] = ord(".")
    more = few.copy()
    more[1, :30] = ord(".")
    colours = np.zeros_like(few)
    m.reset({"depth": 1, "dungeon_number": 0, "dungeon_level": 1}, few, colours)
    m.update({"depth": 1, "dungeon_number": 0, "dungeon_level": 1}, more, colours, "discoverer")
    assert m.progress("discoverer") == 30.0
    m.update({"depth": 2, "dungeon_number": 0, "dungeon_level": 2}, few, colours, "discoverer")  # took the stairs
    m.update({"depth": 2, "dungeon_number": 0, "dungeon_level": 2}, more, colours, "discoverer")
    assert m.progress("discoverer") == 30.0  # level 2 was the discoverer's own doing
    m.update({"depth": 3, "dungeon_number": 0, "dungeon_level": 3}, few, colours, "descender")
    m.update({"depth": 3, "dungeon_number": 0, "dungeon_level": 3}, more, colours, "discoverer")
    assert m.progress("discoverer") == 60.0  # level 3 the descender brought it to


def test_progress_stairs_reward_pays_the_first_arrival_on_each_levels_staircase_once():
    """--progress_stairs_reward 0.5 with --progress_scale 100 for the descender (live game, wizard mode): the
    first arrival on the level's '>' pays 50, standing there, leaving and coming back pay nothing, the descent
    pays 100."""
    reward = IntrinsicReward([], [], beta=3.0, llm_coef=1.0, extrinsic_coef=0.0)
    game_env = make_monk_env(wizard=True, final_death=True, max_episode_steps=400)
    env = SkillRuntime(game_env, lambda: SingleSkillPolicy("descender"), reward, skill_reward="progress",
                       progress_scales=(1.0, 100.0, 100.0, 1.0, 1.0), progress_stairs_reward=0.5)
    try:
        _reset(env, 5)
        game = env.unwrapped
        game.wizard_keys(bytes([WIZARD_KEYS["wizmap"]]))  # the whole level mapped: '>' on the map
        _, _, _, _, info = env.step(action_index("search"))
        assert info["intrinsic_reward"] == 0.0
        game.wizard_keys(b"\x14>.")  # teleport onto the staircase down
        paid = [env.step(action_index("search"))[4]["intrinsic_reward"] for _ in range(2)]
        assert paid == [50.0, 0.0]
        for move in MOVES:  # off the stairs and back: the level was paid already
            _, _, _, _, info = env.step(action_index(move))
            if info["intrinsic_reward"] == 0.0 and "You" not in str(info.get("message", "")):
                _, _, _, _, info = env.step(action_index(BACK[move]))
                assert info["intrinsic_reward"] == 0.0
                break
        game.wizard_keys(b"\x14>.")
        env.step(action_index("search"))
        _, _, _, _, info = env.step(action_index("down"))
        assert info["depth"] == 2 and info["intrinsic_reward"] == 100.0
        assert len(env.stats.measures.stairs_levels_reached) == 1
    finally:
        env.close()


def test_forced_skill_episodes_are_the_same_games_on_every_run():
    from rl_baseline.sf.policy import UniformRandomPolicy
    from rl_baseline.sf.skill_eval import run_skill_episodes

    def run() -> list[tuple]:
        envs = [held("discoverer", max_episode_steps=40) for _ in range(2)]
        try:
            result = run_skill_episodes(envs, UniformRandomPolicy(envs[0].action_space.n, seed=3), "discoverer",
                                        episodes=5, seed=7, progress=False)
        finally:
            for env in envs:
                env.close()
        return [(e.length, e.ended_by, tuple(sorted(e.measures.items()))) for e in result.episodes]

    first = run()
    assert len(first) == 5 and len({m for _, _, m in first}) > 1  # different games ...
    assert run() == first  # ... and the same ones again, the later episodes of each game included


def test_episodes_record_their_actions_and_how_they_ended_on_live_games():
    from rl_baseline.sf.skill_eval import run_skill_episodes
    from rl_baseline.tasks.detectors import ending_of

    class Pray:  # a Monk praying on every turn angers the god within a few turns
        def act(self, obs):
            return [action_index("pray")] * len(obs)

        def episode_ended(self, i):
            pass

    envs = [held("discoverer", max_episode_steps=200)]
    try:
        result = run_skill_episodes(envs, Pray(), "discoverer", 2, seed=1, progress=False)
    finally:
        envs[0].close()
    summary = result.summary()
    assert [e.actions for e in result.episodes] == [{"pray": e.length} for e in result.episodes]
    assert summary["action_shares"] == {"pray": 1.0}
    assert summary["endings"] == {"angered its god (prayer)": 2} and summary["deaths"] == 2
    # the other endings
    assert ending_of(["You faint from lack of food.", "You die from starvation."], "game") == "starved"
    assert ending_of(["The jackal bites!", "You die..."], "game") == "killed by a monster"
    assert ending_of(["The jackal bites!"], "step_limit") == "step limit"
    assert ending_of(["You ascend!"], "game") == "other"


def test_ascender_starts_deeper_and_a_death_there_is_final_and_climbs_nothing():
    env = held("ascender", start_depth=3)
    try:
        obs, info = _reset(env, 7)
        assert info["depth"] == 3 and info["skill"] == "ascender"
        assert int(env.unwrapped.current_observation()["blstats"][12]) == 3
        pray = action_index("pray")
        for _ in range(200):  # praying again and again angers the god until the hero dies
            _, _, term, trunc, info = env.step(pray)
            if term or trunc:
                break
        assert term and int(info["end_status"]) == 1, "the hero should die, not be offered to live on"
        # the final step reports depth 0: not a climb of three levels
        assert info["episode_extra_stats"]["measures/ascender/levels_ascended"] == 0
    finally:
        env.close()


def test_shop_greeting_format():
    # shk.c u_entered_shop: "%s, %s!  Welcome%s to %s %s!"
    assert is_shop_greeting("Hello, Agent!  Welcome to Asidonhopo's general store!")
    assert is_shop_greeting("Hello, Agent!  Welcome again to Izchaks' lighting store!")
    assert not is_shop_greeting("Pilgrim, you enter a sacred place!")
    assert not is_shop_greeting("You hear someone cursing shoplifters.")


def test_forced_skill_flags_are_checked():
    with pytest.raises(ConfigError, match="--eval_skill 'juggler'"):
        parse_cfg(["--evaluation", "True", "--eval_skill", "juggler"])
    with pytest.raises(ConfigError, match="trained with 2 skill"):
        parse_cfg(["--evaluation", "True", "--eval_skill", "merchant", "--num_skills", "2"])
    with pytest.raises(ConfigError, match="--evaluation True"):
        parse_cfg(["--eval_skill", "descender"])
    cfg = parse_cfg(["--evaluation", "True", "--eval_skill", "ascender"])
    env_cfg = SkillEnvConfig.from_cfg(cfg)
    assert env_cfg.forced_skill == "ascender" and env_cfg.start_depth == 3 and env_cfg.task is None
    cfg = parse_cfg(["--evaluation", "True", "--eval_skill", "descender"])
    assert SkillEnvConfig.from_cfg(cfg).start_depth == 1


def test_confidence_intervals_and_the_verdict():
    """A count over 3 held episodes (0, 0, 753 cells per 1000 steps): Student's t put its interval at [-829, 1331];
    the interval of a non-negative measure stays within what was observed, and the report names its method."""
    from orchestration.skill_report import beats, report_markdown
    from rl_baseline.sf.skill_eval import SkillEpisode, SkillEvalResult, format_measure

    def episode(cells: float) -> SkillEpisode:
        return SkillEpisode(measures={"cells_per_1000_steps": cells, "cells_revealed": cells, "new_levels": 0.0},
                            length=500, ended_by="step_limit", start_depth=1, max_depth=1, intrinsic_return=0.0,
                            nonzero_fraction=0.0)

    result = SkillEvalResult("discoverer", "trained", [episode(0.0), episode(0.0), episode(753.0)])
    stat = result.summary()["measures"]["cells_per_1000_steps"]
    lo, hi = stat["ci95"]
    assert stat["mean"] == 251.0 and 0.0 <= lo < 251.0 < hi <= 753.0
    assert stat["ci_method"] == "bootstrap percentile (10,000 resamples, seed 0)"
    assert result.summary()["measures"]["cells_per_1000_steps"]["ci95"] == [lo, hi]  # seeded: the same each time
    assert format_measure(stat) == f"251 [{lo:.3g}, {hi:.3g}]" and "-" not in format_measure(stat)
    one = SkillEvalResult("discoverer", "trained", [episode(5.0)]).summary()["measures"]["new_levels"]
    assert np.isnan(one["ci95"][0]) and format_measure(one) == "0"
    report = {"policy_dir": "p", "episodes": 3, "policies": ["trained"], "interval_method": stat["ci_method"],
              "skills": {"discoverer": {"main_measure": "cells_per_1000_steps",
                                        "policies": {"trained": result.summary()}}}}
    md = report_markdown(report)
    assert "mean [95% interval] per episode (bootstrap percentile (10,000 resamples, seed 0))" in md
    assert "never below zero" in md
    far = {"mean": 10.0, "ci95": [9.0, 11.0]}
    near = {"mean": 8.5, "ci95": [7.0, 9.5]}
    low = {"mean": 1.0, "ci95": [0.5, 1.5]}
    assert beats(far, low) is True and beats(far, near) is False  # overlapping intervals are no win
    assert beats({"mean": 1.0, "ci95": [float("nan")] * 2}, low) is None


def test_a_report_of_the_references_alone_names_no_checkpoint_and_no_verdict():
    """``scripts.skill_report --policies untrained,random`` (the references for a trained policy held elsewhere) once
    printed "checkpoint at None env steps" and a `trained > random` column of n/a; a report with both names both."""
    from orchestration.skill_report import report_markdown
    from rl_baseline.sf.skill_eval import SkillEpisode, SkillEvalResult

    def summary(kind: str, cells: float) -> dict:
        episodes = [SkillEpisode(measures={"cells_per_1000_steps": c, "cells_revealed": c, "new_levels": 0.0},
                                 length=500, ended_by="game", start_depth=1, max_depth=1, intrinsic_return=0.0,
                                 nonzero_fraction=0.0) for c in (cells, cells + 1.0, cells + 2.0)]
        return SkillEvalResult("discoverer", kind, episodes).summary()

    refs = {"policy_dir": "p", "episodes": 3, "policies": ["untrained", "random"], "trained_skill_reward": "progress",
            "skills": {"discoverer": {"main_measure": "cells_per_1000_steps",
                                      "policies": {"untrained": summary("untrained", 1.0),
                                                   "random": summary("random", 2.0)}}}}
    md = report_markdown(refs)
    assert "None" not in md and "trained > random" not in md and "`trained` column" not in md
    assert "not evaluated here: --policies untrained,random" in md
    table = "| skill | measure | untrained | random |\n|---|---|---|---|\n| discoverer | **cells_per_1000_steps** | 2 ["
    assert table in md
    full = dict(refs, policies=["trained", "random"], env_steps=1000, skills={"discoverer": {
        "main_measure": "cells_per_1000_steps", "trained_beats_random": True,
        "policies": {"trained": summary("trained", 9.0), "random": summary("random", 2.0)}}})
    md = report_markdown(full)
    assert "checkpoint at 1000 env steps" in md and "| trained > random |" in md
    assert "cells_per_1000_steps** | 10 [" in md and md.rstrip("\n").count("| yes |") == 1
