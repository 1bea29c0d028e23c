"""One home for size checks (common.flag_checks): every entry point refuses the same nonsense with exit 2 and a
message naming the flag, before it writes anything."""
from __future__ import annotations

import pytest

from common.flag_checks import FlagError, at_least, check_llm_client, check_training_sizes, output_file, output_folder
from common.llm import BackendError, make_backend
from scripts import annotate_pairs, annotate_pairs_dataset, llm_policy
from scripts import main as main_script
from scripts import pipeline as pipeline_script


def test_the_rules() -> None:
    at_least("x", 1, 1)
    with pytest.raises(FlagError, match=r"^--x must be at least 1, got 0$"):
        at_least("x", 0, 1)
    with pytest.raises(FlagError, match="--x must be at least 1, got None"):
        at_least("x", None, 1)
    with pytest.raises(FlagError, match="--timeout must be more than 0 .*got 0"):
        check_llm_client(4, 0, 0)
    with pytest.raises(FlagError, match="--max_retries must be at least 0 .*got -1"):
        check_llm_client(4, 10, -1)

    class Namespace:
        train_for_env_steps, num_workers, batch_size = 100, 2, 0

    with pytest.raises(FlagError, match="--batch_size must be at least 1"):
        check_training_sizes(Namespace())
    check_training_sizes(Namespace(), ["train_for_env_steps", "num_workers"])


def test_output_paths_are_checked_without_writing_anything(tmp_path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    changed = tmp_path.stat().st_mtime_ns
    assert output_folder("--out", tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert output_file("--out", tmp_path / "new" / "x.json") == tmp_path / "new" / "x.json"
    assert sorted(tmp_path.iterdir()) == [a_file] and tmp_path.stat().st_mtime_ns == changed  # nothing written
    with pytest.raises(FlagError, match=f"^--out {a_file}: a file, not a folder$"):
        output_folder("--out", a_file)
    with pytest.raises(FlagError, match=f"^--out {a_file}/sub: {a_file} is a file, not a folder$"):
        output_folder("--out", a_file / "sub")
    with pytest.raises(FlagError, match=f"^--plot {a_file}/x.png: {a_file} is a file, not a folder$"):
        output_file("--plot", a_file / "x.png")
    with pytest.raises(FlagError, match=r"^--out /proc/x/y: cannot be written: creating a file in /proc fails \("):
        output_folder("--out", "/proc/x/y")
    with pytest.raises(FlagError, match=f"^--out {tmp_path}: a folder, not a file$"):
        output_file("--out", tmp_path)
    with pytest.raises(FlagError, match=f"^--out {a_file}: already exists; pass --force to replace it$"):
        output_file("--out", a_file, overwrite=False, remedy="pass --force to replace it")
    assert output_file("--out", a_file) == a_file and a_file.read_text() == "kept"
    with pytest.raises(KeyError, match="--out"):  # the caller's error type
        output_folder("--out", a_file, KeyError)


@pytest.mark.parametrize("flag, value, message", [
    ("--train_for_env_steps", "-100", "--train_for_env_steps must be at least 1 (env steps to train for), got -100"),
    ("--num_workers", "0", "--num_workers must be at least 1"),
    ("--num_envs_per_worker", "0", "--num_envs_per_worker must be at least 1"),
    ("--rollout", "0", "--rollout must be at least 1"),
    ("--max_episode_steps", "0", "--max_episode_steps must be at least 1, got 0"),
])
def test_training_refuses_sizes_below_one(tmp_path, capsys, flag, value, message) -> None:
    """It exited 0 with a 'trained' experiment for --train_for_env_steps -100."""
    rc = main_script.main(["--train_dir", str(tmp_path), "--experiment", "x", "--device", "cpu", flag, value])
    assert rc == 2
    assert f"error: {message}" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_the_pipeline_uses_the_same_rule(tmp_path, capsys) -> None:
    rc = pipeline_script.main(["--preset", "ci", "--out_dir", str(tmp_path / "run"), "--train_for_env_steps", "-100"])
    assert rc == 2
    assert "--train_for_env_steps must be at least 1 (env steps to train for), got -100" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--concurrency", "0"], "--concurrency must be at least 1 (requests in flight at once), got 0"),
    (["--max_retries", "-1"], "--max_retries must be at least 0 (retries per failed request), got -1"),
    (["--timeout", "0"], "--timeout must be more than 0 (seconds per request), got 0.0"),
    (["--batch_size", "0"], "--batch_size must be at least 1, got 0"),
])
def test_annotation_refuses_client_settings_that_cannot_work(tmp_path, capsys, args, message) -> None:
    """--max_retries -1 ended in a raw AssertionError, --timeout 0 in urllib3's text, --concurrency 0 was taken."""
    base = ["--goal_key", "descender", "--directory", str(tmp_path / "og"), "--preference_dir", str(tmp_path / "pref"),
            "--backend", "openai", "--base_url", "http://127.0.0.1:9/v1"]
    assert annotate_pairs.main(base + args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "pref").exists()
    motif = ["--directory", str(tmp_path / "motif"), "--backend", "openai", "--base_url", "http://127.0.0.1:9/v1"]
    assert annotate_pairs_dataset.main(motif + args) == 2
    assert message in capsys.readouterr().err


def test_the_client_itself_and_the_llm_policy_refuse_them_too(capsys) -> None:
    with pytest.raises(BackendError, match="--concurrency must be at least 1"):
        make_backend("openai", base_url="http://127.0.0.1:9/v1", concurrency=0, check_connection=False)
    with pytest.raises(BackendError, match="--timeout must be more than 0"):
        make_backend("hf", base_url="http://127.0.0.1:9/v1", timeout=0)
    rc = llm_policy.main(["--eval_target", "gnomish", "--backend", "stand_in", "--concurrency", "0"])
    assert rc == 2 and "error: --concurrency must be at least 1" in capsys.readouterr().err


def test_msg_max_keys_has_one_default() -> None:
    """The flag, the environment's configuration and the reward classes read one constant (it was 20 in three)."""
    import inspect

    from rl_baseline.sf.cfg import SkillEnvConfig, parse_cfg
    from rl_baseline.skills import MSG_MAX_KEYS
    from rl_baseline.skills.intrinsic_reward import IntrinsicReward

    assert MSG_MAX_KEYS == 20  # the release's value
    assert parse_cfg([]).msg_max_keys == SkillEnvConfig().msg_max_keys == MSG_MAX_KEYS
    assert inspect.signature(IntrinsicReward).parameters["msg_max_keys"].default == MSG_MAX_KEYS
