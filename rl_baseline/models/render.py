"""Glyph atlas and cheap rendering of NetHack character grids to RGB.

The atlas is built once per process from Pillow's default font: every byte
value (256 characters) is drawn once in white, box-filtered down to a
``CELL x CELL`` intensity mask and tinted with each of NetHack's 16 colours.
Rendering a grid is then a single fancy-indexing operation (numpy here, torch
inside the policy network), so no font drawing happens per step.

Layout of the atlas: ``uint8 [256, 16, CELL, CELL, 3]`` indexed as
``atlas[char, colour]``.
"""
from __future__ import annotations

import functools
import logging

import numpy as np

logger = logging.getLogger(__name__)

#: Pixels per character cell (both directions) of what the policy network sees.
CELL: int = 6
#: Pixels per character cell of evaluation videos (large enough to read the messages).
VIDEO_CELL: int = 12
NUM_CHARS: int = 256
NUM_COLORS: int = 16

#: RGB for NetHack's 16 colour codes (CLR_BLACK .. CLR_WHITE).  Colour 0
#: ("black") is drawn as a dim blue-grey so that black monsters and objects
#: stay visible on the black background, as terminals with darkgray do.
PALETTE: np.ndarray = np.array(
    [
        [70, 70, 90],  # 0 black (shown dim)
        [170, 0, 0],  # 1 red
        [0, 170, 0],  # 2 green
        [170, 85, 0],  # 3 brown
        [0, 0, 170],  # 4 blue
        [170, 0, 170],  # 5 magenta
        [0, 170, 170],  # 6 cyan
        [170, 170, 170],  # 7 grey
        [110, 110, 110],  # 8 no colour
        [255, 140, 0],  # 9 orange
        [85, 255, 85],  # 10 bright green
        [255, 255, 85],  # 11 yellow
        [85, 85, 255],  # 12 bright blue
        [255, 85, 255],  # 13 bright magenta
        [85, 255, 255],  # 14 bright cyan
        [255, 255, 255],  # 15 white
    ],
    dtype=np.float32,
)

#: The release's 16 colours (its ``obs_wrappers.COLORS``: colour 0 is pure black). Used by the
#: release-shaped encoder (``--encoder_arch release``) so that converted weights see the
#: release's colours; the glyph shapes stay this module's (the release drew a TrueType font).
RELEASE_PALETTE: np.ndarray = np.array(
    [
        [0x00, 0x00, 0x00],
        [0x80, 0x00, 0x00],
        [0x00, 0x80, 0x00],
        [0x80, 0x80, 0x00],
        [0x00, 0x00, 0x80],
        [0x80, 0x00, 0x80],
        [0x00, 0x80, 0x80],
        [0x80, 0x80, 0x80],
        [0xC0, 0xC0, 0xC0],
        [0xFF, 0x00, 0x00],
        [0x00, 0xFF, 0x00],
        [0xFF, 0xFF, 0x00],
        [0x00, 0x00, 0xFF],
        [0xFF, 0x00, 0xFF],
        [0x00, 0xFF, 0xFF],
        [0xFF, 0xFF, 0xFF],
    ],
    dtype=np.float32,
)
PALETTES: dict[str, np.ndarray] = {"project": PALETTE, "release": RELEASE_PALETTE}


def _font_masks(cell: int) -> np.ndarray:
    """Intensity masks float32 [256, cell, cell] in [0, 1] for every byte value.

    Printable ASCII (33..126) is drawn with Pillow's default font at a fixed
    origin (so that '.', '_' and '`' keep their vertical position), then
    box-filtered to ``cell x cell``. Control characters, space and bytes >= 127
    are blank (NetHack's tty output here is plain ASCII).
    """
    from PIL import Image, ImageDraw, ImageFont  # lazy: Pillow only to draw the font; evaluation imports this module

    try:
        font = ImageFont.load_default(size=4 * cell)
    except TypeError:  # Pillow without the size argument: the bitmap font
        font = ImageFont.load_default()

    printable = [chr(c) for c in range(33, 127)]
    boxes = [font.getbbox(ch) for ch in printable]
    left = min(b[0] for b in boxes)
    top = min(b[1] for b in boxes)
    width = max(b[2] for b in boxes) - left
    height = max(b[3] for b in boxes) - top
    # the canvas is one character cell of the font: the tallest extent, and a
    # width of 3/4 of it (like a terminal cell), so that narrow glyphs such as
    # '-' and '|' fill the cell; the widest glyphs (W, M, @) lose a little of
    # their edges
    width = min(width, max(3 * height // 4, 1))
    masks = np.zeros((NUM_CHARS, cell, cell), dtype=np.float32)
    for code in range(33, 127):
        ch = chr(code)
        img = Image.new("L", (max(width, 1), max(height, 1)), 0)
        draw = ImageDraw.Draw(img)
        b = font.getbbox(ch)
        x0 = (width - (b[2] - b[0])) // 2 - b[0]
        y0 = -top
        draw.text((x0, y0), ch, fill=255, font=font)
        small = img.resize((cell, cell), resample=Image.Resampling.BOX)
        m = np.asarray(small, dtype=np.float32) / 255.0
        # stretch contrast so thin strokes survive the down-sampling
        peak = float(m.max())
        if peak > 0:
            m = np.clip(m / peak * 1.4, 0.0, 1.0)
        masks[code] = m
    return masks


@functools.lru_cache(maxsize=8)
def glyph_atlas(cell: int = CELL, palette: str = "project") -> np.ndarray:
    """The cached atlas uint8 [256, 16, cell, cell, 3] (read-only).

    ``palette``: ``project`` (:data:`PALETTE`) or ``release`` (:data:`RELEASE_PALETTE`).
    """
    if palette not in PALETTES:
        raise ValueError(f"palette {palette!r}: expected one of {', '.join(PALETTES)}")
    masks = _font_masks(cell)
    atlas = masks[:, None, :, :, None] * PALETTES[palette][None, :, None, None, :]
    atlas = np.clip(np.rint(atlas), 0, 255).astype(np.uint8)
    atlas.setflags(write=False)
    logger.debug("built glyph atlas %s", atlas.shape)
    return atlas


def render_grid(chars: np.ndarray, colors: np.ndarray, cell: int = CELL, palette: str = "project") -> np.ndarray:
    """Renders a [H, W] character grid with its colours to uint8 [H*cell, W*cell, 3]."""
    chars = np.asarray(chars)
    colors = np.asarray(colors)
    if chars.shape != colors.shape or chars.ndim != 2:
        raise ValueError(f"chars and colors must be 2-D with equal shapes, got {chars.shape} and {colors.shape}")
    atlas = glyph_atlas(cell, palette)
    h, w = chars.shape
    tiles = atlas[chars.astype(np.intp) & 255, colors.astype(np.intp) & 15]  # [H, W, cell, cell, 3]
    return tiles.transpose(0, 2, 1, 3, 4).reshape(h * cell, w * cell, 3)


def render_crop(chars: np.ndarray, colors: np.ndarray) -> np.ndarray:
    """Renders the policy's 12x12 crop to uint8 [72, 72, 3] (the pixels the network sees)."""
    return render_grid(chars, colors, CELL)


def render_tty_frame(tty_chars: np.ndarray, tty_colors: np.ndarray, cell: int = VIDEO_CELL) -> np.ndarray:
    """Renders the whole terminal (NLE's tty_chars/tty_colors, 24x80) to uint8 [24*cell, 80*cell, 3]."""
    return render_grid(tty_chars, tty_colors, cell)


def render_grid_torch(chars, colors, atlas):
    """Torch version of :func:`render_grid` for batches.

    chars, colors: integer or float tensors [B, H, W]; atlas: uint8 tensor
    [256 * 16, cell, cell, 3] (the numpy atlas reshaped). Returns uint8
    [B, 3, H*cell, W*cell] with exactly the numpy function's pixels.
    """
    b, h, w = chars.shape
    cell = atlas.shape[1]
    index = (chars.long() & 255) * NUM_COLORS + (colors.long() & 15)
    tiles = atlas[index]  # [B, H, W, cell, cell, 3]
    return tiles.permute(0, 5, 1, 3, 2, 4).reshape(b, 3, h * cell, w * cell)
