"""GRESO's pre-rollout filter (arXiv 2506.02177): its skip rule, its streaks, its adaptation, its refills, its
checkpoints, and a run of the trainer with it."""

from __future__ import annotations

import pytest
import torch
from test_sampling import Scripted, Synthetic

from grposcope.sampling import make
from grposcope.sampling.greso import EASY, HARD, skip_probability, zero_variance_kind


def test_skip_probability_is_one_minus_p_to_the_streak_floored_at_one_percent():
    streak = torch.tensor([0, 1, 2, 3, 10])
    p = torch.full((5,), 0.5, dtype=torch.float64)
    expected = [0.0, 0.5, 0.75, 0.875, 0.99]  # 0.5 ** 10 < 0.01: the floor keeps a 1% chance of a look
    assert skip_probability(streak, p).tolist() == pytest.approx(expected)


def test_a_groups_kind_reads_the_success_threshold_and_a_mixed_group_has_none():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.7, 0.7, 0.7], [0.2, 0.2, 0.2]])
    assert zero_variance_kind(rewards, 0.5).tolist() == [EASY, HARD, 0, EASY, HARD]


def test_streaks_grow_reset_and_switch_kind():
    sampler = make("greso")
    for rewards in ([[1.0, 1.0]], [[1.0, 1.0]]):
        sampler._remember([7], torch.tensor(rewards))
    assert sampler.history[7] == (EASY, 2)
    sampler._remember([7], torch.tensor([[0.0, 0.0]]))  # another kind starts a streak of 1
    assert sampler.history[7] == (HARD, 1)
    sampler._remember([7], torch.tensor([[1.0, 0.0]]))  # a mixed group ends it
    assert sampler.history[7] == (0, 0)


def test_prompts_that_keep_collapsing_are_skipped_before_rollout_and_replaced_from_the_stream():
    # 16 prompts: 0-7 always fail, 8-15 are coins; G = 4, 4 prompts a step, the stream goes round and round
    world = Synthetic([0.0] * 8 + [0.5] * 8, seed=0)
    sampler = make("greso", seed=0)
    hopeless_share = []
    for step in range(40):
        selection = sampler.sample(world.more(4), world.draw, world.more, 4)
        drawn = [p for prompts, _ in world.calls[-int(selection.metrics["sampler/gen_batches"]):] for p in prompts]
        hopeless_share.append(sum(p < 8 for p in drawn) / len(drawn))
        assert selection.metrics["sampler/samples_generated"] == 4 * len(drawn)
    assert sum(hopeless_share[:4]) / 4 > 0.3  # the first pass knows nothing: half the stream is drawn as it comes
    assert sum(hopeless_share[-10:]) / 10 < 0.2  # later the streaks keep most hopeless prompts out
    assert sampler.history[0][0] == HARD
    # more all-wrong groups than the target (2/3 of 0.25) early on: p_hard fell from 0.5
    assert selection.metrics["sampler/greso_p_hard"] < 0.5


def test_the_filter_passes_everything_without_history_and_adapts_only_when_it_could_act():
    world = Scripted({k: [0.0] for k in range(8)})  # every group all-wrong
    sampler = make("greso", seed=0, max_gen_batches=1)
    first = sampler.sample([0, 1, 2, 3], world.draw, world.more, 4)
    assert first.metrics["sampler/prompts_skipped"] == 0 and world.calls[0][0] == [0, 1, 2, 3]
    assert sampler.p == {EASY: 0.5, HARD: 0.5}  # no prompt had a streak: nothing the filter could do
    sampler.sample([0, 1, 2, 3], world.draw, world.more, 4)
    assert sampler.p[HARD] == pytest.approx(0.49) and sampler.p[EASY] == pytest.approx(0.51)


def test_dynamic_sampling_keeps_informative_groups_and_sizes_the_refill():
    # prompts 0-5 always fail, 6 and 7 alternate: the first batch of 8 keeps 2 mixed of 8 (a quarter)
    world = Scripted({**{k: [0.0] for k in range(6)}, 6: [1.0, 0.0], 7: [0.0, 1.0]})
    world.position = 8
    sampler = make("greso", seed=0, max_gen_batches=2)
    selection = sampler.sample(list(range(8)), world.draw, world.more, 4)
    assert set(selection.prompts) == {6, 7}  # only mixed groups train
    # 6 missing groups / (2/8 informative) x 1.25 = 30 prompts, at most the batch (8): the refill asks for 8
    assert len(world.calls) == 2 and len(world.calls[1][0]) == 8
    assert selection.metrics["sampler/gen_batches"] == 2
    assert selection.as_drawn.shape[0] == sum(len(p) for p, _ in world.calls)


def test_a_host_without_a_stream_draws_the_survivors_of_its_fixed_batch():
    world = Scripted({k: [0.0] for k in range(4)})
    sampler = make("greso", seed=0)
    sampler.sample([0, 1, 2, 3], world.draw, lambda count: [], 4)  # verl-like: no refill
    for _ in range(5):
        selection = sampler.sample([0, 1, 2, 3], world.draw, lambda count: [], 4)
        assert selection.metrics["sampler/gen_batches"] == 1  # no further batch to draw
        assert len(selection.prompts) >= 1


def test_state_round_trips_and_the_run_goes_on_identically():
    world = Synthetic([0.0, 0.5, 1.0, 0.2] * 4, seed=3)
    first = make("greso", seed=1)
    for _ in range(6):
        first.sample(world.more(4), world.draw, world.more, 4)
    second = make("greso", seed=99)
    second.load_state_dict(first.state_dict())
    assert second.history == first.history and second.p == first.p
    copy = Synthetic([0.0, 0.5, 1.0, 0.2] * 4, seed=5)
    copy.position, world.gen = world.position, torch.Generator().manual_seed(5)
    a = first.sample(world.more(4), world.draw, world.more, 4)
    b = second.sample(copy.more(4), copy.draw, copy.more, 4)
    assert a.prompts == b.prompts and torch.equal(a.rewards, b.rewards)


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="greso_p_easy must be in"):
        make("greso", greso_p_easy=1.5)
    with pytest.raises(ValueError, match="greso_target_zero_variance and greso_p_step must be in"):
        make("greso", greso_target_zero_variance=0.0)
    with pytest.raises(ValueError, match=r"greso_max_candidates must be in \[1, 100\]"):
        make("greso", greso_max_candidates=0.5)


@pytest.mark.parametrize("sampler", ["greso", "knapsack"])
def test_a_resumed_run_repeats_the_uninterrupted_one(tmp_path, tiny_tokenizer, sampler):
    # the prompts' streaks (greso) and success rates (knapsack) come back from the checkpoint: steps 4-6 draw
    # the same prompts and the same completions as the run that was never stopped
    from conftest import make_tiny_llama
    from test_sampling import odd_answers_fail
    from test_trainer import DATA, read_lines, tiny_config

    from grposcope import GRPOTrainer

    def trainer():
        args = tiny_config(tmp_path, sampler=sampler, max_steps=6, save_steps=3)
        return GRPOTrainer(model=make_tiny_llama(), processing_class=tiny_tokenizer, reward_funcs=odd_answers_fail,
                           train_dataset=DATA, args=args)

    trainer().train()
    straight = read_lines(tmp_path / "run" / "metrics.jsonl")
    trainer().train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-3"))
    resumed = read_lines(tmp_path / "run" / "metrics.jsonl")

    def steady(lines):
        return [{k: v for k, v in line.items() if k != "time" and not k.startswith("perf/")} for line in lines]

    assert steady(resumed) == steady(straight)
    assert any(line["sampler/prompts_skipped"] > 0 for line in straight[3:]) or sampler == "knapsack"
