"""--precision: the flag, the processor check, the network's dtypes under bf16, a learner step and a training run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.learner_step import build_learner, synthetic_batch
from common import precision
from common.precision import (
    CPU_BF16_FLAGS,
    CPUINFO_ENV,
    PrecisionError,
    cpu_bf16_flags,
    cpu_supports_bf16,
    resolve_precision,
    runnable_precision,
)
from common.vocabulary import NUM_SKILLS
from rl_baseline.sf.cfg import ConfigError, parse_cfg

SMALL = ["--batch_size", "64", "--rollout", "16", "--rnn_size", "64"]
needs_bf16 = pytest.mark.skipif(not cpu_supports_bf16(), reason="this processor has no bfloat16 instructions "
                                                                 f"(or {CPUINFO_ENV} names a file without them)")
#: the flags line of an Intel Xeon with AVX-512 but neither AVX-512 BF16 nor AMX (Cascade Lake)
XEON_WITHOUT_BF16 = ("flags\t\t: fpu vme sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma avx512f avx512dq avx512cd avx512bw "
                     "avx512vl avx512_vnni\n")


@pytest.fixture()
def no_bf16(monkeypatch):
    """A processor without bfloat16 instructions."""
    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda cpuinfo=precision.CPUINFO: ())


@pytest.fixture()
def with_bf16(monkeypatch):
    """A processor with AVX-512 BF16."""
    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda cpuinfo=precision.CPUINFO: ("avx512_bf16",))


@pytest.fixture()
def cpu_without_bf16(tmp_path, monkeypatch):
    """This process and the ones it starts see a processor with AVX-512 and no bfloat16 instructions: a fake
    /proc/cpuinfo named by MAESTROMOTIF_CPUINFO (the project's one reading of the processor's flags)."""
    info = tmp_path / "cpuinfo_without_bf16"
    info.write_text("processor\t: 0\n" + XEON_WITHOUT_BF16 + "\nprocessor\t: 1\n" + XEON_WITHOUT_BF16)
    monkeypatch.setenv(CPUINFO_ENV, str(info))
    return info


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n\nprocessor\t: 1\n"
                    "flags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n")
    assert cpu_bf16_flags(info) == ("avx512_bf16",)
    info.write_text("flags\t\t: fpu sse avx2 amx_tile amx_bf16\n")
    assert cpu_bf16_flags(info) == ("amx_bf16",)
    info.write_text("flags\t\t: fpu sse avx2 avx512f\n")
    assert cpu_bf16_flags(info) == ()


def test_the_variable_masks_the_processors_flags_and_a_missing_mask_is_an_error(tmp_path, monkeypatch):
    """MAESTROMOTIF_CPUINFO names the file read in place of /proc/cpuinfo, either way; a file it names that
    cannot be read is a one-line error naming the variable, never a silent read of the real processor."""
    info = tmp_path / "cpuinfo"
    info.write_text(XEON_WITHOUT_BF16)
    monkeypatch.setenv(CPUINFO_ENV, str(info))
    assert cpu_bf16_flags() == () and not cpu_supports_bf16()
    info.write_text(XEON_WITHOUT_BF16.replace("avx512_vnni", "avx512_vnni avx512_bf16"))
    assert cpu_bf16_flags() == ("avx512_bf16",) and cpu_supports_bf16()
    assert resolve_precision("auto", "cpu").precision == "bf16"
    monkeypatch.setenv(CPUINFO_ENV, str(tmp_path / "missing"))
    with pytest.raises(PrecisionError, match=f"{CPUINFO_ENV}=.*missing: cannot be read"):
        cpu_bf16_flags()
    assert resolve_precision("fp32", "cpu").precision == "fp32"  # fp32 asks nothing of the processor


def test_the_flag_parses_and_fp32_is_the_default(with_bf16):
    """fp32 by default (the paper's and the release's); bf16 and auto give bf16 on a CPU run with bfloat16
    instructions; a GPU run keeps fp32 under auto."""
    cfg = parse_cfg([])
    assert cfg.precision == "fp32" and cfg.compute_precision == "fp32"
    for value in ("bf16", "auto"):
        cfg = parse_cfg(["--precision", value, "--device", "cpu"])
        assert cfg.compute_precision == "bf16" and "avx512_bf16" in cfg.precision_reason
    assert resolve_precision("auto", "gpu").precision == "fp32"
    with pytest.raises(SystemExit):
        parse_cfg(["--precision", "fp16"])


def test_without_bfloat16_bf16_parses_and_is_refused_when_it_runs(cpu_without_bf16, capsys, tmp_path):
    """On a processor without bfloat16 a command with --precision bf16 still parses (it may be written for
    another machine); training it stops with status 2, one line naming the flag, before anything is written;
    auto falls back to fp32 and says why; an evaluation falls back too (it runs what this machine has)."""
    from scripts.main import main

    parsed = parse_cfg(["--precision", "bf16", "--device", "cpu"])
    assert parsed.precision == "bf16" and parsed.compute_precision == "fp32"
    assert parsed.precision_reason.startswith("fp32 instead of bf16")
    with pytest.raises(PrecisionError, match="--precision bf16"):
        resolve_precision("bf16", "cpu")
    capsys.readouterr()
    assert main(["--precision", "bf16", "--device", "cpu", "--train_dir", str(tmp_path / "runs"), "--llm_reward",
                 "0", "--skill_reward", "progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --precision bf16: this processor has no bfloat16 instructions")
    assert str(cpu_without_bf16) in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # refused before anything was written
    with pytest.raises(ConfigError, match="--precision bf16"):  # a tool that runs a learner here refuses too
        build_learner(SMALL + ["--precision", "bf16"], tmp_path / "bench")
    cfg = parse_cfg(["--precision", "auto", "--device", "cpu"])
    assert cfg.compute_precision == "fp32" and "no bfloat16 instructions" in cfg.precision_reason
    assert all(flag in cfg.precision_reason for flag in CPU_BF16_FLAGS)
    ev = parse_cfg(["--precision", "bf16", "--device", "cpu", "--evaluation", "True", "--eval_target", "gnomish"])
    assert ev.compute_precision == "fp32" and ev.precision_reason.startswith("fp32 instead of bf16")


def test_without_bfloat16_the_documented_bf16_commands_still_parse(cpu_without_bf16):
    from tests.test_readme import COMMANDS, command_errors

    assert not cpu_supports_bf16()
    bf16 = [c for c in COMMANDS if "bf16" in c.args]
    assert any(c.module == "scripts.main" for c in bf16) and any(c.module.startswith("bench.") for c in bf16)
    assert command_errors(bf16) == []


def test_without_bfloat16_the_learner_bench_times_fp32_alone_with_a_note(cpu_without_bf16, capsys):
    from bench import learner_step

    assert runnable_precision("bf16", "cpu")[0] == "fp32" and runnable_precision("auto", "cpu") == ("auto", None)
    learner_step.main(["--repeats", "1", "--batch_size", "4", "--rollout", "2", "--encoder_arch", "project"])
    out = capsys.readouterr().out.splitlines()
    notes = [line for line in out if line.startswith("note:")]
    assert len(notes) == 1 and "timing fp32 in place of bf16" in notes[0] and "no bfloat16" in notes[0]
    assert any(line.startswith("fp32: median") for line in out)
    assert not any(line.startswith(("bf16:", "bf16 / fp32")) for line in out)
    figures = json.loads(out[-1])
    assert figures["fp32_cpu_ms"] > 0 and figures["bf16_cpu_ms"] is None and figures["bf16_cpu_speedup"] is None
    assert "no bfloat16" in figures["precision_note"]


def test_without_bfloat16_the_training_bench_times_fp32_and_drops_a_pair_left_equal(cpu_without_bf16):
    """bench.train_throughput's documented pairs: bf16 against fp32 becomes fp32 alone (one run per repeat, not
    the same run twice); a pair of game counts in bf16 stays a pair, in fp32; where bf16 runs, nothing changes."""
    from bench.train_throughput import build_parser, fit_precisions_to_machine

    def fitted(line: str):
        args = build_parser().parse_args(line.split())
        return args, fit_precisions_to_machine(args)

    args, note = fitted("--encoder_arch release --precision bf16 --baseline_precision fp32")
    assert (args.precision, args.baseline_precision, args.no_baseline) == ("fp32", None, True)
    assert note.startswith("timing fp32 in place of bf16") and "this tree is timed alone" in note
    args, note = fitted("--precision bf16 --baseline_precision bf16 --num_envs_per_worker 16 "
                        "--baseline_num_envs_per_worker 8")
    assert (args.precision, args.baseline_precision, args.no_baseline) == ("fp32", "fp32", False)
    assert "timed alone" not in note
    args, note = fitted("--precision bf16 --worker_num_splits 1 --baseline_worker_num_splits 2")
    assert (args.precision, args.baseline_worker_num_splits, args.no_baseline) == ("fp32", 2, False)
    args, note = fitted("--baseline_precision bf16 --baseline_encoder_arch project --encoder_arch release")
    assert (args.baseline_precision, args.baseline_encoder_arch, args.no_baseline) == (None, "project", False)
    assert fitted("--precision auto --baseline_precision fp32") [1] is None
    cpu_without_bf16.write_text(XEON_WITHOUT_BF16.replace("avx512_vnni", "avx512_vnni avx512_bf16"))
    args, note = fitted("--encoder_arch release --precision bf16 --baseline_precision fp32")
    assert (args.precision, args.baseline_precision, args.no_baseline, note) == ("bf16", "fp32", False, None)


def test_bf16_on_a_gpu_without_bfloat16_is_refused_and_auto_keeps_fp32_there(monkeypatch):
    monkeypatch.setattr(precision, "gpu_supports_bf16", lambda: False)
    with pytest.raises(PrecisionError, match="--precision bf16: this GPU has no bfloat16"):
        resolve_precision("bf16", "gpu")
    assert resolve_precision("auto", "gpu").precision == "fp32"
    monkeypatch.setattr(precision, "gpu_supports_bf16", lambda: True)
    assert resolve_precision("bf16", "gpu").precision == "bf16"


def _obs(batch: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    message = torch.zeros(batch, 256, dtype=torch.uint8)
    message[::2, :30] = torch.randint(32, 127, (1, 30), generator=g, dtype=torch.uint8)
    return {
        "crop_chars": torch.randint(32, 127, (batch, 12, 12), generator=g, dtype=torch.uint8),
        "crop_colors": torch.randint(0, 16, (batch, 12, 12), generator=g, dtype=torch.uint8),
        "blstats": torch.randint(0, 30, (batch, 27), generator=g).float(),
        "message": message,
        "skill_onehot": torch.nn.functional.one_hot(torch.arange(batch) % NUM_SKILLS, NUM_SKILLS).float(),
        "skill_id": (torch.arange(batch) % NUM_SKILLS).float().unsqueeze(1),
        "monk_features": torch.zeros(batch, 3),
    }


@pytest.mark.parametrize("arch", ["release", "project"])
def test_the_network_under_bf16_computes_in_bfloat16_and_hands_on_float32(with_bf16, arch):
    """The same weights under bf16: every output (features, core output and states, logits, values) is float32,
    close to fp32's but not equal to it (the encoder and the core did compute in bfloat16); the gradients
    reaching the float32 weights are float32."""
    from sample_factory.model.model_utils import get_rnn_size

    from rl_baseline.models.autocast import AutocastCoreRNN
    from rl_baseline.sf.release_policy import build_release_actor_critic

    models = {}
    for p in ("fp32", "bf16"):
        cfg = parse_cfg(["--precision", p, "--device", "cpu", "--encoder_arch", arch])
        torch.manual_seed(0)
        models[p] = build_release_actor_critic(cfg)
    models["bf16"].load_state_dict(models["fp32"].state_dict())
    assert isinstance(models["bf16"].core, AutocastCoreRNN) and not isinstance(models["fp32"].core, AutocastCoreRNN)
    obs, h = _obs(24), torch.zeros(24, get_rnn_size(cfg))
    with torch.no_grad():
        out = {p: m(obs, h) for p, m in models.items()}
        features = {p: m.forward_head(obs) for p, m in models.items()}
    assert features["bf16"].dtype == torch.float32
    assert not torch.equal(features["bf16"], features["fp32"])
    assert torch.allclose(features["bf16"], features["fp32"], atol=0.05, rtol=0.05)
    assert out["bf16"]["log_prob_actions"].dtype == torch.float32  # of sampled actions: not comparable
    for key in ("action_logits", "values", "new_rnn_states"):
        assert out["bf16"][key].dtype == torch.float32, key
        assert torch.allclose(out["bf16"][key], out["fp32"][key], atol=0.05, rtol=0.05), key
    assert not torch.equal(out["bf16"]["action_logits"], out["fp32"]["action_logits"])
    model = models["bf16"]
    core_out, states = model.forward_core(model.forward_head(obs), h)
    assert core_out.dtype == states.dtype == torch.float32
    result = model.forward_tail(core_out, values_only=False, sample_actions=True)
    (result["action_logits"].logsumexp(-1).sum() + result["values"].sum()).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert len(grads) > 10 and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_under_autocast_the_crop_is_read_in_bfloat16_as_autocast_would_round_it():
    """The release encoder's pixels come in the first convolution's dtype: float32 (the rendered crop divided by
    255) without autocast, under autocast the same values rounded to bfloat16, so the convolution computes
    exactly what it computed on the float32 image."""
    from rl_baseline.sf.release_policy import build_release_actor_critic

    enc = build_release_actor_critic(parse_cfg(["--device", "cpu"])).encoder
    obs = _obs(6)
    reference = enc.render(obs["crop_chars"], obs["crop_colors"]).float() * (1.0 / 255.0)
    assert torch.equal(enc.pixels(obs["crop_chars"], obs["crop_colors"]), reference)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pixels = enc.pixels(obs["crop_chars"], obs["crop_colors"])
        assert pixels.dtype == torch.bfloat16 and torch.equal(pixels, reference.to(torch.bfloat16))
        # (the same memory layout: oneDNN sums in another order on a plain one)
        assert torch.equal(enc.crop_cnn(pixels), enc.crop_cnn(reference.contiguous(memory_format=torch.channels_last)))


def test_the_inference_workers_frozen_copy_keeps_bfloat16_weights_and_computes_the_same(with_bf16):
    """sample-factory's inference worker runs its own copy of the network (every parameter frozen) and loads the
    learner's float32 weights into it after each update: under bf16 that copy keeps its encoder's and core's
    weights in bfloat16 (autocast need not cast them at every call) and computes exactly what the learner's
    network computes under autocast, before and after an update; the learner's network stays float32."""
    from sample_factory.algo.utils.model_sharing import ParameterClientAsync, ParameterServer
    from sample_factory.model.model_utils import get_rnn_size
    from sample_factory.utils.timing import Timing

    from bench.learner_step import learner_env_info
    from rl_baseline.models.cdgpt5 import register_cdgpt5
    from rl_baseline.sf.release_policy import build_release_actor_critic

    cfg = parse_cfg(["--precision", "bf16", "--device", "cpu"])
    register_cdgpt5()
    torch.manual_seed(0)
    learner_net = build_release_actor_critic(cfg)
    versions = torch.zeros(1, dtype=torch.int32)
    client = ParameterClientAsync(ParameterServer(0, versions, serial_mode=True), cfg, learner_env_info(cfg), Timing())
    client.on_weights_initialized(learner_net.state_dict(), torch.device("cpu"), 0)
    copy = client.actor_critic
    obs, h = _obs(16), torch.zeros(16, get_rnn_size(cfg))
    for update in range(2):
        with torch.inference_mode():
            got, want = copy(obs, h), learner_net(obs, h)
        for key in ("action_logits", "values", "new_rnn_states"):
            assert torch.equal(got[key], want[key]), (update, key)
        assert {p.dtype for p in copy.encoder.parameters()} == {p.dtype for p in copy.core.parameters()} == {
            torch.bfloat16}
        assert copy.critic_linear.weight.dtype == torch.float32  # the heads compute in float32
        assert all(p.dtype == torch.float32 for p in learner_net.parameters())
        with torch.no_grad():  # an update of the learner, then the client's reload of the shared weights
            for p in learner_net.parameters():
                p.add_(0.01 * torch.randn_like(p))
        versions[0] += 1
        client.ensure_weights_updated()


@needs_bf16
def test_a_learner_step_under_bf16_keeps_float32_weights_optimizer_and_losses(tmp_path):
    """sample-factory's Learner.train with --precision bf16: the weights move, stay float32 with float32 Adam
    moments, and the losses and advantages are finite float32 numbers."""
    learner = build_learner(SMALL + ["--precision", "bf16"], tmp_path)
    assert learner.cfg.compute_precision == "bf16"
    before = {k: v.clone() for k, v in learner.actor_critic.state_dict().items()}
    learner._should_save_summaries = lambda: True  # the step's statistics come back
    stats = learner.train(synthetic_batch(learner))
    after = learner.actor_critic.state_dict()
    assert all(v.dtype == torch.float32 for v in after.values() if v.is_floating_point())
    assert sum(not torch.equal(before[k], after[k]) for k in before) > 10
    moments = [s["exp_avg"] for s in learner.optimizer.state.values()]
    assert moments and all(m.dtype == torch.float32 for m in moments)
    train = stats["train"]
    for key in ("loss", "policy_loss", "value_loss", "adv_std", "adv_max", "adv_min"):
        assert torch.isfinite(torch.as_tensor(train[key])).all(), key


@pytest.mark.slow
@needs_bf16
def test_a_bf16_training_run_finishes_and_is_evaluated_in_either_precision(tmp_path):
    """scripts.main --precision bf16 trains (logged, saved in config.json), and the forced-skill evaluation of
    its checkpoint runs with the saved bf16 and with --precision fp32."""
    from tests.test_training import _meta_policy_root, run_main

    common = ["--device", "cpu", "--train_dir", str(tmp_path / "runs"), "--experiment", "bf16",
              "--max_episode_steps", "100", "--seed", "3"]
    train = run_main(["--skill_reward", "progress", "--llm_reward", "0", "--num_workers", "1",
                      "--num_envs_per_worker", "2", "--batch_size", "128", "--rollout", "32",
                      "--train_for_env_steps", "1500", "--precision", "bf16",
                      "--meta_policy_root", str(_meta_policy_root(tmp_path))] + common, tmp_path)
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    assert "precision: bf16 autocast on the CPU" in train.stdout + train.stderr
    saved = json.loads((tmp_path / "runs" / "bf16" / "config.json").read_text())
    assert saved["precision"] == "bf16" and saved["compute_precision"] == "bf16"
    for extra in ([], ["--precision", "fp32"]):
        ev = run_main(common + ["--evaluation", "True", "--eval_skill", "descender", "--eval_episodes", "1",
                                "--eval_num_envs", "1"] + extra, tmp_path, timeout=120)
        assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
        want = "fp32 (--precision fp32" if extra else "bf16 autocast"
        assert f"precision: {want}" in ev.stdout + ev.stderr
        out = json.loads((Path(tmp_path) / "runs" / "bf16" / "eval" / "skill_descender.json").read_text())
        assert out["episodes"] == 1 and out["checkpoint"].endswith(".pth")
