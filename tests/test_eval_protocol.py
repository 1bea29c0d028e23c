"""The release's evaluation protocol: its per-task rules (on live wizard-mode games and on
info sequences), the last-N-episodes statistic under a step budget, the evaluation loop, the
JSON sections and the flags."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from common.vocabulary import EVAL_TASKS, INTERACTION_TASKS, TASK_MEASURE
from rl_baseline.envs.overview import GNOMISH_MINES, overview_has_text, parse_overview
from rl_baseline.evaluation import (
    run_evaluation,
    summarize,
    write_results,
)
from rl_baseline.sf.cfg import check_eval_args
from rl_baseline.tasks.detectors import make_task_tracker
from rl_baseline.tasks.release_protocol import (
    CLASS_BASE_PRICES,
    DESCEND_MESSAGE,
    RELEASE_ENV_STEPS,
    RELEASE_NUM_ENVS,
    RELEASE_RULES,
    RELEASE_STATS_AVG,
    make_release_tracker,
    release_price_identified,
    release_window,
)

PROMPT = "Beware, there will be no return!  Still climb? [yn] (n)"


def _info(**kw) -> dict:
    base = {"depth": 1, "dungeon_number": 0, "dungeon_level": 1, "gold": 0, "xp_level": 1,
            "time": 1, "hunger": 1, "kill": 0, "kills": 0, "just_eaten": False, "message": "",
            "messages": [], "branch_depth": -2, "overview": "", "end_status": 0}
    base.update(kw)
    return base


def _overview(depth: int, mines: tuple[int, int] | None = None) -> str:
    text = f"The Dungeons of Doom: levels 1 to {depth}\n   Level {depth}: <- You are here."
    if mines is not None:
        text += f"\nThe Gnomish Mines: levels {mines[0]} to {mines[1]}\n   Level {mines[1]}:"
    return text


def descend_info(**kw) -> dict:
    return _info(messages=[DESCEND_MESSAGE], **kw)


# ============================================================================ the rule table


def test_rule_table_covers_every_task_with_the_releases_metric():
    assert set(RELEASE_RULES) == set(EVAL_TASKS)
    assert {t: r.metric for t, r in RELEASE_RULES.items() if r.count_key} == {
        "transactions": "num_sold", "price": "num_price_id", "buc": "num_buc"}
    assert all(RELEASE_RULES[t].reached_at_first_check for t in INTERACTION_TASKS)
    assert {t for t, r in RELEASE_RULES.items() if r.every_step} == {"goldenexit", "levelupsell"}
    assert (RELEASE_ENV_STEPS, RELEASE_NUM_ENVS, RELEASE_STATS_AVG) == (3_000_000, 480, 1000)
    for task in EVAL_TASKS:
        t = make_release_tracker(task)
        assert t.measure == TASK_MEASURE[task] and not t.done and t.value == 0.0
    with pytest.raises(ValueError, match="gnomish.*discoveryhunger"):
        make_release_tracker("oracle")
    # the release's price table holds exactly the base prices of our tables
    assert CLASS_BASE_PRICES == {
        "potion": {50, 100, 150, 200, 250, 300}, "scroll": {20, 50, 60, 80, 100, 200, 300},
        "ring": {100, 150, 200, 300}, "cloak": {50, 60}, "boots": {8, 30, 50},
        "wand": {100, 150, 175, 200, 500}, "helmet": {10, 50}}


def test_delphi_is_level_7_in_the_overview_on_a_stair_descent():
    t = make_release_tracker("delphi")
    t.update(_info(depth=7, overview=_overview(7)))  # arrived without the descent message
    assert not t.reached
    t.update(descend_info(depth=17, overview=_overview(17)))  # "Level 17" is not "Level 7"
    assert not t.reached
    t.update(_info(depth=7, messages=["You fall down the stairs."], overview=_overview(7)))
    assert not t.reached
    t.update(descend_info(depth=7, overview=_overview(7)))
    assert t.reached and t.done and t.value == 1.0 and t.checks == 2
    # a level 7 in the Mines counts as well: the release only reads the overview
    m = make_release_tracker("delphi")
    m.update(descend_info(depth=7, dungeon_number=2, overview=_overview(3, mines=(4, 7))))
    assert m.reached
    # the project's definition wants the Oracle
    p = make_task_tracker("delphi")
    p.update(descend_info(depth=7, overview=_overview(7)))
    assert not p.success


def test_gnomish_and_minetown_strings():
    g = make_release_tracker("gnomish")
    g.update(descend_info(depth=3, overview=_overview(3)))
    assert not g.reached
    g.update(descend_info(depth=4, dungeon_number=2, overview=_overview(3, mines=(4, 4))))
    assert g.reached
    # the minetown strings are the Mines header showing the third Mines level as the deepest
    for first in range(2, 7):
        for deepest in range(first, first + 5):
            text = _overview(first - 1, mines=(first, deepest))
            t = make_release_tracker("minetown")
            t.update(descend_info(depth=deepest, dungeon_number=2, overview=text))
            assert parse_overview(text).dungeon_ranges[GNOMISH_MINES] == (first, deepest)
            assert t.reached == (deepest == first + 2 and first <= 4), (first, deepest)


def test_interaction_episodes_end_at_the_first_descent_with_their_counts():
    sale = "You sold a jade ring for 50 gold pieces."
    t = make_release_tracker("transactions")
    t.update(_info(messages=[sale]))
    t.update(_info(messages=["Scroll labeled FOO; you sold it for 10 gold pieces."]))
    assert t.count == 2 and not t.done
    t.update(_info(skill_preconditions=(False, True)))
    t.update(descend_info(depth=2))
    assert t.done and t.reached and t.count == 2 and t.value == 2.0 and t.shop_seen
    t.update(_info(messages=[sale]))  # the release had ended the episode: nothing changes
    assert t.count == 2 and t.steps == 4
    rec = t.episode_record()
    assert rec["reached"] and rec["count"] == 2 and rec["seen"] is True and rec["counts"]["num_sold"] == 2


def test_price_rule_counts_a_sale_right_after_an_identifying_offer():
    offer = "Asidonhopo offers {p} gold pieces for your {item}.  Sell it? [ynaq] (y)"
    assert release_price_identified(offer.format(p=25, item="scroll labeled KIRJE"))  # 50: light
    assert release_price_identified(offer.format(p=50, item="jade ring"))  # 100: seven rings, still "identified"
    assert release_price_identified(offer.format(p=10, item="scroll of light"))  # 20; known types count too
    assert not release_price_identified(offer.format(p=37, item="jade ring"))  # 74 is no ring price
    assert not release_price_identified(offer.format(p=50, item="potion of healing"))  # class word not last
    assert not release_price_identified(offer.format(p=25, item="tattered cape"))
    assert release_price_identified(offer.format(p=15, item="pair of jumping boots"))
    assert not release_price_identified("Asidonhopo offers 20 gold pieces for your jade rings.  Sell them?")
    assert not release_price_identified("You see here 3 gold pieces.") and not release_price_identified("")
    sold = "You sold a jade ring for 50 gold pieces."
    t = make_release_tracker("price")
    t.update(_info(messages=[offer.format(p=50, item="jade ring")]))
    t.update(_info(messages=[sold]))
    assert t.count == 1 and t.counts["num_sold"] == 1 and t.counts["num_sell"] == 1
    t.update(_info(messages=[offer.format(p=50, item="jade ring")]))
    t.update(_info(messages=["You hear someone counting money."]))  # declined: the offer is forgotten
    t.update(_info(messages=[sold]))
    assert t.count == 1 and t.counts["num_sold"] == 2


def test_buc_rule_needs_the_drop_action_and_an_unnamed_status():
    t = make_release_tracker("buc")
    flash = "There is a black flash as a jade ring hits the altar."
    t.update(_info(messages=[flash]), "north")  # not a drop
    t.update(_info(messages=["There is an amber flash as a blessed jade ring hits the altar."]), "drop")
    t.update(_info(messages=["An uncursed dagger lands on the altar."]), "drop")
    assert t.count == 0
    t.update(_info(messages=[flash], skill_preconditions=(True, False)), "drop")
    t.update(_info(messages=["A dagger lands on the altar."]), "drop")
    assert t.count == 2 and t.altar_seen and not t.shop_seen


def test_goldenexit_prerequisites_then_the_exit_question():
    t = make_release_tracker("goldenexit")
    t.update(_info(messages=[PROMPT]))
    assert not t.reached
    for i in range(25):
        t.update(_info(depth=1 + (i % 3), gold=30, messages=["You kill the newt!"]))
    assert t.kills == 25 and t.max_depth == 3 and t.prerequisite_met
    t.update(_info(gold=30, messages=["You climb up the stairs."]))
    assert not t.reached
    t.update(_info(gold=30, messages=[PROMPT]))
    assert t.reached and t.done
    # the gold counted is the current gold, not the most ever held
    poor = make_release_tracker("goldenexit")
    for i in range(25):
        poor.update(_info(depth=3, gold=30 if i < 5 else 5, messages=["The gnome is destroyed!"]))
    assert not poor.prerequisite_met
    # the step that meets the prerequisites does not check yet
    late = make_release_tracker("goldenexit")
    for _ in range(24):
        late.update(_info(depth=3, gold=20, messages=["You kill the newt!"]))
    late.update(_info(gold=20, messages=["You kill the jackal!", PROMPT]))
    assert late.prerequisite_met and not late.reached


def test_levelupsell_sale_then_301_steps():
    t = make_release_tracker("levelupsell")
    t.update(_info(depth=3, messages=["You sold a dagger for 2 gold pieces."]))  # no level checks
    assert t.prerequisite_met and t.survived == 0
    for _ in range(300):
        t.update(_info(depth=3))
    assert not t.reached
    t.update(_info(depth=3))
    assert t.reached and t.survived == 301
    dead = make_release_tracker("levelupsell")
    dead.update(_info(messages=["You sold a dagger for 2 gold pieces."]))
    for _ in range(300):
        dead.update(_info())
    dead.update(_info(end_status=1))  # the game ends on the step that would have reached
    assert not dead.reached


def test_overview_keys_into_an_open_prompt_are_counted_after_the_prerequisite():
    """The release types "#overview" and Return on every checking step of levelupsell and goldenexit, also into a
    question or --More-- the agent's last key left open (Return sells at "Sell it? [ynaq] (y)"). We read the
    overview without keys and count those steps instead."""
    t = make_release_tracker("levelupsell")
    t.update(_info(prompt_open=True))  # before the prerequisite the release types nothing
    t.update(_info(messages=["You sold a dagger for 2 gold pieces."]))
    t.update(_info(prompt_open=True, messages=["Shopkeeper offers 5 gold pieces for your ring.  Sell it? [ynaq] (y)"]))
    t.update(_info())
    record = t.episode_record()
    assert (record["overview_keys_into_prompt"], record["prompt_open_steps"], record["steps"]) == (1, 2, 4)
    gnomish = make_release_tracker("gnomish")  # checks on stair descents only: no keys every step
    gnomish.update(descend_info(prompt_open=True, depth=2))
    assert gnomish.episode_record()["overview_keys_into_prompt"] == 0


def test_discoveryhunger_eat_in_the_mines_then_level_7():
    t = make_release_tracker("discoveryhunger")
    t.update(descend_info(depth=7, overview=_overview(7)))
    assert not t.reached  # not eaten yet
    t.update(_info(depth=3, just_eaten=True))  # outside the Mines
    assert not t.prerequisite_met
    t.update(_info(depth=4, dungeon_number=2, just_eaten=True, hunger=1))  # not hungry: still counts
    assert t.ate_in_mines
    t.update(descend_info(depth=6, overview=_overview(6)))
    assert not t.reached
    t.update(descend_info(depth=7, overview=_overview(7)))
    assert t.reached


# ============================================================================ the statistic


def _rec(reached: bool, count: int = 0, seen: bool = True, key: str = "num_sold") -> dict:
    counts = {"num_buc": 0, "num_sold": 0, "num_price_id": 0, "num_sell": 0}
    counts[key] = count
    return {"reached": reached, "count": count, "counts": counts, "shop_seen": seen, "altar_seen": seen,
            "seen": seen}


def test_release_window_is_the_last_n_finished_episodes():
    eps = [_rec(r) for r in (True, True, False, False, True)]
    w = release_window("gnomish", eps, stats_avg=3)
    assert w.values == [0.0, 0.0, 1.0] and w.indices == [2, 3, 4] and w.mean == pytest.approx(1 / 3)
    assert release_window("gnomish", eps, stats_avg=1000).mean == pytest.approx(0.6)
    assert np.isnan(release_window("gnomish", [], 5).mean)
    with pytest.raises(ValueError, match="stats_avg"):
        release_window("gnomish", eps, 0)


def test_release_window_counts_only_shop_seen_episodes_with_the_releases_queue():
    eps = [_rec(True, 2), _rec(True, 4, seen=False), _rec(False, 1), _rec(True, 3)]
    w = release_window("transactions", eps, stats_avg=10)
    assert w.values == [2.0, 1.0, 3.0] and w.indices == [0, 2, 3] and w.mean == pytest.approx(2.0)
    assert w.reached_rate == pytest.approx(0.75)
    # a full queue: the unseen episode's append pushes out the oldest value, then it is popped
    w = release_window("transactions", eps, stats_avg=2)
    assert w.indices == [2, 3] and w.values == [1.0, 3.0]
    w = release_window("transactions", [_rec(True, 2), _rec(True, 1), _rec(True, 4, seen=False)], stats_avg=2)
    assert w.indices == [1] and w.values == [1.0] and len(w.reached) == 2
    # buc uses the altar flag
    w = release_window("buc", [_rec(True, 1, key="num_buc"), _rec(True, 5, seen=False, key="num_buc")], 10)
    assert w.values == [1.0]


# ============================================================================ the loop


class FakeEnv:
    """Episodes of fixed lengths; a stair descent on step ``descend_at`` of every episode."""

    def __init__(self, lengths: list[int], descend_at: int | None = None, sale_every: int | None = None) -> None:
        self.lengths = list(lengths)
        self.episode = -1
        self.t = 0
        self.descend_at = descend_at
        self.sale_every = sale_every
        self.preconds = (False, True)
        self.death_message = ""

    def reset(self, seed=None):
        self.episode += 1
        self.t = 0
        return {"x": np.zeros(1)}, _info()

    def step(self, action):
        self.t += 1
        msgs = []
        if self.sale_every and self.t % self.sale_every == 0:
            msgs.append("You sold a dagger for 2 gold pieces.")
        if self.descend_at is not None and self.t == self.descend_at:
            msgs.append(DESCEND_MESSAGE)
        length = self.lengths[self.episode % len(self.lengths)]
        end = self.t >= length
        if end and self.death_message:
            msgs.append(self.death_message)
        return {"x": np.zeros(1)}, 0.0, end, False, _info(messages=msgs, end_status=1 if end else 0)


class FakePolicy:
    def __init__(self) -> None:
        self.ended: list[int] = []

    def act(self, obs):
        return np.zeros(len(obs), dtype=np.int64)

    def episode_ended(self, i):
        self.ended.append(i)


def test_budget_counts_only_finished_episodes_and_averages_the_last_n():
    # game 0: episodes of 3 steps; game 1: one episode of 100 steps that never finishes
    envs = [FakeEnv([3]), FakeEnv([100])]
    run = run_evaluation(envs, FakePolicy(), "gnomish", protocol="release", env_steps=20, progress=False)
    assert run.env_steps_run == 20 and run.env_step_budget == 20
    # 10 steps each: game 0 finished 3 episodes (9 steps) and has 1 step of a 4th; game 1 none
    assert len(run.episodes) == 3 and run.unfinished == 2
    assert all(e.length == 3 and e.ended_by == "game" for e in run.episodes)
    summary = summarize("gnomish", "success", run.episodes, (), protocol="release", stats_avg=2, run=run)
    assert summary["release"]["episodes"] == 2 and summary["release"]["finished_episodes"] == 3
    assert summary["run"] == {"num_envs": 2, "env_step_budget": 20, "env_steps_run": 20,
                              "finished_episodes": 3, "unfinished_episodes": 2}
    assert [e["in_window"] for e in summary["per_episode"]] == [False, True, True]


def test_episodes_say_how_they_ended():
    """A task evaluation that scores 0 is read by how its episodes ended: each records a death's cause."""
    starving, stepping = FakeEnv([3]), FakeEnv([4])
    starving.death_message = "You die from starvation."
    run = run_evaluation([starving, stepping], FakePolicy(), "gnomish", protocol="release", env_steps=16,
                         progress=False)
    assert sorted({(e.length, e.ending) for e in run.episodes}) == [(3, "starved"), (4, "other")]
    s = summarize("gnomish", "success", run.episodes, (), protocol="release", stats_avg=1000, run=run)
    assert s["endings"] == {"starved": 2, "other": 2}
    assert [e["ending"] for e in s["per_episode"]] == [e.ending for e in run.episodes]
    descending = FakeEnv([50], descend_at=7)
    run = run_evaluation([descending], FakePolicy(), "transactions", protocol="release", env_steps=20, progress=False)
    assert summarize("transactions", "count", run.episodes, (), protocol="release")["endings"] == {"release": 2}


def test_release_protocol_ends_interaction_episodes_at_the_descent():
    env = FakeEnv([50], descend_at=7, sale_every=2)
    run = run_evaluation([env], FakePolicy(), "transactions", protocol="release", env_steps=30, progress=False)
    assert [e.length for e in run.episodes] == [7, 7, 7, 7] and run.unfinished == 1
    assert all(e.ended_by == "release" and e.release["reached"] for e in run.episodes)
    assert all(e.release["counts"]["num_sold"] == 3 and e.release["shop_seen"] for e in run.episodes)
    assert all(e.count == 3 for e in run.episodes)  # the project's count over the same (cut) episode
    s = summarize("transactions", "count", run.episodes, (), protocol="release", stats_avg=1000, run=run)
    assert s["protocol"] == s["episodes_ended_by"] == "release"
    assert s["mean"] == s["release"]["mean"] == 3.0 and s["release"]["reached_rate"] == 1.0
    assert s["project"]["mean"] == 3.0 and s["project"]["episodes"] == 4
    # where the episodes got to: one descent each, read by the release tracker for every task
    assert s["depth"]["episodes"] == 4 and s["depth"]["descents_per_episode"] == 1.0
    assert s["depth"]["entered_mines_rate"] == 0.0


def test_project_protocol_runs_episodes_and_freezes_the_release_rule():
    env = FakeEnv([50], descend_at=7, sale_every=2)
    policy = FakePolicy()
    run = run_evaluation([env], policy, "transactions", protocol="project", episodes=2, progress=False)
    assert [e.length for e in run.episodes] == [50, 50] and run.env_step_budget is None
    assert all(e.count == 25 and e.release["counts"]["num_sold"] == 3 for e in run.episodes)
    assert policy.ended == [0, 0]
    s = summarize("transactions", "count", run.episodes, (), protocol="project", stats_avg=1000, run=run)
    assert s["episodes_ended_by"] == "project" and s["mean"] == 25.0 and s["release"]["mean"] == 3.0
    with pytest.raises(ValueError, match="protocol"):
        run_evaluation([env], policy, "transactions", protocol="paper")


def test_json_and_csv_name_both_rule_sets(tmp_path):
    run = run_evaluation([FakeEnv([4], descend_at=2)], FakePolicy(), "delphi", protocol="release",
                         env_steps=12, progress=False)
    s = summarize("delphi", "success", run.episodes, ("discoverer",), protocol="release", stats_avg=10, run=run)
    s.update(code_seed=42, experiment="x", checkpoint="c.pth", env_steps=0, deterministic=False)
    paths = write_results(tmp_path / "delphi_seed42", s, ("discoverer",))
    data = json.loads(paths[0].read_text())
    for key in ("task", "measure", "protocol", "episodes_ended_by", "episodes", "mean", "stderr", "release",
                "project", "run", "per_episode", "episode_lengths", "skill_time_share"):
        assert key in data, key
    assert data["release"]["metric"] == "reached" and data["release"]["stats_avg"] == 10
    assert data["project"]["definitions"] == "rl_baseline.tasks.detectors"
    assert data["per_episode"][0]["release"]["reached"] is False  # no "Level 7" in the fake overview
    rows = paths[1].read_text().splitlines()
    assert rows[0].startswith("episode,success,count,value,length") and "release_reached" in rows[0]
    assert len(rows) == 1 + 3 + 2 and paths[2].stat().st_size > 0


# ============================================================================ flags


def test_flag_defaults_and_help():
    from rl_baseline.sf.cfg import parse_cfg

    cfg = parse_cfg(["--evaluation", "True", "--eval_target", "gnomish"])
    assert (cfg.eval_protocol, cfg.eval_env_steps, cfg.eval_stats_avg, cfg.eval_num_envs) == (
        "release", 3_000_000, 1000, 480)
    check_eval_args(cfg)
    cfg = parse_cfg(["--eval_protocol", "project", "--eval_episodes", "5", "--eval_env_steps", "3_000"])
    assert cfg.eval_protocol == "project" and cfg.eval_episodes == 5 and cfg.eval_env_steps == 3000
    check_eval_args(cfg)


@pytest.mark.parametrize("argv,flag", [
    (["--eval_env_steps", "-5"], "--eval_env_steps"),
    (["--eval_env_steps", "0"], "--eval_env_steps"),
    (["--eval_stats_avg", "0"], "--eval_stats_avg"),
    (["--eval_num_envs", "0"], "--eval_num_envs"),
    (["--eval_protocol", "project", "--eval_episodes", "-1"], "--eval_episodes"),
    (["--eval_episodes", "10"], "--eval_protocol project"),
    (["--eval_policy", "random", "--meta_policy", "llm", "--meta_llm_backend", "stand_in"], "--eval_policy"),
    (["--eval_policy", "untrained", "--skill_policy_dirs", "['a', 'b', 'c', 'd', 'e']"], "--eval_policy"),
])
def test_bad_eval_flags_exit_2_naming_the_flag(tmp_path, capsys, argv, flag):
    from scripts.main import main

    code = main(["--evaluation", "True", "--eval_target", "gnomish", "--device", "cpu",
                 "--train_dir", str(tmp_path), "--experiment", "none"] + argv)
    assert code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_unknown_protocol_is_refused_by_the_parser(capsys):
    from rl_baseline.sf.cfg import parse_cfg

    with pytest.raises(SystemExit) as exc:
        parse_cfg(["--eval_protocol", "paper"])
    assert exc.value.code == 2 and "--eval_protocol" in capsys.readouterr().err


def test_help_describes_the_flags(capsys):
    from rl_baseline.sf.cfg import parse_cfg

    with pytest.raises(SystemExit) as exc:
        parse_cfg(["--help"])
    assert exc.value.code == 0
    out = re.sub(r"\s+", " ", capsys.readouterr().out)
    for flag in ("--eval_protocol", "--eval_env_steps", "--eval_stats_avg", "--eval_num_envs", "--eval_episodes"):
        assert flag in out
    assert "3,000,000" in out and "24 workers x 20 envs" in out


# ============================================================================ live games (wizard mode)


CTRL_F, CTRL_T, CTRL_V = b"\x06", b"\x14", b"\x16"


def wizard_env(seed: int):
    from rl_baseline.envs import make_monk_env

    env = make_monk_env(max_episode_steps=5000, wizard=True)
    env.seed(seed, seed, reseed=False)
    _, info = env.reset()
    return env, info


def _hero(env) -> tuple[int, int]:
    bl = env.current_observation()["blstats"]
    return int(bl[0]), int(bl[1])


def _find(env, ch: str) -> list[tuple[int, int]]:
    ys, xs = np.nonzero(env.current_observation()["chars"] == ord(ch))
    return list(zip(xs.tolist(), ys.tolist()))


def _teleport_to(env, x: int, y: int) -> None:
    hx, hy = _hero(env)
    dx, dy = x - hx, y - hy
    seq = ("L" if dx > 0 else "H") * (abs(dx) // 8) + ("l" if dx > 0 else "h") * (abs(dx) % 8)
    seq += ("J" if dy > 0 else "K") * (abs(dy) // 8) + ("j" if dy > 0 else "k") * (abs(dy) % 8)
    env.wizard_keys(CTRL_T + seq.encode() + b".")
    assert _hero(env) == (x, y)


def _step(env, action: str) -> dict:
    from common.nethack.actions import action_index

    return env.step(action_index(action))[4]


def _descend(env, which: int = 0) -> dict:
    """Map the level, stand on a down staircase and take the agent's "down" action."""
    env.wizard_keys(CTRL_F)
    _teleport_to(env, *_find(env, ">")[which])
    return _step(env, "down")


def _special_levels(env) -> dict[str, tuple[str, int]]:
    """Wizard mode's level-teleport menu: level name -> (menu key, depth)."""
    nh = env.nethack
    out: dict[str, tuple[str, int]] = {}
    for k in CTRL_V + b"?\r":
        nh.step(k)
    for _ in range(3):
        text = "\n".join(bytes(r).decode("latin-1") for r in nh._obs_buffers["tty_chars"])
        for m in re.finditer(r"([a-zA-Z]) - [ *] (.+?): (-?\d+)", text):
            out.setdefault(m.group(2).strip(), (m.group(1), int(m.group(3))))
        nh.step(ord(">"))
    env.wizard_keys(b"\x1b")
    return out


def _enter_mines(env) -> tuple[int, dict]:
    """From the branch level, down the Mines staircase; returns (branch depth, info)."""
    key, branch = _special_levels(env)["Stair to The Gnomish Mines"]
    env.wizard_keys(CTRL_V + b"?\r" + key.encode())
    for which in range(2):
        env.wizard_level_teleport(branch)
        info = _descend(env, which)
        if info["dungeon_number"] == 2:
            return branch, info
    raise AssertionError("no staircase into the Mines on the branch level")


def test_live_delphi_level_7_by_stairs_only():
    env, info = wizard_env(seed=3)  # the Oracle is on DL 5
    try:
        rel, proj = make_release_tracker("delphi"), make_task_tracker("delphi")
        rel.reset(info)
        proj.reset(info)
        info = env.wizard_level_teleport(7)  # teleported: no descent message, no check
        rel.update(info)
        assert info["depth"] == 7 and overview_has_text(info["overview"], "Level 7") and not rel.reached
        env.wizard_level_teleport(6)
        info = _descend(env)
        rel.update(info, "down")
        proj.update(info, "down")
        assert info["depth"] == 7 and DESCEND_MESSAGE in info["messages"]
        assert rel.reached and rel.done and not proj.success
    finally:
        env.close()


def test_live_gnomish_on_the_descent_into_the_mines():
    env, info = wizard_env(seed=2)
    try:
        t = make_release_tracker("gnomish")
        t.reset(info)
        branch = _special_levels(env)["Stair to The Gnomish Mines"][1]
        info = _descend(env)  # level 1 to 2
        t.update(info, "down")
        assert info["depth"] == 2
        if branch > 2:
            assert not t.reached
        assert t.episode_record()["max_depth"] == 2 and t.episode_record()["descents"] == 1
        assert not t.episode_record()["entered_mines"]
        branch, info = _enter_mines(env)
        t.update(info, "down")
        assert info["depth"] == branch + 1 and t.reached
        assert parse_overview(info["overview"]).mines_visited
        # where the episode got to: the Mines' first level, by a second descent (teleports are not descents)
        record = t.episode_record()
        assert record["max_depth"] == branch + 1 and record["entered_mines"] and record["descents"] == 2
    finally:
        env.close()


@pytest.mark.parametrize("seed,branch_depth", [(3, 2), (6, 3), (2, 4)])  # the Mines entrance's depth
def test_live_minetown_is_the_third_mines_level_by_stairs(seed, branch_depth):
    env, info = wizard_env(seed=seed)
    try:
        branch, info = _enter_mines(env)
        reached = []
        for _ in range(3):  # Mines levels 1 to 2, 2 to 3, 3 to 4
            t = make_release_tracker("minetown")
            info = _descend(env)
            t.update(info, "down")
            reached.append(t.reached)
            first, deepest = parse_overview(info["overview"]).dungeon_ranges[GNOMISH_MINES]
            assert (first, deepest) == (branch + 1, info["depth"])
        assert reached == [False, branch <= 3, False], (branch, reached)
    finally:
        env.close()
    assert branch == branch_depth, "the seed's dungeon changed: pick seeds with the Mines on DL 2, 3 and 4"


def test_live_buc_episode_ends_at_the_first_descent_with_the_count():
    env, info = wizard_env(seed=5)
    try:
        t = make_release_tracker("buc")
        t.reset(info)
        env.wizard_wish("altar")
        env.wizard_wish("cursed ring of adornment")
        info = _step(env, "drop")
        info["skill_preconditions"] = (True, False)
        t.update(info, "drop")
        assert any("altar" in m for m in info["messages"]) and t.count == 1 and not t.done
        info = _descend(env)
        t.update(info, "down")
        assert t.done and t.count == 1 and t.episode_record()["seen"] is True
    finally:
        env.close()


def test_live_goldenexit_exit_question_on_level_1():
    env, info = wizard_env(seed=4)
    try:
        t = make_release_tracker("goldenexit")
        t.reset(info)
        for _ in range(25):
            t.update(_info(depth=3, gold=20, messages=["You kill the newt!"]))
        assert t.prerequisite_met
        info = _step(env, "up")  # the hero starts on level 1's up staircase
        assert any(PROMPT.split("!")[0] in m for m in info["messages"]) and info["depth"] == 1
        t.update(dict(info, gold=20), "up")
        assert t.reached
    finally:
        env.close()


from tests.test_detectors import recorded  # noqa: E402,F401  (a live Minetown game's shop messages)


def test_live_shop_messages_count_sales_and_price_ids(recorded):  # noqa: F811
    sales, price = make_release_tracker("transactions"), make_release_tracker("price")
    for key in ("offer_light", "decline", "offer_ring", "accept"):
        step = _info(messages=recorded[key])
        for t in (sales, price):
            t.update(step, "more")
    assert sales.count == 1 and not sales.done
    # the ring's offer (50 for a base price of 100) directly preceded the sale; the light scroll's
    # identifying offer was declined
    assert price.count == 1 and price.counts["num_sell"] == 2


def test_the_summary_gives_a_wilson_interval_for_success_and_a_bootstrap_one_for_counts():
    """Both stay in range on few episodes: a success rate within [0, 1], a count never below zero."""
    from common.estimates import BOOTSTRAP_METHOD, WILSON_METHOD, wilson_interval
    from rl_baseline.evaluation import EpisodeResult

    wins = [EpisodeResult(success=i == 0, count=0.0, value=0.0, length=10) for i in range(6)]
    s = summarize("gnomish", "success", wins, (), protocol="project")
    assert s["ci95"] == list(wilson_interval(1, 6)) and s["ci_method"] == WILSON_METHOD
    assert 0.0 <= s["ci95"][0] < s["mean"] < s["ci95"][1] <= 1.0
    counts = [EpisodeResult(success=False, count=c, value=0.0, length=10) for c in (0.0, 0.0, 9.0)]
    s = summarize("buc", "count", counts, (), protocol="project")
    assert s["ci_method"] == BOOTSTRAP_METHOD and 0.0 <= s["ci95"][0] < s["mean"] < s["ci95"][1] <= 9.0
    assert s["project"]["ci95"] == s["ci95"]


def test_progress_lines_are_logged_when_no_terminal_shows_a_bar(monkeypatch, caplog):
    """tqdm's bar is silent without a terminal (a batch job, a pipeline log): a logging line says how far the
    evaluation is, with episodes finished, the measured rate and the time left."""
    import io
    import logging
    import sys

    from common.progress import PROGRESS_INTERVAL_S

    assert 10 <= PROGRESS_INTERVAL_S <= 30
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # output redirected to a file: no terminal
    with caplog.at_level(logging.INFO, logger="rl_baseline.evaluation"):
        run_evaluation([FakeEnv([3])], FakePolicy(), "gnomish", protocol="release", env_steps=12,
                       progress_interval_s=0.0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("eval gnomish (release): ")]
    assert lines and lines[-1].startswith("eval gnomish (release): 12 of 12 env steps (100%), 4 episodes finished, ")
    assert re.search(r"[\d,]+ env steps/s, about 0 s left$", lines[-1]), lines[-1]
    assert lines[0].startswith("eval gnomish (release): 1 of 12 env steps (8%), 0 episodes finished")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rl_baseline.evaluation"):
        run_evaluation([FakeEnv([3])], FakePolicy(), "gnomish", protocol="project", episodes=2, progress_interval_s=0.0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("eval gnomish (project): ")]
    assert lines[-1].startswith("eval gnomish (project): 2 of 2 episodes (100%), ") and "env steps/s" in lines[-1]
    caplog.clear()
    # at the default interval a run of a few milliseconds says nothing; without progress, never
    with caplog.at_level(logging.INFO, logger="rl_baseline.evaluation"):
        run_evaluation([FakeEnv([3])], FakePolicy(), "gnomish", protocol="release", env_steps=12)
        run_evaluation([FakeEnv([3])], FakePolicy(), "gnomish", protocol="release", env_steps=12, progress=False,
                       progress_interval_s=0.0)
    assert not [r for r in caplog.records if r.getMessage().startswith("eval gnomish")]


def test_the_start_line_gives_protocol_games_budget_and_an_assumed_time():
    from rl_baseline.evaluation import ASSUMED_EVAL_ENV_STEPS_PER_S, evaluation_plan

    release = evaluation_plan("release", RELEASE_NUM_ENVS, 100, RELEASE_ENV_STEPS, RELEASE_STATS_AVG, 10_000)
    minutes = round(RELEASE_ENV_STEPS / ASSUMED_EVAL_ENV_STEPS_PER_S / 60)
    assert release.startswith("release protocol, 480 games, 3,000,000 env steps in all (the mean over the last "
                              f"1,000 finished episodes); about {minutes} min at an assumed "
                              f"{ASSUMED_EVAL_ENV_STEPS_PER_S:,} env steps/s (measured")
    project = evaluation_plan("project", 2, 6, RELEASE_ENV_STEPS, RELEASE_STATS_AVG, 500)
    assert project.startswith("project protocol, 6 episodes over 2 games (at most 3,000 env steps: 500 per "
                              "episode); at most about 2 s at an assumed")
    # the flags the run's config.json chose are named, those this protocol does not read left out
    saved = {"eval_protocol": "project", "eval_episodes": 6, "eval_num_envs": 2}
    assert evaluation_plan("project", 2, 6, 10, 10, 500, saved=saved).endswith(
        "; as the run's config.json chose: --eval_protocol project --eval_episodes 6 --eval_num_envs 2")
    assert evaluation_plan("release", 2, 6, 10, 10, 500, saved={"eval_episodes": 6}).endswith(
        "this run's own rate follows in its progress)")


def test_a_small_presets_run_evaluates_with_the_protocol_its_pipeline_used(tmp_path):
    """The smoke run's config.json held the release's protocol (480 games, 3M env steps, about half an hour):
    `scripts.main --evaluation True --eval_target gnomish` on its folder now evaluates as the smoke preset did."""
    from orchestration.pipeline import build_plan, make_config
    from rl_baseline.sf.cfg import parse_cfg, resolve_experiment_cfg

    def save(name: str, argv: list[str]) -> None:
        cfg = vars(parse_cfg(argv + ["--train_dir", str(tmp_path), "--experiment", name]))
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(cfg, default=str))

    smoke = make_config("smoke", out_dir=str(tmp_path / "smoke_out"))
    save("smoke", next(p for p in build_plan(smoke) if p.name == "train/skills").args)
    evaluated = resolve_experiment_cfg(tmp_path / "smoke", ["--eval_target", "gnomish"], files=False)
    assert (evaluated.eval_protocol, evaluated.eval_episodes, evaluated.eval_num_envs) == (
        "project", smoke.eval_episodes, smoke.eval_num_envs) == ("project", 6, 2)
    assert evaluated.eval_flags_from_saved == {"eval_protocol": "project", "eval_episodes": 6, "eval_num_envs": 2}
    # the evaluating command still wins, flag by flag
    given = resolve_experiment_cfg(tmp_path / "smoke", ["--eval_target", "gnomish", "--eval_num_envs", "4"],
                                   files=False)
    assert (given.eval_protocol, given.eval_episodes, given.eval_num_envs) == ("project", 6, 4)
    # the learn preset's own budget; a run trained without a protocol keeps the release's defaults
    learn = make_config("learn", out_dir=str(tmp_path / "learn_out"))
    save("learn", next(p for p in build_plan(learn) if p.name == "train/skills").args)
    evaluated = resolve_experiment_cfg(tmp_path / "learn", ["--eval_target", "gnomish"], files=False)
    assert (evaluated.eval_protocol, evaluated.eval_env_steps, evaluated.eval_num_envs) == ("release", 300_000, 16)
    save("plain", ["--max_episode_steps", "500"])
    evaluated = resolve_experiment_cfg(tmp_path / "plain", ["--eval_target", "gnomish"], files=False)
    assert (evaluated.eval_protocol, evaluated.eval_env_steps, evaluated.eval_num_envs) == (
        "release", RELEASE_ENV_STEPS, RELEASE_NUM_ENVS)
    assert evaluated.eval_flags_from_saved == {}
