"""NetHack's top-line message as NLE hands it over: 256 bytes, zero padded.

One home for reading and writing it: the raw bytes up to the padding (the key the reward
cache and the message counts use), the decoded text (latin-1, stripped; captions, detectors,
the environment's info), and text back to the padded array (datasets, tests).
"""
from __future__ import annotations

import numpy as np

#: Bytes of NLE's message buffer (the models read all of them).
MESSAGE_LEN = 256


def message_bytes(message: np.ndarray | bytes) -> bytes:
    """The message bytes up to the first zero (trailing padding is irrelevant)."""
    if isinstance(message, np.ndarray) and message.dtype == np.uint8:
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
