"""The reward networks ONI trains online, on messages alone.

Both read the 256 message bytes through the same character CNN (ONI's message encoder: an
embedding of the 256 byte values, two convolutions of width 7 with max pooling, four of width 3,
a last pooling, then 320 -> 128):

* :class:`MessageClassifier` (ONI-Classification): -> 512 -> 512 -> dropout -> 2 classes, trained
  with cross-entropy on the LLM's labels; the reward is 1 when p(progress) exceeds
  ``--classification_threshold`` (0.5), else 0;
* :class:`MessageRanker` (ONI-Ranking): -> 256 -> 512 -> 1, trained with the Bradley-Terry loss on
  the LLM's preferences between two messages (a tie is half of each), gradient norm clipped at 10;
  the reward is the network's output (as the release effectively uses it, see the README).

Adam, learning rate 1e-4, batches of 256: 32 updates per batch of new labels while there are
fewer than 25,000 labels, then one update per round of the annotator (ONI's schedule, with the
annotator's rounds in place of the learner's iterations).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from common.atomic_io import atomic_write
from common.nethack.messages import MESSAGE_LEN, encode_message
from common.torch_files import plain_numbers, safe_load

#: ONI's schedule: many updates per new batch of labels at first, then one per round
WARMUP_LABELS = 25_000
UPDATES_PER_BATCH = 32


def encode_messages(messages: Sequence[str]) -> torch.Tensor:
    """Messages (latin-1 text) -> long tensor [B, 256] of bytes, zero padded."""
    if not messages:
        return torch.zeros(0, MESSAGE_LEN, dtype=torch.long)
    return torch.from_numpy(np.stack([encode_message(m.encode("latin-1")) for m in messages])).long()


class MessageCNN(nn.Module):
    """Bytes [B, 256] -> features [B, 128]."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, 32, padding_idx=0)
        layers: list[nn.Module] = [nn.Conv1d(32, 64, 7), nn.ReLU(), nn.MaxPool1d(3),
                                   nn.Conv1d(64, 64, 7), nn.ReLU(), nn.MaxPool1d(3)]
        for _ in range(4):
            layers += [nn.Conv1d(64, 64, 3), nn.ReLU()]
        layers.append(nn.MaxPool1d(3))
        self.convs = nn.Sequential(*layers)
        self.fc = nn.Sequential(nn.Linear(5 * 64, 128), nn.ReLU())

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        x = self.convs(self.embed(codes.long()).transpose(1, 2))
        return self.fc(x.flatten(1))


class MessageClassifier(nn.Module):
    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = MessageCNN()
        self.head = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(512, 2))

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(codes))

    @torch.no_grad()
    def progress_probability(self, codes: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.forward(codes), dim=1)[:, 1]


class MessageRanker(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = MessageCNN()
        self.fc = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 512))
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(512, 1))

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return self.head(self.fc(self.encoder(codes))).squeeze(1)


KINDS: dict[str, type[nn.Module]] = {"classifier": MessageClassifier, "ranker": MessageRanker}


class OnlineTrainer:
    """A reward network, its optimiser and the labelled data, updated by the annotator."""

    def __init__(self, kind: str, lr: float = 1e-4, batch_size: int = 256, seed: int = 0) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown online model {kind!r}; valid: {', '.join(KINDS)}")
        torch.manual_seed(seed)
        self.kind = kind
        self.model = KINDS[kind]()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.batch_size = int(batch_size)
        self.rng = np.random.default_rng(seed)
        self.messages: list[str] = []  # classifier: one per labelled message
        self.targets: list[int] = []
        self.pairs: list[tuple[str, str, int]] = []  # ranker
        self.updates = 0
        self.last_loss = float("nan")
        self.last_accuracy = float("nan")

    @property
    def num_labels(self) -> int:
        return len(self.targets) if self.kind == "classifier" else len(self.pairs)

    def add(self, records: Sequence[tuple]) -> None:
        if self.kind == "classifier":
            for message, label in records:
                self.messages.append(message)
                self.targets.append(int(label))
        else:
            self.pairs.extend((a, b, int(y)) for a, b, y in records)

    def updates_for(self, new_labels: int) -> int:
        """How many updates a round with ``new_labels`` new labels gets (ONI's schedule)."""
        if self.num_labels == 0:
            return 0
        if self.num_labels < WARMUP_LABELS:
            return UPDATES_PER_BATCH if new_labels > 0 else 0
        return 1

    def step(self) -> None:
        self.model.train()
        n = self.num_labels
        idx = self.rng.choice(n, size=min(self.batch_size, n), replace=False)
        if self.kind == "classifier":
            codes = encode_messages([self.messages[i] for i in idx])
            target = torch.tensor([self.targets[i] for i in idx], dtype=torch.long)
            logits = self.model(codes)
            loss = nn.functional.cross_entropy(logits, target)
            accuracy = float((logits.argmax(1) == target).float().mean())
        else:
            batch = [self.pairs[i] for i in idx]
            scores = torch.stack([self.model(encode_messages([a for a, _, _ in batch])),
                                  self.model(encode_messages([b for _, b, _ in batch]))], dim=1)
            y = torch.tensor([p[2] for p in batch])
            soft = torch.stack([(y == 0).float() + 0.5 * (y == 2).float(), (y == 1).float() + 0.5 * (y == 2).float()], 1)
            loss = -(soft * torch.log_softmax(scores, dim=1)).sum(1).mean()
            decided = y != 2
            accuracy = float((scores.argmax(1)[decided] == y[decided]).float().mean()) if bool(decided.any()) else float("nan")
        self.optimizer.zero_grad()
        loss.backward()
        if self.kind == "ranker":
            nn.utils.clip_grad_norm_(self.model.parameters(), 10.0)
        self.optimizer.step()
        self.updates += 1
        self.last_loss = float(loss.detach())
        self.last_accuracy = accuracy

    def save(self, path: str | os.PathLike) -> None:
        payload = {"kind": self.kind, "model": self.model.state_dict(),
                   "meta": plain_numbers({"updates": self.updates, "labels": self.num_labels})}
        atomic_write(path, lambda tmp: torch.save(payload, tmp))


def load_online_model(path: str | os.PathLike, kind: str) -> nn.Module:
    """A saved online network in evaluation mode (``ValueError`` naming the file if it is not one)."""
    try:
        payload: Any = safe_load(path)
    except Exception as exc:  # a file being replaced is read again on the next check
        raise ValueError(f"{path}: not a readable online reward network ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("kind") != kind or "model" not in payload:
        raise ValueError(f"{path}: not an online {kind} checkpoint")
    model = KINDS[kind]()
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: the weights do not fit the online {kind} network ({exc})") from exc
    return model.eval()
