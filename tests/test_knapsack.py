"""Knapsack RL's allocation (arXiv 2509.25849): its value, its exact knapsack, and the sampler built on them."""

from __future__ import annotations

import itertools

import pytest
import torch
from test_sampling import Synthetic

from grposcope.sampling import make
from grposcope.sampling.knapsack import allocate, task_value


def test_task_value_is_the_chance_of_a_gradient_times_the_information_gain():
    value = task_value(torch.tensor([0, 8]), torch.tensor([0.5, 0.25]))
    # N = 0 teaches nothing; p = 0.5, N = 8: (1 - 2 / 2^8) x 0.5 x 0.25
    assert value[:, 0].tolist() == [0.0, 0.0]
    assert value[0, 1].item() == pytest.approx((1 - 2 / 256) * 0.5 * 0.25)
    assert value[1, 1].item() == pytest.approx((1 - 0.25**8 - 0.75**8) * 0.25 * 0.75**2)


def test_the_knapsack_is_solved_exactly():
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        b, k, budget = 4, 4, int(torch.randint(1, 10, (1,), generator=gen))
        values = torch.rand(b, k, generator=gen, dtype=torch.float64)
        values[:, 0] = 0.0
        got = allocate(values, budget)
        assert int(got.sum()) <= budget
        best = max((sum(values[i, c[i]].item() for i in range(b)), c)
                   for c in itertools.product(range(k), repeat=b) if sum(c) <= budget)
        assert sum(values[i, got[i]].item() for i in range(b)) == pytest.approx(best[0]), trial


def test_budget_moves_from_solved_prompts_to_hard_ones_and_groups_train_whole():
    # 8 prompts: 0-3 always solved, 4-5 coins, 6-7 solved one time in 10; G = 4, budget 8 x 4 = 32 a step
    world = Synthetic([1.0] * 4 + [0.5] * 2 + [0.1] * 2, seed=0)
    sampler = make("knapsack", seed=0)
    for _ in range(6):
        selection = sampler.sample(list(range(8)), world.draw, world.more, 4)
        assert selection.metrics["sampler/samples_generated"] <= 32
        assert selection.samples.shape == selection.rewards.shape == (len(selection.prompts), 4)
        assert selection.pool is not None and len(selection.pool) == len(selection.prompts)
    drawn = {p: 0 for p in range(8)}
    for prompts, n in world.calls[-3:]:  # the last step's draws, one per allocation level
        for p in prompts:
            drawn[p] += n
    assert sum(drawn[p] for p in range(4)) < sum(drawn[p] for p in range(6, 8))  # the solved give way
    assert max(drawn.values()) > 4  # a hard prompt gets more than one group


def test_state_round_trips_and_bad_options_are_named():
    world = Synthetic([0.2, 0.9, 0.5, 0.0], seed=1)
    first = make("knapsack", seed=0)
    first.sample([0, 1, 2, 3], world.draw, world.more, 4)
    second = make("knapsack", seed=5)
    second.load_state_dict(first.state_dict())
    assert second.last == first.last and torch.equal(second.seen, first.seen)
    assert torch.equal(second.estimates([0, 1, 2, 3, 9], 4), first.estimates([0, 1, 2, 3, 9], 4))
    with pytest.raises(ValueError, match=r"knapsack_max_groups must be an int in \[1, 1024\]"):
        make("knapsack", knapsack_max_groups=0)
