"""The training prompts in a seeded, reshuffled-per-epoch order, with a position that can be saved."""

from __future__ import annotations

from typing import Any

import torch


class PromptStream:
    """Yields batches of examples; every epoch is a fresh permutation drawn from `seed` and the epoch number."""

    def __init__(self, examples: list[dict[str, Any]], seed: int) -> None:
        if not examples:
            raise ValueError("the training dataset is empty: give at least one example with a 'prompt'")
        self.examples, self.seed = examples, seed
        self.epoch, self.position = 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(len(self.examples), generator=gen).tolist()

    def take(self, count: int) -> list[dict[str, Any]]:
        batch = []
        while len(batch) < count:
            if self.position == len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            batch.append(self.examples[self._order[self.position]])
            self.position += 1
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._permutation(self.epoch)
