"""NetHack's top-line message as NLE hands it over: 256 bytes, zero padded.

One home for reading and writing it: the raw bytes up to the padding (the key the reward
cache and the message counts use), the decoded text (latin-1, stripped; captions, detectors,
the environment's info), and text back to the padded array (datasets, tests).
"""
from __future__ import annotations

import numpy as np

#: Bytes of NLE's message buffer (the models read all of them).
MESSAGE_LEN = 256


_UINT8 = np.dtype(np.uint8)


def message_bytes(message: np.ndarray | bytes) -> bytes:
    """The message bytes up to the first zero (trailing padding is irrelevant)."""
    # NLE's buffer, every step: the identity tests first, the cheapest
    if (type(message) is np.ndarray and message.dtype is _UINT8) or (
            isinstance(message, np.ndarray) and message.dtype == np.uint8):
        raw = message.tobytes()
    elif isinstance(message, (bytes, bytearray)):
        raw = bytes(message)
    else:
        raw = np.asarray(message, dtype=np.uint8).tobytes()
    end = raw.find(b"\0")
    return raw if end < 0 else raw[:end]


def decode_message(message: np.ndarray | bytes) -> str:
    """The message as text (latin-1, surrounding blanks removed)."""
    return message_bytes(message).decode("latin-1").strip()


def encode_message(text: str | bytes) -> np.ndarray:
    """A message as 256 zero-padded bytes (longer messages are cut)."""
    raw = text.encode("latin-1", errors="replace") if isinstance(text, str) else bytes(text)
    out = np.zeros(MESSAGE_LEN, dtype=np.uint8)
    raw = raw[:MESSAGE_LEN]
    out[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return out


#: Messages that survive the ``--More--`` that follows them: a level change ("You descend the
#: stairs.", "You climb up the stairs") or a freeze ("You are frozen") is followed by a
#: ``--More--`` whose dismissal leaves the top line empty or showing the next message, so the
#: step's observation would lose the one message that says what happened. As in the authors'
#: release, the message shown before the ``--More--`` becomes the step's message.
DESCENT_MESSAGE = b"You descend the stairs."
KEPT_OVER_MORE: tuple[bytes, ...] = (DESCENT_MESSAGE, b"You climb up the stairs", b"You are frozen")
#: what NetHack says when the hero bumps into a wall with its ``mention_walls`` option (off in the release's
#: options, and so here)
WALL_MESSAGES: tuple[bytes, ...] = (b"It's a wall.", b"It's solid stone.")


def kept_over_more(message: np.ndarray | bytes, kept: tuple[bytes, ...] = KEPT_OVER_MORE) -> bool:
    """Whether a message on screen at a ``--More--`` must stay the step's message once it is dismissed.

    ``kept``: the messages that do (the MaestroMotif release's three by default; Motif's and ONI's
    releases keep the descent message alone)."""
    raw = message.tobytes() if isinstance(message, np.ndarray) else bytes(message)
    return any(k in raw for k in kept)
