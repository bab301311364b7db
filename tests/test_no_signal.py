"""A step with no signal takes no optimizer step: weights, AdamW's moments and its step count stay bit-identical
(skip_no_signal_steps, on by default); with the skip off, AdamW replays its momentum and the weights move."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.core.losses import adamw_replay, carries_signal

DATA = [{"prompt": [{"role": "user", "content": f"What is {a} + {b} ?"}], "answer": str(a + b)}
        for a, b in [(1, 2), (3, 4), (2, 2), (5, 1), (4, 3), (6, 2)]]


def length_then_zero():
    """A reward with signal on its first call (the completion's length / 50: a random model's completions
    rarely tie) and none after (every completion 0)."""
    calls = []

    def length_once(prompts, completions, **columns):
        calls.append(1)
        if len(calls) > 1:
            return [0.0] * len(completions)
        return [len(c[0]["content"]) / 50 for c in completions]

    return length_once


def first_group_only(prompts, completions, **columns):
    """Signal in the first group of the step only (its completions' lengths); the second group all 0."""
    g = len(completions) // 2
    return [len(c[0]["content"]) / 50 if i < g else 0.0 for i, c in enumerate(completions)]


def config(tmp_path, **overrides) -> GRPOConfig:
    options = dict(output_dir=str(tmp_path / "run"), num_generations=4, per_device_train_batch_size=4,
                   gradient_accumulation_steps=2, max_completion_length=6, learning_rate=1e-3, max_steps=2,
                   logging_steps=1, seed=0, lr_scheduler_type="linear")
    return GRPOConfig(**(options | overrides))


class Snapshot:
    """Keeps the weights and the optimizer state after step 1."""

    def __init__(self) -> None:
        self.weights = self.optimizer = None

    def on_step_end(self, trainer, metrics):
        if trainer.global_step == 1:
            self.weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
            self.optimizer = copy.deepcopy(trainer.optimizer.state_dict())


def lines(tmp_path):
    return [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


def same_optimizer_state(a, b) -> bool:
    if a["state"].keys() != b["state"].keys():
        return False
    for key in a["state"]:
        for name, value in a["state"][key].items():
            other = b["state"][key][name]
            if not torch.equal(torch.as_tensor(value), torch.as_tensor(other)):
                return False
    return True


@pytest.mark.parametrize("skip", [True, False])
def test_a_collapsed_step_after_a_real_one_leaves_weights_and_adamw_bit_identical(tmp_path, tiny_llama,
                                                                                  tiny_tokenizer, skip):
    snapshot = Snapshot()
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=length_then_zero(),
                          train_dataset=DATA, args=config(tmp_path, skip_no_signal_steps=skip),
                          callbacks=[snapshot])
    summary = trainer.train()
    first, second = lines(tmp_path)
    assert first["collapse/acr_post"] < 1.0 and second["collapse/acr_post"] == 1.0  # step 2: every A is 0
    assert second["grad_norm"] == 0.0
    now = trainer.model.state_dict()
    moved = [k for k in now if not torch.equal(now[k], snapshot.weights[k])]
    if skip:
        assert moved == []
        assert same_optimizer_state(trainer.optimizer.state_dict(), snapshot.optimizer)  # moments and step count
        assert [line["optimizer/skipped_no_signal"] for line in (first, second)] == [0.0, 1.0]
        assert summary["optimizer/skipped_no_signal_steps"] == 1
        assert second["perf/backward_s"] == 0.0  # no backward pass on the empty step
        assert "entropy/mean" in second  # ... but its entropy is still measured (no-grad forward)
    else:  # stock behaviour: AdamW replays step 1's update with a zero gradient
        assert len(moved) > 0
        assert second["optimizer/skipped_no_signal"] == 0.0
        assert not same_optimizer_state(trainer.optimizer.state_dict(), snapshot.optimizer)
    # the learning-rate schedule follows the run's step count either way: linear decay over 2 steps ends at 0
    assert trainer.scheduler.last_epoch == 2 and trainer.scheduler.get_last_lr()[0] == 0.0


def signal_on_the_first_step(prompts, completions, trainer_state, **columns):
    """The completion's length / 50 on step 1, 0 on every later step (by the run's step count, so that a
    resumed run scores as the uninterrupted one)."""
    if trainer_state.global_step >= 1:
        return [0.0] * len(completions)
    return [len(c[0]["content"]) / 50 for c in completions]


def test_a_run_resumed_inside_a_streak_skips_what_the_uninterrupted_run_skips(tmp_path, tiny_llama, tiny_tokenizer):
    def run(folder, max_steps, resume=None):
        args = config(folder, max_steps=max_steps, save_steps=2, lr_scheduler_type="constant",
                      resume_from_checkpoint=resume)
        trainer = GRPOTrainer(model=copy.deepcopy(tiny_llama), processing_class=tiny_tokenizer,
                              reward_funcs=signal_on_the_first_step, train_dataset=DATA, args=args)
        return trainer, trainer.train()

    straight, summary = run(tmp_path / "straight", 4)  # step 1 real, steps 2-4 without signal
    assert summary["optimizer/skipped_no_signal_steps"] == 3
    run(tmp_path / "killed", 2)  # stops after checkpoint-2, inside the streak
    resumed, summary = run(tmp_path / "killed", 4, resume=True)
    assert summary["optimizer/skipped_no_signal_steps"] == 3  # step 2 before the checkpoint, 3 and 4 after it
    assert [line["optimizer/skipped_no_signal"] for line in lines(tmp_path / "killed")] == [0.0, 1.0, 1.0, 1.0]
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert same_optimizer_state(straight.optimizer.state_dict(), resumed.optimizer.state_dict())
    assert lines(tmp_path / "killed")[-1]["collapse/no_signal_streak"] == 3.0  # the alarm's streak resumed too


def test_a_micro_batch_without_signal_skips_its_backward_and_changes_nothing(tmp_path, tiny_llama, tiny_tokenizer):
    # one step of two groups in two micro-batches, only the first with signal: the skipped backward of the
    # second (its gradient would be exactly 0) leaves the update bit-identical to the stock one
    weights = {}
    for skip in (True, False):
        model = copy.deepcopy(tiny_llama)
        trainer = GRPOTrainer(model=model, processing_class=tiny_tokenizer, reward_funcs=first_group_only,
                              train_dataset=DATA, args=config(tmp_path / str(skip), max_steps=1,
                                                              skip_no_signal_steps=skip))
        trainer.train()
        (line,) = lines(tmp_path / str(skip))
        assert line["collapse/acr_post"] == 0.5 and line["optimizer/skipped_no_signal"] == 0.0
        weights[skip] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    assert all(torch.equal(weights[True][k], weights[False][k]) for k in weights[True])
    assert any(not torch.equal(weights[True][k], tiny_llama.state_dict()[k]) for k in weights[True])


def test_a_kl_term_is_signal_the_step_is_taken(tmp_path, tiny_llama, tiny_tokenizer):
    # beta > 0: the KL term has a gradient (after the first update moved the policy off the reference)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=length_then_zero(),
                          train_dataset=DATA, args=config(tmp_path, beta=0.1))
    trainer.train()
    first, second = lines(tmp_path)
    assert second["collapse/acr_post"] == 1.0
    assert second["grad_norm"] > 0 and second["optimizer/skipped_no_signal"] == 0.0


def test_carries_signal_reads_rows_with_a_real_token():
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0]])  # row 1 has no real token
    assert not carries_signal(torch.tensor([0.0, 0.0, 0.0]), mask)
    assert not carries_signal(torch.tensor([0.0, 2.0, 0.0]), mask)  # the only non-zero advantage is masked out
    assert carries_signal(torch.tensor([0.0, 0.0, -1e-12]), mask)  # exactly 0 is the criterion, not "small"
    with pytest.raises(ValueError, match="2 advantages for 3 sequences"):
        carries_signal(torch.zeros(2), mask)


def test_adamw_replay_matches_torch_adamw():
    # Hand: after one empty step, m_hat = 0.9 * 0.1 / (1 - 0.81) = 0.47368, v_hat = 0.999 * 0.001 /
    # (1 - 0.998001) = 0.49975, m_hat / sqrt(v_hat) = 0.67006: in all 1.67006 first steps
    assert adamw_replay(0) == 1.0
    assert adamw_replay(1) == pytest.approx(1.67006, abs=1e-5)
    # torch's AdamW on one weight: a gradient of 3.0, then zeros; eps tiny so that it does not damp the replay
    for empty in (1, 9, 13):
        w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        opt = torch.optim.AdamW([w], lr=0.01, betas=(0.9, 0.999), eps=1e-30, weight_decay=0.0)
        for step in range(empty + 1):
            w.grad = torch.full_like(w, 3.0 if step == 0 else 0.0)
            opt.step()
        assert -w.item() / 0.01 == pytest.approx(adamw_replay(empty), rel=1e-9)
    assert [round(adamw_replay(k), 2) for k in (1, 9, 13)] == [1.67, 4.19, 4.77]


def _two_process_zero_check(rank, init_file, grads, out):
    from grposcope.integrations.verl_skip import gradient_is_zero

    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        results = []
        for pair in grads:
            p = torch.nn.Parameter(torch.zeros(3))
            p.grad = torch.tensor(pair[rank])
            results.append(gradient_is_zero([p]))
        (out / f"rank{rank}.json").write_text(json.dumps(results))
    finally:
        torch.distributed.destroy_process_group()


def test_verl_guard_decides_alike_on_every_process(tmp_path):
    # the check verl's workers run before an optimizer step: zero on both processes -> skip on both; non-zero
    # on one process only (its gradient shard) -> step on both
    grads = [([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]), ([0.0, 1e-30, 0.0], [0.0, 0.0, 0.0]),
             ([0.0, 0.0, 0.0], [2.0, 0.0, 0.0])]
    torch.multiprocessing.spawn(_two_process_zero_check, args=(str(tmp_path / "init"), grads, tmp_path), nprocs=2)
    for rank in range(2):
        assert json.loads((tmp_path / f"rank{rank}.json").read_text()) == [True, False, False]
