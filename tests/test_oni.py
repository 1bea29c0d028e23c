"""Online intrinsic rewards (ONI): environments on live games, the label files, the annotator against a
real HTTP server on 127.0.0.1 (the project's rule-based stand-in, run as its own process so it can be
killed), the environment-side rewards, the flags, and end-to-end training runs (slow)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import gymnasium as gym
import pytest
from nle import nethack
from nle.env.tasks import TASK_ACTIONS

from bench.fixtures import free_port
from common.nethack.messages import encode_message
from rl_baseline.baselines.oni import env as oni_env
from rl_baseline.baselines.oni.annotator import Annotator, AnnotatorConfig
from rl_baseline.baselines.oni.rewards import OnlineReward, OnlineRewardConfig, bag_of_words, cosine
from rl_baseline.baselines.oni.store import JsonlTail, LabelStore, MessageSpool, read_stats

REPO = Path(__file__).resolve().parents[1]
MODEL = "stand-in"


@contextmanager
def stand_in_server(port: int, mode: str = "normal", log: Path | None = None) -> Iterator[subprocess.Popen]:
    cmd = [sys.executable, "-m", "scripts.serve_stand_in_llm", "--port", str(port), "--model", MODEL, "--mode", mode]
    if log is not None:
        cmd += ["--log", str(log)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from rl_baseline.baselines.oni.service import wait_for_server

        wait_for_server(f"http://127.0.0.1:{port}/v1", MODEL, timeout_s=30, poll_s=0.1)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def annotator(store: Path, port: int, kind: str = "online_cls", goals: tuple[str, ...] = ("make progress",),
              **kw) -> Annotator:
    cfg = AnnotatorConfig(store_dir=str(store), reward_type=kind, server_url=f"http://127.0.0.1:{port}/v1",
                          model=MODEL, goals=goals, batch_size=8, request_timeout_s=5, **kw)
    return Annotator(cfg)


def spool(store: Path, messages: list[str], skill: int = 0) -> None:
    s = MessageSpool(store)
    for m in messages:
        s.note(skill, m)
    s.flush()


def requests_in(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# ----------------------------------------------------------------------------- environments (live games)


def test_the_extended_action_set_is_onis():
    assert oni_env.EXTENDED_ACTIONS == tuple(TASK_ACTIONS) + (
        nethack.Command.CAST, nethack.Command.QUAFF, nethack.Command.PRAY, nethack.Command.PICKUP, nethack.Command.PAY)
    assert len(oni_env.EXTENDED_ACTIONS) == 28
    for name in oni_env.ONI_ENVS:
        env = gym.make(name)
        try:
            obs, info = env.reset(seed=0)
            assert env.action_space.n == 28 and env.unwrapped._max_episode_steps == 5000
            assert env.unwrapped.character == "mon-hum-neu-mal" and info["depth"] == 1
        finally:
            env.close()


def _idx(action: int) -> int:
    return oni_env.EXTENDED_ACTIONS.index(action)


def test_eat_prompt_takes_the_first_item_with_y_and_any_other_action_cancels():
    env = oni_env.make_oni_env("NetHackScoreExtendedActions-v1")
    try:
        env.seed(3, 4, reseed=False)
        env.reset()
        eat, nw, south = _idx(nethack.Command.EAT), _idx(nethack.CompassDirection.NW), _idx(nethack.CompassDirection.S)
        obs, *_ = env.step(eat)
        prompt = bytes(obs["message"])
        assert b"What do you want to eat?" in prompt, prompt
        letters = bytes(obs["inv_letters"]).rstrip(b"\0")
        _, _, _, _, info = env.step(south)  # anything but 'y' cancels: nothing eaten, the same inventory
        assert bytes(env.unwrapped.last_observation[env.unwrapped._observation_keys.index("inv_letters")]).rstrip(b"\0") == letters
        env.step(eat)
        time_before = info["time"]
        _, _, _, _, info = env.step(nw)  # 'y': the first item offered is eaten
        assert info["time"] > time_before or any("eat" in m.lower() for m in info["messages"]), info
    finally:
        env.close()


def _raw(env, keys: bytes) -> None:
    game = env.unwrapped
    obs = game.last_observation
    for key in keys:
        obs, done = game.nethack.step(int(key))
    game.last_observation = obs


_MOVES = {(-1, 0): nethack.CompassDirection.N, (1, 0): nethack.CompassDirection.S, (0, 1): nethack.CompassDirection.E,
          (0, -1): nethack.CompassDirection.W, (-1, 1): nethack.CompassDirection.NE,
          (-1, -1): nethack.CompassDirection.NW, (1, 1): nethack.CompassDirection.SE, (1, -1): nethack.CompassDirection.SW}


def _down_from_level_2(seed: int) -> tuple[float, bool, dict]:
    """Wizard mode: teleport to level 2, map it, walk to the nearest down staircase and take it."""
    from common.nethack.glyphs import game_tables
    from rl_baseline.collect.pathing import read_map, shortest_path

    env = oni_env.make_oni_env("NetHackStaircaseLvl3ExtendedActions-v1", wizard=True)
    try:
        env.seed(seed, seed + 1, reseed=False)
        env.reset()
        _raw(env, b"\x162\r")  # ^V: level teleport to 2
        _raw(env, b"\x06")  # ^F: map the level
        game = env.unwrapped
        for _ in range(400):
            if int(game.last_observation[game._internal_index][4]):  # standing on a down staircase
                break
            x, y = (int(v) for v in game.last_observation[game._blstats_index][:2])
            view = read_map(game.last_observation[game._glyph_index], game_tables())
            view.passable[y, x] = True
            path = shortest_path(view.passable | view.down_stairs, view.nodiag, (y, x), view.down_stairs)
            assert path, "no path to the down staircase"
            _, reward, terminated, _, info = env.step(_idx(_MOVES[(path[0][0] - y, path[0][1] - x)]))
            assert reward == 0.0 and not terminated and info["depth"] == 2
        _, reward, terminated, _, info = env.step(_idx(nethack.MiscDirection.DOWN))
        return reward, terminated, info
    finally:
        env.close()


@pytest.mark.game_calendar
def test_staircase_lvl3_pays_50_for_coming_down_the_stairs_onto_level_3_of_the_main_dungeon():
    reward, terminated, info = _down_from_level_2(13)
    assert any("You descend the stairs" in m for m in info["messages"]), info["messages"]
    assert (info["depth"], info["dungeon_number"], info["dungeon_level"]) == (3, 0, 3)
    assert reward == 50.0 and terminated
    # the Gnomish Mines' first level is 3 deep but level 1 of its branch: ONI's test reads the branch level
    reward, terminated, info = _down_from_level_2(11)
    assert (info["depth"], info["dungeon_number"], info["dungeon_level"]) == (3, 2, 1)
    assert reward == 0.0 and not terminated


class _WizardOni:
    """ONI's score environment in wizard mode, recording every screen a step shows (message, waiting for
    --More--, a question open)."""

    def __init__(self, seed: int) -> None:
        self.env = oni_env.make_oni_env("NetHackScoreExtendedActions-v1", wizard=True)
        self.env.seed(seed, seed + 1000, reseed=False)
        self.env.reset()
        self.screens: list[tuple[str, bool, bool]] = []
        press = self.env._press

        def recording_press(key: int):
            observation, done = press(key)
            internal = observation[self.env._internal_index]
            self.screens.append((bytes(observation[self.env._message_index]).rstrip(b"\0").decode("latin-1"),
                                 bool(internal[3]), bool(internal[1])))
            return observation, done

        self.env._press = recording_press

    def keys(self, keys: bytes) -> str:
        """Raw set-up keys (wizard commands), every --More-- dismissed; the last message."""
        game = self.env
        observation = game.last_observation
        for key in keys:
            observation, _ = game.nethack.step(key)
            while observation[game._internal_index][3]:
                observation, _ = game.nethack.step(32)
        game.last_observation = observation
        return bytes(observation[game._message_index]).rstrip(b"\0").decode("latin-1")

    def step(self, command: int):
        self.screens = []
        return self.env.step(_idx(command))

    @property
    def waiting(self) -> tuple[bool, bool]:
        """(--More-- waiting, a question open) at the end of the last step."""
        internal = self.env.last_observation[self.env._internal_index]
        return bool(internal[3]), bool(internal[1])

    def letter_of(self, word: str) -> bytes:
        game = self.env
        observation = game.last_observation
        letters = observation[game._observation_keys.index("inv_letters")]
        names = observation[game._observation_keys.index("inv_strs")]
        return next(bytes([int(l)]) for l, n in zip(letters, names) if word.encode() in bytes(n))


MAP_AND_GO_TO_DOWN_STAIRS = b"\x06\x14>."  # wizard mode: map the level, teleport onto a '>'


def test_oni_keeps_the_descent_message_through_a_second_more():
    """Arriving on a square with several objects shows "You descend the stairs." at a --More--, then the list of
    what is here at a second one: ONI reads the message at that second --More-- from the observation it already
    replaced, so the step's message is the descent. Before, the second --More-- dropped it."""
    game = _WizardOni(1)
    try:
        game.keys(MAP_AND_GO_TO_DOWN_STAIRS)
        game.step(nethack.MiscDirection.DOWN)
        for wish in (b"dagger", b"arrow", b"apple"):
            letter = game.keys(b"\x17" + wish + b"\r")[0].encode()
            game.keys(b"d" + letter)  # onto the up stairs of level 2, where the hero comes back down
        game.step(nethack.MiscDirection.UP)
        obs, _, _, _, info = game.step(nethack.MiscDirection.DOWN)
        assert [more for _, more, _ in game.screens[:2]] == [True, True]  # two --More-- in the step
        assert game.screens[0][0] == "You descend the stairs." and game.screens[1][0] != game.screens[0][0]
        assert bytes(obs["message"]).rstrip(b"\0") == b"You descend the stairs."
    finally:
        game.env.close()


def test_oni_stops_after_declining_a_question():
    """Wizard mode asks "Die?" when soldier ants kill the hero; ONI declines it and stops: the --More-- that
    follows ("OK, so you don't die.  The soldier ant stings! ...") waits for the agent's next key. Before, the
    loop went on through every later --More-- and "Die?" of the step."""
    game = _WizardOni(3)
    try:
        game.keys(b"\x07soldier ant\r" * 3)
        declined_then_more = 0
        for _ in range(150):
            _, _, terminated, _, _ = game.step(nethack.Command.SEARCH)
            assert not terminated
            asked = [i for i, (message, _, _) in enumerate(game.screens) if message.startswith("Die?")]
            if not asked:
                continue
            assert len(asked) == 1  # one question a step
            after = game.screens[asked[0] + 1:]
            assert len(after) == 1  # the escape was the step's last key
            if after[0][1]:
                assert game.waiting[0]  # the --More-- after it waits for the agent
                declined_then_more += 1
                if declined_then_more >= 2:
                    break
        assert declined_then_more >= 2
    finally:
        game.env.close()


def test_oni_checks_its_questions_against_the_kept_descent_message():
    """A descent onto a potion called "eat" that the nearly burdened hero picks up automatically: "You descend the
    stairs." at a --More--, then "You have a little trouble lifting a potion called eat.  Continue? [ynq] (q)".
    ONI checks the kept descent message against its list of the agent's questions, finds no "eat" and declines
    the question. Before, the question on screen was checked and left to the agent."""
    game = _WizardOni(1)
    try:
        game.keys(MAP_AND_GO_TO_DOWN_STAIRS)
        game.step(nethack.MiscDirection.DOWN)
        potion = game.keys(b"\x17potion of water\r")[0].encode()
        env = game.env
        for key in b"#name\r":  # the naming menu: no --More-- to dismiss here
            env.nethack.step(key)
        game.keys(b"o" + potion + b"eat\r")  # call the potion's type "eat"
        game.keys(b"d" + potion)
        for _ in range(12):  # nearly burdened: iron chains until burdened, then one back, rocks the same way
            if "load" in game.keys(b"\x17iron chain\r"):
                break
        game.keys(b"d" + game.letter_of("iron chain"))
        for _ in range(30):
            if "load" in game.keys(b"\x17rock\r"):
                break
        game.keys(b"d1" + game.letter_of("rock"))
        assert int(env.last_observation[env._blstats_index][22]) == 0  # unencumbered
        game.step(nethack.MiscDirection.UP)
        obs, _, _, _, info = game.step(nethack.MiscDirection.DOWN)
        assert game.screens[0] == ("You descend the stairs.", True, False)
        assert game.screens[1][0].startswith("You have a little trouble lifting a potion called eat.  Continue?")
        assert not game.waiting[1]  # declined within the step
        assert len(game.screens) == 3  # the escape ended the step (what it shows waits for the agent)
    finally:
        game.env.close()


# ----------------------------------------------------------------------------- the files


def test_tailing_reads_whole_lines_only_and_once(tmp_path):
    path = tmp_path / "labels.jsonl"
    tail = JsonlTail(path)
    assert tail.read() == []
    path.write_bytes(b'{"k": 0, "m": "a", "y": 1}\n{"k": 0, "m": "b"')
    assert tail.read() == [{"k": 0, "m": "a", "y": 1}]
    with path.open("ab") as fh:
        fh.write(b', "y": 0}\nnot json\n')
    assert tail.read() == [{"k": 0, "m": "b", "y": 0}] and tail.bad_lines == 1
    assert tail.read() == []


def test_a_damaged_label_file_keeps_its_good_labels_and_a_restarted_annotator_asks_only_for_the_rest(
        tmp_path, caplog):
    port, log, store = free_port(), tmp_path / "requests.jsonl", tmp_path / "oni"
    store.mkdir()
    (store / "labels.jsonl").write_bytes(
        b'{"k":0,"m":"You kill the newt!","y":1}\n'
        b'\x8f\x00\xff random bytes\n'
        b'{"k":"zero","m":"It\'s a wall.","y":0}\n'  # a field of the wrong type
        b'[1, 2]\n'
        b'{"k":0,"m":"12 gold pieces.","y":1}\n'
        b'{"k":0,"m":"You feel')  # cut short by a killed annotator
    labels = LabelStore(store)
    with caplog.at_level("WARNING"):
        assert labels.refresh() == 2
    assert labels.labels == {(0, "You kill the newt!"): 1, (0, "12 gold pieces."): 1} and labels.bad_lines == 3
    assert "labels.jsonl: 3 unreadable line(s) skipped" in caplog.text
    with stand_in_server(port, log=log):
        spool(store, ["You kill the newt!", "12 gold pieces.", "It's a wall."])
        restarted = annotator(store, port)
        assert restarted.round() == 1  # only the message whose label line was damaged
    assert len(requests_in(log)) == 1
    again = LabelStore(store)
    again.refresh()
    # the cut-short line is ended before the new label, so only it is lost
    assert again.labels[(0, "It's a wall.")] == 0 and len(again.labels) == 3 and again.bad_lines == 4


@pytest.mark.parametrize("damage", [b"", b"\x00" * 64, b'{"labels": 3, "latency', b"[1, 2]",
                                    b'{"labels": "many", "label_shares": [1], "malformed": NaN}'])
def test_a_damaged_stats_file_writes_no_scalar_it_cannot_read_and_never_stops_training(tmp_path, damage):
    from rl_baseline.sf.train import OnlineStatsObserver, log_online_summary

    class Writer:
        def __init__(self):
            self.scalars = {}

        def add_scalar(self, key, value, step):
            assert isinstance(value, float)
            self.scalars[key] = value

    store = tmp_path / "oni"
    store.mkdir()
    (store / "stats.json").write_bytes(damage)
    writer = Writer()
    OnlineStatsObserver(str(store)).extra_summaries(None, 0, writer, 100)
    log_online_summary(str(store))
    assert not any(k.startswith("oni/labels") or k.startswith("oni/label_share") for k in writer.scalars)


def test_a_damaged_online_network_file_keeps_the_previous_network(tmp_path, caplog):
    import os

    from rl_baseline.baselines.oni.models import OnlineTrainer
    from rl_baseline.baselines.oni.store import CLASSIFIER_FILE, RANKER_FILE

    store = tmp_path / "oni"
    store.mkdir()
    trainer = OnlineTrainer("classifier", lr=3e-3, batch_size=64, seed=0)
    trainer.add([(f"You kill the {m}!", 1) for m in ("newt", "rat", "gnome")] +
                [(f"It's {w}.", 0) for w in ("a wall", "dark", "a door")])
    for _ in range(60):
        trainer.step()
    path = store / CLASSIFIER_FILE
    trainer.save(path)
    good = path.read_bytes()
    r = OnlineReward(OnlineRewardConfig(str(store), "online_cls_reward_model", ("progress",)), beta=0.0,
                     llm_coef=1.0)
    r.reset()
    assert r.intrinsic(0, encode_message("You kill the jackal!"), 0) == 1.0
    network = r._model
    ranker = OnlineTrainer("ranker", lr=3e-3, batch_size=4, seed=0)
    ranker.save(store / RANKER_FILE)
    for step, damage in enumerate([good[: len(good) // 2], b"", os.urandom(len(good)), (store / RANKER_FILE).read_bytes()]):
        path.write_bytes(damage)
        os.utime(path, ns=(10**18 + step, 10**18 + step))  # a new version of the file
        caplog.clear()
        with caplog.at_level("WARNING"):
            r.refresh(force=True)
            r.refresh(force=True)  # the same damaged version: not read or reported again
        assert caplog.text.count("keeping the previous online network") == 1, damage[:20]
        assert r._model is network
        assert r.intrinsic(0, encode_message("You kill the jackal!"), 0) == 1.0
    path.write_bytes(good)
    os.utime(path, ns=(2 * 10**18, 2 * 10**18))
    r.refresh(force=True)
    assert r._model is not network  # a readable version is taken up again


# ----------------------------------------------------------------------------- the annotator (real HTTP)


def test_annotator_labels_each_new_message_once_also_across_a_restart(tmp_path):
    port, log = free_port(), tmp_path / "requests.jsonl"
    store = tmp_path / "oni"
    with stand_in_server(port, log=log):
        spool(store, ["You kill the newt!", "It's a wall.", "", "You kill the newt!"])
        first = annotator(store, port)
        assert first.round() == 3
        labels = LabelStore(store)
        labels.refresh()
        assert labels.labels == {(0, "You kill the newt!"): 1, (0, "It's a wall."): 0, (0, ""): 0}
        spool(store, ["It's a wall.", "12 gold pieces."])
        restarted = annotator(store, port)  # a new process: reads the store, asks only for what is new
        assert restarted.round() == 1
        asked = [r["prompt"] for r in requests_in(log)]
        assert len(asked) == 4 and sum("It's a wall." in p for p in asked) == 1
    lines = [json.loads(x) for x in (store / "labels.jsonl").read_text().splitlines()]
    assert len(lines) == len({(r["k"], r["m"]) for r in lines}) == 4


def test_garbage_answers_are_counted_and_given_up_after_three_tries(tmp_path):
    port, store = free_port(), tmp_path / "oni"
    with stand_in_server(port, mode="garbage"):
        spool(store, ["You kill the newt!", "It's a wall."])
        a = annotator(store, port)
        for _ in range(3):
            assert a.round() == 0
        a.write_stats(time.time(), force=True)
    stats = read_stats(store)
    assert stats["malformed"] == 6 and stats["given_up"] == 2 and stats["labels"] == 0 and stats["queue_length"] == 0


def test_server_down_is_an_outage_the_queue_waits_and_labels_resume(tmp_path):
    port, store = free_port(), tmp_path / "oni"
    spool(store, ["You kill the newt!", "12 gold pieces.", "It's a wall."])
    a = annotator(store, port)
    now = time.time()
    assert a.round(now) == 0  # nothing listens on the port
    assert a.stats.outages == 1 and len(a.pending) == 3 and a.outage_since is not None
    assert a.round(now + 0.1) == 0 and a.stats.outages == 1  # still the same outage, waiting to retry
    with stand_in_server(port):
        assert a.round(now + 120) == 3
    assert a.stats.outages == 1 and a.outage_since is None and not a.pending


def test_ranking_and_goal_answers_are_stored(tmp_path):
    port, store = free_port(), tmp_path / "oni"
    with stand_in_server(port):
        spool(store, ["You kill the newt!", "It's a wall.", "12 gold pieces.", "Hello"])
        ranker = annotator(store / "rank", port, kind="online_motif", pairs_per_refill=6)
        spool(store / "rank", ["You kill the newt!", "It's a wall.", "12 gold pieces.", "Hello"])
        assert ranker.round() > 0
        goals = annotator(store / "goals", port, kind="cosine-bow")
        spool(store / "goals", ["You kill the newt!"])
        assert goals.round() == 1
    ranked = LabelStore(store / "rank")
    ranked.refresh()
    for _, a, b, y in ranked.pairs:  # the stand-in prefers the message with more progress words
        from rl_baseline.baselines.oni.stand_in_server import score

        assert y == (0 if score(a) > score(b) else 1 if score(b) > score(a) else 2)
    proposed = LabelStore(store / "goals")
    proposed.refresh()
    assert proposed.goals[(0, "You kill the newt!")] == ["pick up the gold", "go down the stairs"]


# ----------------------------------------------------------------------------- environment side


def test_online_cls_reward_is_the_label_divided_by_the_count_cubed(tmp_path):
    store = tmp_path / "oni"
    LabelStore(store).append([{"k": 0, "m": "You kill the newt!", "y": 1}, {"k": 0, "m": "It's a wall.", "y": 0}])
    r = OnlineReward(OnlineRewardConfig(str(store), "online_cls", ("progress",)), beta=3.0, llm_coef=0.4,
                     msg_max_keys=-1)
    r.reset()
    values = [r.intrinsic(0, encode_message(m), 0) for m in
              ["You kill the newt!", "You kill the newt!", "It's a wall.", "never labelled"]]
    assert values == [1.0, 1.0 / 8, 0.0, 0.0]
    assert r.combine(5.0, values[0]) == pytest.approx(0.4)
    r.spool.flush()
    # only what still needs a label is announced, once
    assert [json.loads(x)["m"] for x in r.spool.path.read_text().splitlines()] == ["never labelled"]


def test_cosine_bow_compares_with_the_goals_proposed_for_the_previous_message(tmp_path):
    store = tmp_path / "oni"
    LabelStore(store).append([{"k": 0, "m": "You see a staircase.", "goals": ["go down the stairs"]}])
    r = OnlineReward(OnlineRewardConfig(str(store), "cosine-bow", ("collect gold",), bow_threshold=-0.5),
                     beta=0.0, llm_coef=1.0)
    r.reset()
    first = r.intrinsic(0, encode_message("You see a staircase."), 0)
    assert first == pytest.approx(cosine(bag_of_words("You see a staircase."), bag_of_words("collect gold")))
    down = r.intrinsic(0, encode_message("You go down the stairs."), 0)
    assert down == pytest.approx(cosine(bag_of_words("You go down the stairs."), bag_of_words("go down the stairs")))
    assert down > 0.8


def test_the_online_classifier_learns_its_labels():
    from rl_baseline.baselines.oni.models import OnlineTrainer

    trainer = OnlineTrainer("classifier", lr=3e-3, batch_size=64, seed=0)
    good = [f"You kill the {m}!" for m in ("newt", "jackal", "rat", "lichen", "gnome", "dwarf")]
    bad = [f"It's {w}." for w in ("a wall", "solid stone", "a door", "dark", "empty", "quiet")]
    trainer.add([(m, 1) for m in good] + [(m, 0) for m in bad])
    for _ in range(60):
        trainer.step()
    assert trainer.last_accuracy == 1.0 and trainer.last_loss < 0.3


# ----------------------------------------------------------------------------- flags


ONI_README_COMMAND = (
    "--train_dir DIR --llm_model Meta-Llama-3.1-8B-Instruct --llm_server_addr localhost --experiment default "
    "--root_env NetHackScoreExtendedActions-v1 --llm_reward_type online_cls --llm_reward_coeff 0.4 "
    "--extrinsic_reward_coeff 0.1 --wandb True --wandb_entity E --wandb_proj P"
).split()


def test_onis_readme_command_parses_to_onis_settings(tmp_path):
    from rl_baseline.sf.cfg import MOTIF_ENV, SkillEnvConfig, parse_cfg

    argv = [str(tmp_path) if a == "DIR" else a for a in ONI_README_COMMAND]
    cfg = parse_cfg(argv)
    assert cfg.env == MOTIF_ENV and cfg.root_env == "NetHackScoreExtendedActions-v1"
    assert (cfg.llm_reward_type, cfg.llm_reward, cfg.extrinsic_reward) == ("online_cls", 0.4, 0.1)
    assert cfg.llm_server_port == 9001 and cfg.msg_max_keys == -1 and cfg.max_episode_steps == 5000
    assert cfg.with_wandb and cfg.wandb_user == "E" and cfg.wandb_project == "P"
    env = SkillEnvConfig.from_cfg(cfg)
    # ONI's reward: the game reward unscaled (its --reward_scale 1), clipped to [-10, 10], times 0.1
    assert cfg.game_reward_scale == 1.0 and env.online_reward_type == "online_cls" and env.game_reward_clip == 10.0
    assert env.online_store_dir == str(tmp_path / "default" / "oni") and len(env.online_goals) == 1


@pytest.mark.parametrize("flags,named", [
    (["--llm_reward_type", "online_cls", "--root_env", "NetHackScoreExtendedActions-v1"], "--llm_server_addr"),
    (["--llm_reward_type", "none", "--root_env", "NetHackScoreExtendedActions-v1"], "--llm_reward_coeff 0"),
    (["--llm_reward_type", "online_motif", "--llm_server_addr", "h", "--llm_reward_coeff", "0",
      "--root_env", "NetHackScoreExtendedActions-v1"], "--llm_reward_type none"),
])
def test_bad_online_flags_are_refused_naming_the_flag(tmp_path, flags, named):
    from scripts.main import main

    code = main(flags + ["--train_dir", str(tmp_path), "--experiment", "bad", "--device", "cpu"])
    assert code == 2
    assert not (tmp_path / "bad").exists()


def test_training_waits_for_the_server_and_says_what_it_saw(tmp_path, caplog):
    from rl_baseline.baselines.oni.service import ServerError, wait_for_server

    port = free_port()
    with stand_in_server(port):
        with pytest.raises(ServerError, match="serves stand-in, not 'other-model'"):
            wait_for_server(f"http://127.0.0.1:{port}/v1", "other-model", timeout_s=0.5, poll_s=0.1)
    with pytest.raises(ServerError, match="died"):
        wait_for_server(f"http://127.0.0.1:{port}/v1", MODEL, timeout_s=5, poll_s=0.1, alive=lambda: False)


def test_the_launcher_waits_for_its_server_and_fails_when_it_dies(tmp_path):
    port = free_port()
    env = {"LLM_SERVER_CMD": f"{sys.executable} -m scripts.serve_stand_in_llm --port {port} --model {MODEL}",
           "LLM_SERVER_WAIT_S": "30", "PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(["bash", "scripts/launch_llm_server.sh", f"/models/{MODEL}", "1", str(port)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        deadline = time.time() + 30
        while "ready" not in line and time.time() < deadline:
            line = proc.stdout.readline()
        assert f"LLM server ready on port {port}" in line or "ready:" in line
    finally:
        proc.terminate()
        proc.wait(10)
    env["LLM_SERVER_CMD"] = f"{sys.executable} -c 'import sys; sys.exit(3)'"
    out = subprocess.run(["bash", "scripts/launch_llm_server.sh", f"/models/{MODEL}", "1", str(free_port())],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "died" in out.stderr



def _fake_vllm_on_path(tmp_path: Path) -> dict:
    """A `vllm` executable that records its arguments and serves the stand-in under the --served-model-name
    on the --port it was given (the launcher's own command line, served for real on 127.0.0.1)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "vllm"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'printf "%s\\n" "$@" > {tmp_path / "vllm_args.txt"}\n'
        'while [ $# -gt 0 ]; do case "$1" in --port) PORT=$2; shift;; --served-model-name) NAME=$2; shift;; esac; shift; done\n'
        f'exec {sys.executable} -m scripts.serve_stand_in_llm --port "$PORT" --model "$NAME"\n')
    script.chmod(0o755)
    return {"PATH": f"{bindir}:/usr/bin:/bin", "PYTHON": sys.executable, "LLM_SERVER_WAIT_S": "30"}


def _launch_until_ready(args: list[str], env: dict) -> None:
    proc = subprocess.Popen(["bash", "scripts/launch_llm_server.sh"] + args, cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line, deadline = "", time.time() + 30
        while "ready on port" not in line and time.time() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "LLM server ready on port" in line
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_launcher_runs_vllm_serve_with_a_context_that_fits_and_forwards_extra_arguments(tmp_path):
    env = _fake_vllm_on_path(tmp_path)
    port = free_port()
    # ONI's verbatim command: MODEL_PATH NUM_GPUS (and here the port)
    _launch_until_ready([f"/models/{MODEL}", "2", str(port)], env)
    args = (tmp_path / "vllm_args.txt").read_text().split("\n")
    assert args[:2] == ["serve", f"/models/{MODEL}"]
    line = " ".join(args)
    assert f"--served-model-name {MODEL}" in line and "--tensor-parallel-size 2" in line
    assert f"--port {port}" in line and "--max-model-len 8192" in line
    # extra arguments go to vllm serve as they are; a --max-model-len among them replaces the default
    _launch_until_ready([f"/models/{MODEL}", "1", str(free_port()), "--max-model-len", "4096",
                         "--gpu-memory-utilization", "0.85"], env)
    line = " ".join((tmp_path / "vllm_args.txt").read_text().split("\n"))
    assert "--max-model-len 4096 --gpu-memory-utilization 0.85" in line and "8192" not in line
    # FastChat mode is gone, and says so
    out = subprocess.run(["bash", "scripts/launch_llm_server.sh", f"/models/{MODEL}"], cwd=REPO,
                         env=dict(env, LLM_SERVER="fastchat"), capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "FastChat" in out.stderr


@pytest.mark.slow
def test_scripts_main_runs_as_a_file_from_anywhere(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "main.py"), "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--llm_reward_type" in out.stdout


# ----------------------------------------------------------------------------- end to end (slow)


def _train(tmp_path: Path, port: int, reward_type: str, steps: int = 3000, extra: list[str] | None = None,
           root_env: str = "NetHackScoreExtendedActions-v1") -> subprocess.Popen:
    argv = [sys.executable, "-m", "scripts.main", "--train_dir", str(tmp_path), "--experiment", reward_type,
            "--llm_model", MODEL, "--llm_server_addr", "127.0.0.1", "--llm_server_port", str(port),
            "--llm_reward_type", reward_type, "--llm_reward_coeff", "0.4", "--extrinsic_reward_coeff", "0.1",
            "--num_workers", "2", "--num_envs_per_worker", "2", "--batch_size", "256", "--rollout", "16",
            "--train_for_env_steps", str(steps), "--device", "cpu", "--llm_server_wait_s", "30",
            "--experiment_summaries_interval", "2"]
    argv += (["--root_env", root_env] if root_env else []) + (extra or [])
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _scalars(exp_dir: Path) -> dict:
    from orchestration.report import read_tensorboard_scalars

    return read_tensorboard_scalars(exp_dir, prefixes=("oni/",))


@pytest.mark.slow
@pytest.mark.parametrize("reward_type,root_env,extra", [
    ("online_cls", "NetHackScoreExtendedActions-v1", []),
    ("online_cls_reward_model", "NetHackStaircaseLvl3ExtendedActions-v1", []),
    ("online_motif", "NetHackOracleExtendedActions-v1", []),
    ("cosine-bow", "NetHackStaircaseLvl4ExtendedActions-v1", []),
    # MaestroMotif's skills with online labels: one label set per skill, no offline annotation phase
    ("online_cls", None, ["--env", "nle_skill", "--max_episode_steps", "200", "--llm_reward_coeff", "0.1"]),
])
def test_training_with_each_online_reward_type(tmp_path, reward_type, root_env, extra):
    port = free_port()
    with stand_in_server(port):
        proc = _train(tmp_path, port, reward_type, root_env=root_env, extra=extra)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    store = tmp_path / reward_type / "oni"
    stats = read_stats(store)
    assert stats["labels"] > 0 and stats["outages"] == 0, stats
    if reward_type in ("online_cls_reward_model", "online_motif"):
        assert (store / ("classifier.pt" if reward_type == "online_cls_reward_model" else "ranker.pt")).is_file()
    assert list((tmp_path / reward_type / "checkpoint_p0").glob("checkpoint_*.pth"))
    scalars = _scalars(tmp_path / reward_type)
    assert any(k.startswith("oni/labels") for k in scalars), sorted(scalars)[:20]
    assert "online annotation:" in out


@pytest.mark.slow
def test_server_killed_mid_run_training_survives_and_labels_resume_without_duplicates(tmp_path):
    port, log = free_port(), tmp_path / "requests.jsonl"
    store = tmp_path / "online_cls" / "oni"
    with stand_in_server(port, log=log):
        proc = _train(tmp_path, port, "online_cls", steps=12_000)
        deadline = time.time() + 300
        while time.time() < deadline and not (store / "labels.jsonl").exists():
            time.sleep(0.5)
        time.sleep(2)
    before = len((store / "labels.jsonl").read_text().splitlines())  # the server is down now
    time.sleep(8)
    assert proc.poll() is None, "training must go on without the server"
    with stand_in_server(port, log=log):
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    lines = [json.loads(x) for x in (store / "labels.jsonl").read_text().splitlines()]
    keys = [(r["k"], r["m"]) for r in lines]
    assert len(keys) == len(set(keys)), "a message was labelled twice"
    stats = read_stats(store)
    assert stats["outages"] >= 1 and stats["labels"] == len(lines)
    assert len(lines) >= before
    asked = [r["prompt"] for r in requests_in(log)]
    if len(asked) != len(set(asked)):
        # known defect, open (timing-dependent): after an outage the annotator sometimes asks the server again for
        # prompts it already had answered (a batch that failed part-way is retried whole); the labels stay unique
        pytest.xfail(f"{len(asked) - len(set(asked))} prompts asked again after the outage (known defect)")


@pytest.mark.slow
def test_a_server_answering_garbage_is_counted_and_training_continues(tmp_path):
    port = free_port()
    with stand_in_server(port, mode="garbage"):
        proc = _train(tmp_path, port, "online_cls")
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    stats = read_stats(tmp_path / "online_cls" / "oni")
    assert stats["malformed"] > 0 and stats["labels"] == 0
