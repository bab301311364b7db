"""The data stream samplers draw from: items in a seeded order, reshuffled every epoch, with a savable position.

The trainer streams its examples, the collapse simulator its prompt indices; a sampler's `more(count)` is
`take`.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch


class PromptStream:
    """Yields batches of `items`; every epoch is a fresh permutation drawn from `seed` and the epoch number."""

    def __init__(self, items: Sequence[Any], seed: int) -> None:
        if not len(items):
            raise ValueError("the training dataset is empty: give at least one example with a 'prompt'")
        self.items, self.seed = items, seed
        self.epoch, self.position = 0, 0
        self._order = self._permutation(0)  # (N,)

    @property
    def examples(self) -> Sequence[Any]:
        return self.items

    def _permutation(self, epoch: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(len(self.items), generator=gen)

    def take(self, count: int) -> list[Any]:
        """The next `count` items, crossing into the next epoch (a new order) when this one runs out."""
        parts = []
        while count > 0:
            if self.position == len(self.items):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            part = self._order[self.position : self.position + count]  # (<= count,)
            parts.append(part)
            self.position += len(part)
            count -= len(part)
        return [self.items[i] for i in torch.cat(parts).tolist()] if parts else []

    @property
    def fraction_done(self) -> float:
        """The part of the current epoch already taken, in [0, 1)."""
        return self.position / len(self.items)

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._permutation(self.epoch)
