"""Policy observation, glyph rendering, the two policy encoders and the choice between them (--encoder_arch)."""
from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from common.vocabulary import NUM_SKILLS
from rl_baseline.models import render
from rl_baseline.models.cdgpt5 import (
    SF_DEFAULTS,
    BlstatsNormalizer,
    CDGPT5Encoder,
    ReleaseEncoder,
    make_cdgpt5_encoder,
    register_cdgpt5,
)
from rl_baseline.models.obs import (
    BLSTATS_SIZE,
    CROP_SIZE,
    MODEL_OBS_KEYS,
    NO_SPELL,
    SPELL_KINDS,
    model_observation,
    model_observation_space,
    monk_features,
    spell_kind,
)

SPACE = ord(" ")



def assert_same_outputs_and_gradients(enc, fast, reference, atol: float, rtol: float) -> None:
    """A shortcut of an encoder computes its reference's outputs (to 1e-5) and parameter gradients."""
    assert torch.allclose(fast, reference, atol=1e-5), (fast - reference).abs().max()
    weights = torch.randn_like(fast)
    grads_fast = torch.autograd.grad((fast * weights).sum(), list(enc.parameters()), allow_unused=True)
    grads_ref = torch.autograd.grad((reference * weights).sum(), list(enc.parameters()), allow_unused=True)
    for (name, _), a, b in zip(enc.named_parameters(), grads_fast, grads_ref):
        assert (a is None) == (b is None), name
        if a is not None:
            assert torch.allclose(a, b, atol=atol, rtol=rtol), (name, (a - b).abs().max())

def _make_env():
    try:
        from rl_baseline.envs import make_monk_env
    except ImportError:  # the task env is not available: NLE's score task with the same character
        from nle.env.tasks import NetHackScore

        return NetHackScore(character="mon-hum-neu-mal")
    return make_monk_env(max_episode_steps=100)


@pytest.fixture(scope="module")
def nle_obs() -> dict:
    env = _make_env()
    try:
        obs, _ = env.reset(seed=7)
        # a few steps so the map and the message are not just the first screen
        for action in (1, 2, 3):
            obs, *_ = env.step(action % env.action_space.n)
        return {k: np.array(v, copy=True) for k, v in obs.items()}
    finally:
        env.close()


def _reference_crop(grid: np.ndarray, x: int, y: int, fill: int) -> np.ndarray:
    half = CROP_SIZE // 2
    pad = 128  # more than any position the tests use
    padded = np.pad(grid, pad, mode="constant", constant_values=fill)
    top, left = y - half + pad, x - half + pad
    return padded[top : top + CROP_SIZE, left : left + CROP_SIZE]


@pytest.fixture()
def sf_model_factory():
    """Restores sample-factory's global encoder factory after the test."""
    from sample_factory.algo.utils.context import global_model_factory

    factory = global_model_factory()
    saved = factory.make_model_encoder_func
    yield factory
    factory.make_model_encoder_func = saved


def _batch(observations: list[dict]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.stack([o[k] for o in observations])) for k in MODEL_OBS_KEYS}


def _encoder(num_skills: int = NUM_SKILLS) -> CDGPT5Encoder:
    torch.manual_seed(0)
    cfg = SimpleNamespace(**SF_DEFAULTS)
    return CDGPT5Encoder(cfg, model_observation_space(num_skills)).eval()


# ---------------------------------------------------------------- observation


def test_crop_is_centred_on_the_hero(nle_obs):
    x, y = int(nle_obs["blstats"][0]), int(nle_obs["blstats"][1])
    obs = model_observation(nle_obs, 1, NUM_SKILLS)
    assert obs["crop_chars"][CROP_SIZE // 2, CROP_SIZE // 2] == ord("@")
    assert obs["crop_chars"][CROP_SIZE // 2, CROP_SIZE // 2] == nle_obs["chars"][y, x]
    np.testing.assert_array_equal(obs["crop_chars"], _reference_crop(nle_obs["chars"], x, y, SPACE))
    np.testing.assert_array_equal(obs["crop_colors"], _reference_crop(nle_obs["colors"], x, y, 0))
    assert model_observation_space(NUM_SKILLS).contains(obs)


@pytest.mark.parametrize("x,y", [(0, 0), (78, 20), (0, 20), (78, 0), (3, 10), (40, 1), (90, 30)])
def test_crop_pads_outside_the_map(nle_obs, x, y):
    rng = np.random.default_rng(x * 100 + y)
    chars = rng.integers(33, 127, size=nle_obs["chars"].shape).astype(np.uint8)
    colors = rng.integers(1, 16, size=nle_obs["colors"].shape).astype(np.uint8)
    blstats = nle_obs["blstats"].copy()
    blstats[0], blstats[1] = x, y
    fake = dict(nle_obs, chars=chars, colors=colors, blstats=blstats)
    obs = model_observation(fake, 0, NUM_SKILLS)
    want_chars = _reference_crop(chars, x, y, SPACE)
    np.testing.assert_array_equal(obs["crop_chars"], want_chars)
    np.testing.assert_array_equal(obs["crop_colors"], _reference_crop(colors, x, y, 0))
    # the random map has no spaces, so every space is padding; count them
    rows = np.arange(y - CROP_SIZE // 2, y + CROP_SIZE // 2)
    cols = np.arange(x - CROP_SIZE // 2, x + CROP_SIZE // 2)
    inside = np.outer((rows >= 0) & (rows < chars.shape[0]), (cols >= 0) & (cols < chars.shape[1]))
    assert np.array_equal(obs["crop_chars"] == SPACE, ~inside)
    assert np.all(obs["crop_colors"][~inside] == 0)
    assert np.all(obs["crop_colors"][inside] > 0)


def test_observation_fields_and_buffer_reuse(nle_obs):
    first = model_observation(nle_obs, 3, NUM_SKILLS)
    np.testing.assert_array_equal(first["skill_onehot"], np.eye(NUM_SKILLS, dtype=np.float32)[3])
    assert first["skill_id"][0] == 3
    np.testing.assert_array_equal(first["message"], nle_obs["message"])
    np.testing.assert_array_equal(first["blstats"], nle_obs["blstats"].astype(np.float32))
    assert first["blstats"].dtype == np.float32 and first["blstats"].shape == (BLSTATS_SIZE,)
    np.testing.assert_array_equal(first["monk_features"], monk_features(nle_obs))

    arrays = {k: first[k] for k in MODEL_OBS_KEYS}
    second = model_observation(nle_obs, 1, NUM_SKILLS, out=first)
    assert all(second[k] is arrays[k] for k in MODEL_OBS_KEYS)  # written in place
    np.testing.assert_array_equal(second["skill_onehot"], np.eye(NUM_SKILLS, dtype=np.float32)[1])

    # the result never aliases NLE's buffers
    changed = {k: np.array(v, copy=True) for k, v in nle_obs.items()}
    obs = model_observation(changed, 0, NUM_SKILLS)
    before = {k: v.copy() for k, v in obs.items()}
    changed["message"][:] = 0
    changed["chars"][:] = 0
    changed["blstats"][:] = 0
    for k in MODEL_OBS_KEYS:
        np.testing.assert_array_equal(obs[k], before[k])


@pytest.fixture(scope="module")
def monk_resets() -> list[dict]:
    """First observations of a few Monk games (the starting inventory)."""
    from rl_baseline.envs import make_monk_env

    env = make_monk_env(max_episode_steps=100)
    out = []
    try:
        for seed in (0, 1, 2, 5, 7, 11):
            env.seed(seed, seed + 1000, reseed=False)  # NLE 1.0 ignores reset(seed=...): fixed games
            out.append({k: np.array(v, copy=True) for k, v in env.reset()[0].items()})
        return out
    finally:
        env.close()


def _inventory(obs: dict) -> list[tuple[int, str]]:
    return [(int(c), bytes(s).rstrip(b"\0").decode()) for c, s in zip(obs["inv_oclasses"], obs["inv_strs"]) if c != 18]


def test_monk_features_at_reset(monk_resets):
    kinds = set()
    for obs in monk_resets:
        items = _inventory(obs)
        books = [name for _, name in items if "spellbook of " in name]
        assert len(books) == 1, items
        kind = spell_kind(obs)
        assert SPELL_KINDS[kind] == books[0].split("spellbook of ")[1], books
        kinds.add(kind)
        feats = monk_features(obs)
        assert feats.dtype == np.float32 and feats.shape == (3,)
        assert feats[0] == kind
        # slots, not items: "3 uncursed potions of healing" is one
        assert feats[1] == sum("potion" in name for _, name in items) >= 1
        assert feats[2] == sum(c == 7 for c, _ in items) >= 1  # FOOD_CLASS: rations, apples, oranges, cookies
        np.testing.assert_array_equal(model_observation(obs, 0, NUM_SKILLS)["monk_features"], feats)
        assert model_observation_space(NUM_SKILLS).contains(model_observation(obs, 0, NUM_SKILLS))
    assert len(kinds) >= 2  # the starting spellbook is drawn at random


def test_monk_features_given_or_missing(monk_resets):
    obs = monk_resets[0]
    # the caller's features (spell kind of the episode start) win
    given = model_observation(obs, 1, NUM_SKILLS, monk_features=np.array([2, 0, 7]))
    np.testing.assert_array_equal(given["monk_features"], [2, 0, 7])
    np.testing.assert_array_equal(monk_features(obs, spell_kind=1)[0], 1)
    with pytest.raises(ValueError, match="monk_features"):
        model_observation(obs, 1, NUM_SKILLS, monk_features=[1, 2])
    # observations without the inventory keys: no spellbook, no items
    bare = {k: obs[k] for k in ("chars", "colors", "blstats", "message")}
    assert spell_kind(bare) == NO_SPELL
    np.testing.assert_array_equal(model_observation(bare, 0, NUM_SKILLS)["monk_features"], [NO_SPELL, 0, 0])
    no_book = dict(obs, inv_oclasses=np.where(obs["inv_oclasses"] == 10, 18, obs["inv_oclasses"]))
    assert spell_kind(no_book) == NO_SPELL


def test_bad_skill_id_is_refused(nle_obs):
    with pytest.raises(ValueError, match="skill_id"):
        model_observation(nle_obs, NUM_SKILLS, NUM_SKILLS)
    with pytest.raises(ValueError, match="num_skills"):
        model_observation_space(0)


# ---------------------------------------------------------------- rendering


def test_atlas_shape_and_determinism():
    atlas = render.glyph_atlas()
    assert atlas.shape == (256, 16, render.CELL, render.CELL, 3) and atlas.dtype == np.uint8
    render.glyph_atlas.cache_clear()
    again = render.glyph_atlas()
    assert again is not atlas
    np.testing.assert_array_equal(again, atlas)
    assert render.glyph_atlas() is again  # cached


def test_atlas_distinguishes_characters_and_colours():
    atlas = render.glyph_atlas()
    assert not atlas[SPACE].any()  # space is blank in every colour
    printable = atlas[33:127, 15].reshape(94, -1)
    assert len({row.tobytes() for row in printable}) == 94
    for ch in "@.#<>+|-dF":
        tiles = atlas[ord(ch)].reshape(16, -1)
        assert tiles.any(axis=1).all(), ch
        assert len({t.tobytes() for t in tiles}) == 16, ch


def test_render_crop_and_tty_frame(nle_obs):
    obs = model_observation(nle_obs, 0, NUM_SKILLS)
    img = render.render_crop(obs["crop_chars"], obs["crop_colors"])
    assert img.shape == (72, 72, 3) and img.dtype == np.uint8
    c = render.CELL
    hero = img[6 * c : 7 * c, 6 * c : 7 * c]
    np.testing.assert_array_equal(hero, render.glyph_atlas()[ord("@"), obs["crop_colors"][6, 6]])
    np.testing.assert_array_equal(img, render.render_crop(obs["crop_chars"], obs["crop_colors"]))

    frame = render.render_tty_frame(nle_obs["tty_chars"], nle_obs["tty_colors"])
    v = render.VIDEO_CELL
    assert frame.shape == (24 * v, 80 * v, 3) and frame.dtype == np.uint8
    assert frame.any()
    small = render.render_tty_frame(nle_obs["tty_chars"], nle_obs["tty_colors"], cell=c)
    np.testing.assert_array_equal(small, render.render_grid(nle_obs["tty_chars"], nle_obs["tty_colors"], c))
    with pytest.raises(ValueError):
        render.render_grid(np.zeros((3, 4), np.uint8), np.zeros((4, 3), np.uint8))


def test_torch_render_matches_numpy(nle_obs):
    rng = np.random.default_rng(0)
    chars = rng.integers(0, 256, size=(5, CROP_SIZE, CROP_SIZE)).astype(np.uint8)
    colors = rng.integers(0, 16, size=(5, CROP_SIZE, CROP_SIZE)).astype(np.uint8)
    real = model_observation(nle_obs, 0, NUM_SKILLS)
    chars[0], colors[0] = real["crop_chars"], real["crop_colors"]
    enc = _encoder()
    for dtype in (torch.uint8, torch.float32):  # sample-factory may hand floats over
        got = enc.render(torch.from_numpy(chars).to(dtype), torch.from_numpy(colors).to(dtype))
        assert got.shape == (5, 3, 72, 72) and got.dtype == torch.uint8
        for i in range(5):
            want = render.render_crop(chars[i], colors[i])
            np.testing.assert_array_equal(got[i].permute(1, 2, 0).numpy(), want)


# ---------------------------------------------------------------- encoder


def test_encoder_features_finite_and_sized(nle_obs):
    enc = _encoder()
    batch = _batch([model_observation(nle_obs, i % NUM_SKILLS, NUM_SKILLS) for i in range(6)])
    with torch.no_grad():
        out = enc(batch)
    assert out.shape == (6, enc.get_out_size())
    assert torch.isfinite(out).all()

    # extreme stats (huge gold/time/score, negative AC, all conditions) stay finite
    extreme = {k: v.clone() for k, v in batch.items()}
    extreme["blstats"][:] = 2.0**31 - 1
    extreme["blstats"][:, 16] = -40
    with torch.no_grad():
        assert torch.isfinite(enc(extreme)).all()
    feats = BlstatsNormalizer()(extreme["blstats"])
    assert feats.shape == (6, BlstatsNormalizer().out_size) and torch.isfinite(feats).all()


def test_each_input_reaches_the_features(nle_obs):
    enc = _encoder()
    base = model_observation(nle_obs, 0, NUM_SKILLS)
    with torch.no_grad():
        ref = enc(_batch([base]))
        for skill in range(1, NUM_SKILLS):
            other = enc(_batch([model_observation(nle_obs, skill, NUM_SKILLS)]))
            assert not torch.allclose(ref, other), f"skill {skill} gives the same features as skill 0"
        variants = []
        msg = {k: v.copy() for k, v in base.items()}
        msg["message"][:12] = np.frombuffer(b"You die... !", dtype=np.uint8)
        variants.append(msg)
        crop = {k: v.copy() for k, v in base.items()}
        crop["crop_chars"][2:5, 2:5] = ord("D")
        crop["crop_colors"][2:5, 2:5] = 1
        variants.append(crop)
        stats = {k: v.copy() for k, v in base.items()}
        stats["blstats"][10] = 1  # hit points
        variants.append(stats)
        for feats in ([2, 0, 0], [0, 5, 0], [0, 0, 9]):
            monk = {k: v.copy() for k, v in base.items()}
            monk["monk_features"][:] = feats
            variants.append(monk)
        for v in variants:
            assert not torch.allclose(ref, enc(_batch([v])))


def _random_batch(lengths: list[int], seed: int = 0) -> dict[str, torch.Tensor]:
    """Observations with random crops and stats, and messages of the given byte lengths."""
    g = torch.Generator().manual_seed(seed)
    b = len(lengths)
    message = torch.zeros(b, 256, dtype=torch.uint8)
    for i, n in enumerate(lengths):
        message[i, :n] = torch.randint(32, 127, (n,), generator=g, dtype=torch.uint8)
    onehot = torch.zeros(b, NUM_SKILLS)
    onehot[torch.arange(b), torch.arange(b) % NUM_SKILLS] = 1.0
    return {
        "crop_chars": torch.randint(0, 256, (b, 12, 12), generator=g, dtype=torch.uint8),
        "crop_colors": torch.randint(0, 16, (b, 12, 12), generator=g, dtype=torch.uint8),
        "blstats": torch.randint(0, 30, (b, 27), generator=g).float(),
        "message": message,
        "skill_onehot": onehot,
        "skill_id": (torch.arange(b) % NUM_SKILLS).float().unsqueeze(1),
        "monk_features": torch.zeros(b, 3),
    }


@pytest.mark.parametrize("lengths", [[0], [0, 0, 0], [1, 5, 40], [80, 3, 0, 17], [242, 1], [243, 9], [256, 0]])
def test_fast_encoder_is_the_pixel_encoder(lengths):
    """The glyph-table first layer and the message CNN read up to the longest message: same outputs and
    same gradients as rendering the crop to pixels and reading all 256 message bytes."""
    enc = _encoder().train()
    batch = _random_batch(lengths, seed=len(lengths))
    assert_same_outputs_and_gradients(enc, enc(batch), enc.forward_by_pixels(batch), atol=1e-5, rtol=1e-4)


def test_inference_caches_follow_weight_updates():
    """Inference caches the first layer's per-glyph table and the all-zero message's CNN output; an
    in-place weight update (an optimiser step, sample-factory's load_state_dict) must invalidate both."""
    enc = _encoder()
    batch = _random_batch([10, 30])
    with torch.inference_mode():
        before = enc(batch)
        assert torch.equal(enc(batch), before)  # served from the cache
    with torch.no_grad():
        enc.crop_cnn[0].weight.mul_(1.5)
        enc.msg_embed.weight[0].add_(0.5)  # the padding byte's embedding: what the message cache holds
    with torch.inference_mode():
        after = enc(batch)
        assert not torch.allclose(after, before)
        assert torch.allclose(after, enc.forward_by_pixels(batch), atol=1e-5)
    state = {k: v.clone() for k, v in enc.state_dict().items()}
    with torch.no_grad():
        enc.crop_cnn[0].bias.add_(1.0)
    enc.load_state_dict(state)
    with torch.inference_mode():
        assert torch.allclose(enc(batch), after, atol=1e-6)


def test_skill_one_hot_skips_to_the_core(nle_obs, sf_model_factory):
    """The core input holds the skill one-hot itself: with the stats MLP zeroed the skill still counts."""
    enc = _encoder()
    with torch.no_grad():
        for layer in enc.stats_mlp:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.zero_()
                layer.bias.zero_()
        outs = [enc(_batch([model_observation(nle_obs, s, NUM_SKILLS)])) for s in range(NUM_SKILLS)]
    size = enc.get_out_size()
    assert size == enc.model_cfg.out_size + enc.stats_in_size
    for s, out in enumerate(outs):
        assert out.shape == (1, size)
        np.testing.assert_array_equal(out[0, -NUM_SKILLS:].numpy(), np.eye(NUM_SKILLS)[s])
        # the fused features no longer see the skill...
        torch.testing.assert_close(out[:, : enc.model_cfg.out_size], outs[0][:, : enc.model_cfg.out_size])
    # ...and the recurrent core still does, through the skip
    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
    from sample_factory.model.actor_critic import create_actor_critic

    argv = ["--env", "NetHackScoreMonk-v1", "--experiment", "models_test", "--rnn_size", "32"]
    parser, _ = parse_sf_args(argv)
    parser.set_defaults(**SF_DEFAULTS)
    cfg = parse_full_cfg(parser, argv)
    cfg.encoder_arch = "project"  # the release's encoder is the default
    register_cdgpt5()
    model = create_actor_critic(cfg, model_observation_space(NUM_SKILLS), gym.spaces.Discrete(5))
    assert model.core.core.input_size == model.encoder.get_out_size() == size
    with torch.no_grad():
        for layer in model.encoder.stats_mlp:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.zero_()
                layer.bias.zero_()
        h = torch.zeros(1, 32)
        cores = [model.forward_core(model.forward_head(_batch([model_observation(nle_obs, s, NUM_SKILLS)])), h)[0]
                 for s in range(2)]
    assert not torch.allclose(cores[0], cores[1])


def test_release_encoder_shapes_and_crop(nle_obs):
    cfg = SimpleNamespace(**dict(SF_DEFAULTS, encoder_arch="release"))
    enc = make_cdgpt5_encoder(cfg, model_observation_space(NUM_SKILLS))
    assert isinstance(enc, ReleaseEncoder)
    assert enc.get_out_size() == 512 + 128 + (30 + NUM_SKILLS) + 128
    assert "atlas" not in enc.state_dict()  # the checkpoint holds the release's tensors only
    obs = model_observation(nle_obs, 2, NUM_SKILLS)
    batch = _batch([obs])
    with torch.no_grad():
        out = enc(batch)
        img = enc.render(batch["crop_chars"], batch["crop_colors"])[0].permute(1, 2, 0).numpy()
    assert out.shape == (1, enc.get_out_size()) and torch.isfinite(out).all()
    # the skill one-hot ends the raw stats block, which sits before the 128 message features
    np.testing.assert_array_equal(out[0, -128 - NUM_SKILLS : -128].numpy(), np.eye(NUM_SKILLS)[2])
    # hero one row lower than in the map crop (the release cropped the tty screen), top row blank
    c = render.CELL
    atlas = render.glyph_atlas(c, "release")
    np.testing.assert_array_equal(img[7 * c : 8 * c, 6 * c : 7 * c], atlas[ord("@"), obs["crop_colors"][6, 6]])
    assert not img[:c].any()
    assert not atlas[ord("."), 0].any() and render.glyph_atlas(c)[ord("."), 0].any()  # release black is black
    with pytest.raises(ValueError, match="encoder_arch"):
        make_cdgpt5_encoder(SimpleNamespace(**dict(SF_DEFAULTS, encoder_arch="paper")), model_observation_space(1))


def _release_encoder() -> ReleaseEncoder:
    torch.manual_seed(0)
    return ReleaseEncoder(SimpleNamespace(**dict(SF_DEFAULTS, encoder_arch="release")),
                          model_observation_space(NUM_SKILLS)).train()


#: message lengths: single rows, every bucket alone, and batches with more than MESSAGE_BUCKET_MIN_ROWS
#: messages in several buckets (split and put back in the batch's order)
RELEASE_MESSAGE_LENGTHS = [[0], [0, 0, 0], [1], [7, 24], [25, 64, 3], [65, 0], [249, 2], [256, 0, 30],
                           [0, 12, 40, 90] * 20, [5] * 40 + [50] * 40 + [0] * 40 + [200] * 3]


@pytest.mark.parametrize("lengths", RELEASE_MESSAGE_LENGTHS, ids=[str(len(x)) + ":" + str(max(x)) for x in
                                                                   RELEASE_MESSAGE_LENGTHS])
def test_release_encoder_fast_path_is_the_layers_as_written(lengths):
    """The release's encoder runs its message CNN on each length bucket's bytes and renders the crop into
    channels-last memory: same outputs and same gradients as its layers over the rendered crop and all 256
    message bytes (forward_by_layers), whatever the batch's message lengths."""
    enc = _release_encoder()
    batch = _random_batch(lengths, seed=len(lengths))
    if len(lengths) > 1:
        batch["message"][0, 3] = 0  # a zero byte inside a message counts as part of it
    pixels = enc.pixels(batch["crop_chars"], batch["crop_colors"])
    assert torch.equal(pixels, enc.render(batch["crop_chars"], batch["crop_colors"]).float() * (1.0 / 255.0))
    assert pixels.is_contiguous(memory_format=torch.channels_last)  # written in place, no copy before the CNN
    assert_same_outputs_and_gradients(enc, enc(batch), enc.forward_by_layers(batch), atol=1e-4, rtol=1e-3)


def test_release_encoder_padding_cache_follows_weight_updates():
    """Inference keeps the message CNN's values over padding while the weights stay the same; an in-place
    update of any message layer (an optimiser step, load_state_dict) computes them again."""
    enc = _release_encoder().eval()
    batch = _random_batch([0, 10, 70])
    with torch.inference_mode():
        before = enc(batch)
        assert torch.equal(enc(batch), before)
    for update in (lambda: enc.msg_embed.weight[0].add_(0.5), lambda: enc.msg_cnn[2].bias.add_(0.3),
                   lambda: enc.msg_conv1.weight.mul_(1.5)):
        with torch.no_grad():
            update()
        with torch.inference_mode():
            after = enc(batch)
            assert not torch.allclose(after, before)
            assert torch.allclose(after, enc.forward_by_layers(batch), atol=1e-5)
        before = after


def test_release_encoder_computes_a_repeated_message_once_with_the_same_gradients():
    """A learner batch computes the message branch on its distinct messages only: same outputs and same
    gradients (a repeated message's is the sum of its rows') as the layers as written over every row."""
    enc = _release_encoder()
    batch = _random_batch([0, 12, 40, 0, 90, 7] * 8, seed=3)
    for i in range(6, 48):
        batch["message"][i] = batch["message"][i % 6]  # six messages, each eight times
    computed: list[int] = []
    compute = enc.message_features
    enc.message_features = lambda message: computed.append(int(message.shape[0])) or compute(message)
    assert_same_outputs_and_gradients(enc, enc(batch), enc.forward_by_layers(batch), atol=1e-4, rtol=1e-3)
    assert computed == [5]  # the empty message and four others


def test_release_encoder_inference_copy_computes_each_message_once_per_weights():
    """The inference worker's frozen copy computes each distinct message once per weights version: repeated and
    already-seen messages come from the cache with the values of the layers as written; a weights update (as
    sample-factory's load_state_dict after each learner step) computes them again; a trainable network (the
    learner, with or without gradients) never caches."""
    enc = _release_encoder().eval()
    computed: list[int] = []
    compute = enc.message_features
    enc.message_features = lambda message: computed.append(int(message.shape[0])) or compute(message)
    batch = _random_batch([0, 10, 70, 0, 5])
    batch["message"][2] = batch["message"][1]  # one message twice in a batch
    with torch.no_grad():
        enc(batch)
    assert "messages" not in enc._weight_cache and computed == [3], "a trainable network must not cache"
    for p in enc.parameters():
        p.requires_grad_(False)  # sample-factory's inference copy
    computed.clear()
    with torch.no_grad():
        first = enc(batch)
        assert computed == [3]  # empty, the repeated message, the other one
        assert torch.allclose(first, enc.forward_by_layers(batch), atol=1e-5)
        second_batch = _random_batch([10, 33], seed=7)
        second_batch["message"][0] = batch["message"][1]  # seen in the first batch
        second = enc(second_batch)
        assert computed == [3, 1]
        assert torch.allclose(second, enc.forward_by_layers(second_batch), atol=1e-5)
        assert torch.equal(enc(batch), first)  # all from the cache
        assert computed == [3, 1]
        state = {k: v.clone() for k, v in enc.state_dict().items()}
        state["msg_fc.0.bias"] += 0.25
        enc.load_state_dict(state)  # in place: the cache is stale
        updated = enc(batch)
        assert computed == [3, 1, 3]
        assert not torch.allclose(updated, first)
        assert torch.allclose(updated, enc.forward_by_layers(batch), atol=1e-5)


def test_default_configuration_builds_the_releases_encoder(sf_model_factory):
    """scripts.main without --encoder_arch trains the release's network (core input 803 with 5 skills);
    --encoder_arch project is this repository's smaller one."""
    from sample_factory.model.actor_critic import create_actor_critic

    from rl_baseline.models.cdgpt5 import DEFAULT_ENCODER_ARCH
    from rl_baseline.sf.cfg import parse_cfg

    register_cdgpt5()
    space = model_observation_space(NUM_SKILLS)
    cfg = parse_cfg([])
    assert cfg.encoder_arch == DEFAULT_ENCODER_ARCH == "release"
    model = create_actor_critic(cfg, space, gym.spaces.Discrete(23))
    assert isinstance(model.encoder, ReleaseEncoder)
    assert model.core.core.input_size == model.encoder.get_out_size() == 512 + 128 + 30 + NUM_SKILLS + 128
    project = create_actor_critic(parse_cfg(["--encoder_arch", "project"]), space, gym.spaces.Discrete(23))
    assert isinstance(project.encoder, CDGPT5Encoder) and project.encoder.get_out_size() == 512 + 79
    # a configuration without the flag at all (sample-factory's own parser) builds the default too
    assert isinstance(make_cdgpt5_encoder(SimpleNamespace(**SF_DEFAULTS), space), ReleaseEncoder)


def _save_experiment(train_dir, experiment: str, drop: tuple[str, ...] = (), **values) -> None:
    """A config.json as a training run leaves it (the whole configuration), without the keys ``drop``."""
    import json

    from rl_baseline.sf.cfg import parse_cfg

    cfg = vars(parse_cfg(["--train_dir", str(train_dir), "--experiment", experiment]))
    cfg.update(values)
    saved = {k: v for k, v in cfg.items() if k not in drop}
    (train_dir / experiment).mkdir(parents=True)
    (train_dir / experiment / "config.json").write_text(json.dumps(saved, default=str))


def test_saved_experiments_keep_their_encoder(tmp_path):
    """config.json wins over the new default at resume and evaluation; one written before --encoder_arch
    existed (when the project's encoder was the only one) means project; the command line still wins."""
    from rl_baseline.sf.cfg import resolve_cfg, resolve_experiment_cfg

    _save_experiment(tmp_path, "before_flag", drop=("encoder_arch",))
    _save_experiment(tmp_path, "project_run", encoder_arch="project")
    _save_experiment(tmp_path, "release_run", encoder_arch="release")
    expected = {"before_flag": "project", "project_run": "project", "release_run": "release"}
    for experiment, arch in expected.items():
        evaluated = resolve_experiment_cfg(tmp_path / experiment, ["--eval_target", "gnomish"], files=False)
        assert evaluated.encoder_arch == arch, experiment
        resumed = resolve_cfg(["--train_dir", str(tmp_path), "--experiment", experiment], files=False)
        assert resumed.encoder_arch == arch, experiment
    given = ["--train_dir", str(tmp_path), "--experiment", "before_flag", "--encoder_arch", "release"]
    assert resolve_cfg(given, files=False).encoder_arch == "release"
    # a new experiment takes the default
    assert resolve_cfg(["--train_dir", str(tmp_path), "--experiment", "new"], files=False).encoder_arch == "release"


def test_unknown_encoder_arch_exits_with_status_2_naming_the_flag(capsys):
    from rl_baseline.sf.cfg import parse_cfg

    with pytest.raises(SystemExit) as exc:
        parse_cfg(["--encoder_arch", "nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--encoder_arch" in err and "nope" in err and "release" in err


@pytest.mark.slow
def test_scripts_main_refuses_an_unknown_encoder_arch(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "scripts.main", "--encoder_arch", "nope", "--train_dir", str(tmp_path),
                           "--experiment", "bad", "--device", "cpu"], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(repo)), timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "argument --encoder_arch: invalid choice: 'nope'" in proc.stderr
    assert not (tmp_path / "bad").exists()


def test_encoder_refuses_preprocessing_that_breaks_inputs():
    space = model_observation_space(NUM_SKILLS)
    with pytest.raises(ValueError, match="normalize_input"):
        CDGPT5Encoder(SimpleNamespace(**dict(SF_DEFAULTS, normalize_input=True, normalize_input_keys=None)), space)
    with pytest.raises(ValueError, match="obs_scale"):
        CDGPT5Encoder(SimpleNamespace(**dict(SF_DEFAULTS, obs_scale=255.0)), space)
    # normalising only blstats is allowed
    CDGPT5Encoder(SimpleNamespace(**dict(SF_DEFAULTS, normalize_input=True, normalize_input_keys=["blstats"])), space)
    with pytest.raises(ValueError, match="crop_chars"):
        CDGPT5Encoder(SimpleNamespace(**SF_DEFAULTS), gym.spaces.Dict({"skill_onehot": space["skill_onehot"]}))


def test_sample_factory_actor_critic(nle_obs, sf_model_factory):
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.model.model_utils import get_rnn_size

    argv = ["--env", "NetHackScoreMonk-v1", "--experiment", "models_test", "--rnn_size", "64"]
    parser, _ = parse_sf_args(argv)
    parser.set_defaults(**SF_DEFAULTS)
    cfg = parse_full_cfg(parser, argv)
    cfg.encoder_arch = "project"  # the release's encoder is the default
    register_cdgpt5()
    register_cdgpt5()  # idempotent
    assert sf_model_factory.make_model_encoder_func.__name__ == "make_cdgpt5_encoder"

    num_actions = 23
    model = create_actor_critic(cfg, model_observation_space(NUM_SKILLS), gym.spaces.Discrete(num_actions))
    assert isinstance(model.encoder, CDGPT5Encoder)
    batch = _batch([model_observation(nle_obs, i % NUM_SKILLS, NUM_SKILLS) for i in range(3)])
    normalized = prepare_and_normalize_obs(model, batch)
    assert normalized["crop_chars"].dtype == torch.uint8
    rnn_states = torch.zeros(3, get_rnn_size(cfg))
    with torch.no_grad():
        result = model(normalized, rnn_states)
    assert result["action_logits"].shape == (3, num_actions)
    assert result["values"].shape == (3,)
    assert result["new_rnn_states"].shape == rnn_states.shape
    assert torch.isfinite(result["action_logits"]).all()
    assert not torch.equal(result["new_rnn_states"], rnn_states)


class _ScriptedCropOfTheRelease(torch.nn.Module):
    """The release's crop encoder as sample-factory 1 builds it (``ConvEncoder.ConvEncoderImpl``): the
    three convolutions and the 1152 -> 512 layer in one module, scripted with ``torch.jit.script``."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.conv_head = nn.Sequential(nn.Conv2d(3, 32, 8, stride=4), nn.ELU(), nn.Conv2d(32, 64, 4, stride=2), nn.ELU(),
                                       nn.Conv2d(64, 128, 3, stride=2), nn.ELU())
        self.fc_layers = nn.Sequential(nn.Linear(1152, 512), nn.ELU())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc_layers(self.conv_head(obs).flatten(1))


def _sample_factory_1_release_model(num_skills: int, num_actions: int) -> torch.nn.Module:
    """The release's actor-critic under the release's tensor names, initialised as sample-factory 1 does: its
    ``initialize_weights`` applied to every module, which matches ``type(layer)`` against ``nn.Conv2d`` and
    ``nn.Linear`` (orthogonal weights with gain ``--policy_init_gain`` 1, zero biases) and leaves the rest to
    PyTorch (GRU, embedding, Conv1d, and the scripted crop encoder's submodules)."""
    nn = torch.nn

    def initialize_weights(layer: nn.Module) -> None:
        if type(layer) is nn.Conv2d or type(layer) is nn.Linear:
            nn.init.orthogonal_(layer.weight.data, gain=1.0)
            layer.bias.data.fill_(0)

    root = nn.Module()
    root.encoder = encoder = nn.Module()
    encoder.obs_encoder = nn.Module()
    encoder.obs_encoder.enc = torch.jit.script(_ScriptedCropOfTheRelease())
    stats_in = 30 + num_skills
    encoder.vector_obs_head = nn.Sequential(nn.Linear(stats_in, 128), nn.ELU(), nn.Linear(128, 128), nn.ELU(),
                                            nn.Linear(128, 128), nn.ELU(), nn.Linear(128, 128), nn.ELU())
    encoder.char_lt = nn.Embedding(256, 32, padding_idx=0)
    encoder.conv1 = nn.Conv1d(32, 64, kernel_size=7)
    encoder.message_head = nn.Sequential(
        nn.ReLU(), nn.MaxPool1d(3, 3), nn.Conv1d(64, 64, 7), nn.ReLU(), nn.MaxPool1d(3, 3),
        nn.Conv1d(64, 64, 3), nn.ReLU(), nn.Conv1d(64, 64, 3), nn.ReLU(), nn.Conv1d(64, 64, 3), nn.ReLU(),
        nn.Conv1d(64, 64, 3), nn.ReLU(), nn.MaxPool1d(3, 3), nn.Flatten(), nn.Linear(320, 128), nn.ReLU())
    root.core = nn.Module()
    root.core.core = nn.GRU(512 + 128 + stats_in + 128, 512, 1)
    root.critic_linear = nn.Linear(512, 1)
    root.action_parameterization = nn.Module()
    root.action_parameterization.distribution_linear = nn.Linear(512, num_actions)
    root.apply(initialize_weights)
    return root


def test_release_network_is_initialised_as_the_release_initialised_it():
    """--encoder_arch release: per-tensor weight statistics match the release's sample-factory 1 initialisation
    (the scripted crop CNN and its 1152 -> 512 layer keep PyTorch's default init with non-zero biases, the
    message Conv1d biases stay non-zero; the other layers are orthogonal with zero biases), not sample-factory
    2's (every crop layer orthogonal, every bias zero)."""
    from common.nethack.actions import ACTIONS
    from rl_baseline.sf.cfg import parse_cfg
    from rl_baseline.sf.release_policy import build_release_actor_critic, release_name_map

    torch.manual_seed(0)
    reference = _sample_factory_1_release_model(NUM_SKILLS, len(ACTIONS)).state_dict()
    torch.manual_seed(1)
    ours = build_release_actor_critic(parse_cfg(["--encoder_arch", "release"])).state_dict()
    names = release_name_map()
    assert set(names) == set(reference), set(names) ^ set(reference)
    differ = []
    for release_name, our_name in names.items():
        want, got = reference[release_name].float(), ours[our_name].float()
        assert want.shape == got.shape, release_name
        want_zero, got_zero = bool((want == 0).all()), bool((got == 0).all())
        if want_zero or got_zero:
            if want_zero != got_zero:
                differ.append(f"{our_name}: {'zero' if got_zero else 'non-zero'}, release "
                              f"{'zero' if want_zero else 'non-zero'}")
            continue
        ratio = float(got.std() / want.std())
        bound = float(got.abs().max() / want.abs().max())
        if not (0.75 < ratio < 1.33 and 0.6 < bound < 1.67):
            differ.append(f"{our_name}: std {got.std():.4f}, max {got.abs().max():.4f}; release std {want.std():.4f}, "
                          f"max {want.abs().max():.4f}")
    assert not differ, "\n".join(differ)
    # the mechanism, as the release has it: the scripted crop layers escape the type match
    assert reference["encoder.obs_encoder.enc.conv_head.0.bias"].abs().max() > 0
    assert reference["encoder.vector_obs_head.0.bias"].abs().max() == 0
