"""Batches for tests/verl: verl DataProtos of scored responses, and verl's own advantage dispatch on them."""

from __future__ import annotations

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

T = 5  # response tokens


def make_batch(scores, uids, lengths=None) -> DataProto:
    """One row per response: its score on its last response token (as verl's reward managers place it)."""
    n = len(scores)
    lengths = lengths if lengths is not None else [T] * n
    mask = (torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).float()  # (N, T)
    rewards = torch.zeros(n, T)  # (N, T)
    rewards[torch.arange(n), torch.tensor(lengths) - 1] = torch.as_tensor(scores, dtype=torch.float32)
    return DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask},
                               non_tensors={"uid": np.array(uids, dtype=object)})


def verl_advantages(data: DataProto, name: str, config=None) -> torch.Tensor:
    """verl's own dispatch (ray_trainer.compute_advantage) -> (N,) the advantage of each row."""
    out = compute_advantage(data, adv_estimator=name, config=config)
    adv = out.batch["advantages"]  # (N, T)
    assert torch.equal(adv * out.batch["response_mask"], adv)  # nothing on padded tokens
    assert torch.equal(out.batch["returns"], adv)
    return adv[:, 0]
