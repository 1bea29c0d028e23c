"""Converting the authors' release checkpoints gives what it gave before the skills became files (commit 3f94365).

The two converters of the release read the skill order: ``scripts.convert_release_rewards`` finds the runs of a
release ``skill_rewards`` folder in skill order and writes each skill's index into its checkpoint;
``scripts.convert_release_policy`` writes the experiment's config, whose per-skill lists (the threshold quantiles
by default, the reward directories, the progress scales) follow the skill order, and the policy's one-hot input
``i`` means ``SKILLS[i]``. For the five designed skills, with fixed fake release files:

* the reward conversion writes the same files in the same order, and each converted checkpoint holds the same
  tensors (names, dtypes, shapes, bytes), the same optimizer moments and the same metadata (skill, skill index,
  experiment, reward mean and variance, quantiles, ...); each quantile CSV is byte-identical;
* the policy conversion writes the same checkpoint (tensors, Adam moments, steps, learning rate) and the same
  skill-ordered and network fields in its config, with the same skill order; the config's new ``skill_set``
  record names the designed five in that order;
* the comparison catches a reordering: with copies of the skill files whose ``discoverer`` and ``descender``
  swap indexes (``MAESTROMOTIF_SKILLS``, in a subprocess), the two skills' reward checkpoints, the order of the
  written files and the policy's config no longer match, while what does not depend on the order (the other
  three reward checkpoints, the policy's weights) still does.

Torch files are not compared byte for byte: ``torch.save`` through the converters' atomic writes names the zip
entries after a random temporary file, and the reward checkpoints keep the absolute source path, so two
conversions of the same input differ in raw bytes. Each output is hashed instead by :func:`digest` (tensors by
name, dtype, shape and ``.numpy().tobytes()``, in sorted key order; numbers, strings and lists as they are; the
temporary folder written as ``<tmp>``). The fake release weights are small integers over powers of two drawn with
a fixed torch seed (``torch.randint``, unlike ``torch.randn``, goes through no vectorised log/sin, so the bytes do not
depend on the CPU's vector instructions), in the release layouts that tests/test_release_reward.py and tests/test_release_policy.py write out.

The expected values were computed by running :func:`conversion_digests` of this file in a checkout of commit
3f94365 (the code before the skill files; its release tests are those imported here)::

    cd <checkout of 3f94365> && python -c "import importlib.util as u, json, sys, tempfile; \\
        s = u.spec_from_file_location('conv', '<this file>'); m = u.module_from_spec(s); s.loader.exec_module(m); \\
        print(json.dumps(m.conversion_digests(tempfile.mkdtemp()), indent=1))"
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from common.vocabulary import SKILLS
from tests.test_release_policy import RELEASE_SHAPES as POLICY_SHAPES
from tests.test_release_reward import RELEASE_SHAPES as REWARD_SHAPES
from tests.test_release_reward import write_release_run

REPO = Path(__file__).resolve().parents[1]
DESIGNED = ("discoverer", "descender", "ascender", "worshipper", "merchant")

# ------------------------------------------------------------------ the fake release
#: per skill of the release's skill_rewards folder: the weights' seed, the saved reward mean and variance (listed
#: out of skill order on purpose: the written order is the converter's)
REWARD_RUNS: dict[str, tuple[int, float, float]] = {
    "merchant": (14, -0.5, 0.25),
    "ascender": (12, -0.3, 0.5),
    "discoverer": (10, 0.7, 2.25),
    "worshipper": (13, 0.125, 1.0),
    "descender": (11, 1.5, 4.0),
}
POLICY_SEED = 7
#: the config fields compared: every one that lists or counts the skills, and the ones that make the network the
#: release's (the other fields are the project's training defaults, not the conversion's result)
CONFIG_FIELDS = (
    "num_skills", "reward_dir", "reward_dirs", "eps_threshold_quantile", "threshold_quantiles", "progress_scale",
    "progress_scales", "eval_skill", "train_skill", "skill_policy_dirs", "skill_policy_list",
    "env", "encoder_arch", "use_rnn", "rnn_type", "rnn_size", "rnn_num_layers", "actor_critic_share_weights",
    "normalize_input", "learning_rate", "adam_beta1", "adam_beta2", "adam_eps",
    "experiment", "train_dir", "converted_from", "cli_args",
)
#: the Adam settings a converter carries; the other keys of a param group are torch's (new torch versions add some)
OPTIMIZER_GROUP_KEYS = ("params", "lr", "betas", "eps", "weight_decay")

# ------------------------------------------------------------------ expected: computed at commit 3f94365
EXPECTED_REWARD_FILES: list[tuple[str, str]] = [
    ("llama3_discoverer_default/checkpoint_p0/checkpoint_000003600.pth",
     "fb9aed99bb1c9348889f5c19c7fa192931d6f6be787b24d40f67bd611d639875"),
    ("llama3_discoverer_default/reward_metrics/train_norm_quantiles.csv",
     "46325d1cebb55ff52cd4246eab722ac1fd1f5739c3a64742be865944ca379ad6"),
    ("llama3_descender_default/checkpoint_p0/checkpoint_000003600.pth",
     "098513cbe46c098e27307094d3371963409e0aff4c3a1b7461c0527061b284ac"),
    ("llama3_descender_default/reward_metrics/train_norm_quantiles.csv",
     "46325d1cebb55ff52cd4246eab722ac1fd1f5739c3a64742be865944ca379ad6"),
    ("llama3_ascender_default/checkpoint_p0/checkpoint_000003600.pth",
     "6fc9e42e2f3cb80f871cabd2baa7d0ae129480b1d1895dc179e8b20c6c1899eb"),
    ("llama3_ascender_default/reward_metrics/train_norm_quantiles.csv",
     "46325d1cebb55ff52cd4246eab722ac1fd1f5739c3a64742be865944ca379ad6"),
    ("llama3_worshipper_default/checkpoint_p0/checkpoint_000003600.pth",
     "e37dd99ea3700e51fca2849230908e3e49ab1ac8a84daa5a03e947ff8aa70318"),
    ("llama3_worshipper_default/reward_metrics/train_norm_quantiles.csv",
     "46325d1cebb55ff52cd4246eab722ac1fd1f5739c3a64742be865944ca379ad6"),
    ("llama3_merchant_default/checkpoint_p0/checkpoint_000003600.pth",
     "3de8b86b305d5205af30763cccc88e65f1118aac6ddf7f10a2a98592ce2d4b86"),
    ("llama3_merchant_default/reward_metrics/train_norm_quantiles.csv",
     "46325d1cebb55ff52cd4246eab722ac1fd1f5739c3a64742be865944ca379ad6"),
]
EXPECTED_POLICY: dict[str, str] = {
    "checkpoint": "c87f15d6c9577ff64b003c4a8494f6a9739b6154ad1bd21455e23091c4172730",
    "config": "d5d148fda3089f98fb955d6af96b4f79a3a087089e49d039375058ca53a42d44",
}


def _values(shape: tuple[int, ...], gen: torch.Generator, scale: float) -> torch.Tensor:
    """Integers from -64 to 63 times a power of two: the same bytes on every machine."""
    return torch.randint(-64, 64, shape, generator=gen).to(torch.float32) * scale


def _weights(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {name: _values(shape, gen, 2.0 ** -10) for name, shape in shapes.items()}


def release_policy_checkpoint(seed: int = POLICY_SEED) -> dict[str, Any]:
    """The release's policy checkpoint layout (tests/test_release_policy.py), after one Adam step."""
    model = _weights(POLICY_SHAPES, seed)
    model["encoder.char_lt.weight"][0] = 0.0  # padding_idx=0
    params = [torch.nn.Parameter(t.clone()) for t in model.values()]
    opt = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-6)
    gen = torch.Generator().manual_seed(seed + 1)
    for p in params:
        p.grad = _values(tuple(p.shape), gen, 2.0 ** -8)
    opt.step()
    return {"train_step": 976563, "env_steps": 4000002048, "model": model, "optimizer": opt.state_dict()}


# ------------------------------------------------------------------ hashing
def _feed(h: "hashlib._Hash", obj: Any, root: str) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu").contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}:".encode())
        h.update(t.numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}:".encode())
        for key in sorted(obj, key=lambda k: (type(k).__name__, str(k))):
            _feed(h, key, root)
            _feed(h, obj[key], root)
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}:".encode())
        for item in obj:
            _feed(h, item, root)
    elif isinstance(obj, str):
        text = obj.replace(root, "<tmp>").encode()
        h.update(f"S{len(text)}:".encode() + text)
    elif obj is None or isinstance(obj, (bool, int, float)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    else:
        raise TypeError(f"cannot hash a {type(obj).__name__}")


def digest(obj: Any, root: str | Path) -> str:
    h = hashlib.sha256()
    _feed(h, obj, str(root))
    return h.hexdigest()


def _checkpoint_digest(path: Path, root: Path) -> str:
    state = torch.load(path, map_location="cpu", weights_only=True)
    groups = state["optimizer"]["param_groups"]
    state["optimizer"]["param_groups"] = [{k: g[k] for k in OPTIMIZER_GROUP_KEYS if k in g} for g in groups]
    return digest(state, root)


# ------------------------------------------------------------------ the two conversions
def convert_rewards(root: Path) -> list[tuple[str, str]]:
    """(path under the output folder, digest) of every file the reward converter writes, in its order."""
    from scripts.convert_release_rewards import main

    release, out = root / "release" / "skill_rewards", root / "skill_rewards"
    for skill, (seed, mean, var) in REWARD_RUNS.items():
        sd = _weights(REWARD_SHAPES, seed)
        sd["encoder.char_lt.weight"][0] = 0.0  # padding row
        write_release_run(release, skill, seed, mean=mean, var=var, sd=sd)
    written = main(["--release_dir", str(release), "--out_dir", str(out), "--no_progress"])
    files = []
    for path in written:
        if path.suffix == ".pth":
            files.append((path.relative_to(out).as_posix(), _checkpoint_digest(path, root)))
        else:
            files.append((path.relative_to(out).as_posix(), hashlib.sha256(path.read_bytes()).hexdigest()))
    return files


def convert_policy(root: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """Digests of the converted policy's checkpoint and config (its skill-ordered fields), and the config."""
    from scripts.convert_release_policy import main

    src = root / "release" / "checkpoint_000976563_4000002048.pth"
    src.parent.mkdir(parents=True, exist_ok=True)
    torch.save(release_policy_checkpoint(), src)
    # the reward directories as a user lists them (docs/phases.md), in the designed order
    reward_dirs = "[" + ",".join(str(root / "skill_rewards" / f"llama3_{s}_default") for s in DESIGNED) + "]"
    train_dir = root / "skill_policy"
    rc = main(["--checkpoint", str(src), "--train_dir", str(train_dir), "--experiment", "release",
               "--reward_dir", reward_dirs])
    assert rc == 0
    checkpoints = sorted((train_dir / "release" / "checkpoint_p0").glob("*.pth"))
    assert [p.name for p in checkpoints] == ["checkpoint_000976563_4000002048.pth"]
    config = json.loads((train_dir / "release" / "config.json").read_text())
    fields = {"skills": list(SKILLS), **{k: config[k] for k in CONFIG_FIELDS}}
    return {"checkpoint": _checkpoint_digest(checkpoints[0], root), "config": digest(fields, root)}, config


def conversion_digests(root: str | Path) -> dict[str, Any]:
    """Both conversions of the fake release into ``root``; what the test compares (also run at commit 3f94365)."""
    root = Path(root)
    rewards = convert_rewards(root)
    policy, _ = convert_policy(root)
    return {"skills": list(SKILLS), "reward_files": rewards, "policy": policy}


# ------------------------------------------------------------------ the tests
def test_release_conversions_match_the_code_before_the_skill_files(tmp_path: Path) -> None:
    assert SKILLS == DESIGNED
    rewards = convert_rewards(tmp_path)
    assert rewards == [tuple(f) for f in EXPECTED_REWARD_FILES]
    policy, config = convert_policy(tmp_path)
    assert policy == EXPECTED_POLICY
    # the field only the skill files' code writes: the designed five, in their index order
    assert [(r["name"], r["index"]) for r in config["skill_set"]] == [(s, i) for i, s in enumerate(DESIGNED)]


def test_a_changed_skill_order_is_caught(tmp_path: Path) -> None:
    from common.skill_files import DEFAULT_SKILLS_DIR, SKILLS_ENV

    skills = tmp_path / "skills"
    skills.mkdir()
    swap = {"discoverer": ("index = 0", "index = 1"), "descender": ("index = 1", "index = 0")}
    for path in sorted(DEFAULT_SKILLS_DIR.glob("*.toml")):
        text = path.read_text(encoding="utf-8")
        if path.stem in swap:
            old, new = swap[path.stem]
            assert text.count(f"\n{old}  #") == 1
            text = text.replace(f"\n{old}  #", f"\n{new}  #")
        (skills / path.name).write_text(text, encoding="utf-8")
    result = tmp_path / "digests.json"
    program = ("import json, sys\n"
               "from tests.test_skill_files_conversion import conversion_digests\n"
               "open(sys.argv[2], 'w').write(json.dumps(conversion_digests(sys.argv[1])))\n")
    env = {**os.environ, SKILLS_ENV: str(skills), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path / "out"), str(result)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    swapped = json.loads(result.read_text())
    assert swapped["skills"] == ["descender", "discoverer", "ascender", "worshipper", "merchant"]

    expected = dict(map(tuple, EXPECTED_REWARD_FILES))
    got = dict(map(tuple, swapped["reward_files"]))
    assert set(got) == set(expected)  # the same files...
    assert [f for f, _ in swapped["reward_files"]] != [f for f, _ in EXPECTED_REWARD_FILES]  # ...in another order
    changed = sorted(f for f in expected if got[f] != expected[f])
    assert changed == ["llama3_descender_default/checkpoint_p0/checkpoint_000003600.pth",
                       "llama3_discoverer_default/checkpoint_p0/checkpoint_000003600.pth"]  # their skill_index
    assert swapped["policy"]["checkpoint"] == EXPECTED_POLICY["checkpoint"]  # the weights are the same
    assert swapped["policy"]["config"] != EXPECTED_POLICY["config"]  # what the one-hot means is not


if __name__ == "__main__":  # python -m tests.test_skill_files_conversion: the digests of this checkout
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(conversion_digests(tmp), indent=1))
