"""The records a step's phases hand each other carry data only (trainer/generation.py, step_metrics.py), and the
step's metrics are made of them in one place after the step (`StepMetrics.of`); a checkpoint keeps a generation
as it always did (its figures as the metrics they give), and a resumed one logs the very same line."""

from __future__ import annotations

import dataclasses

import torch

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.trainer.generation import Drawn, Generation, LoggedFigures, UpdateFigures, plan
from grposcope.trainer.policy import TrainBatch
from grposcope.trainer.step_metrics import GenerationFigures, OptimizerFigures, StepMetrics, Update

DATA = [{"prompt": f"What is {a} + {b} ?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (2, 2), (5, 1)]]
DATA_TYPES = (torch.Tensor, int, float, str, type(None))


def text_length(prompts, completions, log_metric=None, **columns):
    log_metric("toy/calls", 1.0)
    return [len(c) / 50 for c in completions]


def figures(**overrides) -> GenerationFigures:
    values = dict(rewards={"reward/toy/mean": 0.5, "reward/errors": 0.0}, sampler={"sampler/samples_kept": 8.0},
                  reward_mean=0.5, reward_std=0.25, mean_length=3.0, truncated_frac=0.125, prompts_cut_frac=0.0,
                  gen_tokens_per_s=100.0, advantages={"avspo/tau": 0.5}, kl_penalty=0.01)
    return GenerationFigures(**(values | overrides))


def a_generation(measured=None) -> Generation:
    n, t = 8, 3
    batch = TrainBatch(torch.ones(n, 2, dtype=torch.long), torch.ones(n, 2, dtype=torch.long),
                       torch.ones(n, t, dtype=torch.long), torch.ones(n, t, dtype=torch.long), torch.zeros(n))
    drawn = Drawn(torch.zeros(2, 4), torch.zeros(2, 4), seconds=1.0, samples_generated=8)
    return Generation(batch, plan(n, 2, 4), measured or figures(), {"toy/calls": 1.0}, drawn=drawn)


def only_data(value, where: str) -> list[str]:
    """Where `value` holds anything but tensors, numbers, strings, lists, dicts and records of them."""
    if dataclasses.is_dataclass(value):
        return [bad for f in dataclasses.fields(value)
                for bad in only_data(getattr(value, f.name), f"{where}.{f.name}")]
    if isinstance(value, (list, tuple)):
        return [bad for i, x in enumerate(value) for bad in only_data(x, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [bad for k, x in value.items() for bad in only_data(x, f"{where}[{k!r}]")]
    return [] if isinstance(value, DATA_TYPES) else [f"{where}: {type(value).__name__}"]


def test_the_plan_feeds_iterations_passes_of_optimizer_batches():
    rows = plan(6, 2, 4)  # 6 rows, 4 per optimizer step, twice over: 4 + 2, 4 + 2
    assert [r.tolist() for r in rows] == [[0, 1, 2, 3], [4, 5], [0, 1, 2, 3], [4, 5]]


def test_a_checkpoint_keeps_a_generation_as_the_metrics_it_logs_and_a_resumed_one_logs_the_same_line():
    generation = a_generation()
    generation.next_batch()
    state = generation.state_dict()
    assert list(state) == ["batch", "metrics", "plan", "taken", "logged"]  # the checkpoint's format, unchanged
    assert state["metrics"] == figures().metrics() and list(state["metrics"]) == list(figures().metrics())
    resumed = Generation.from_state(state)
    assert isinstance(resumed.figures, LoggedFigures) and resumed.drawn is None and resumed.taken == 1
    update = Update(UpdateFigures(policy_loss=-0.5), OptimizerFigures(1.0, 0, False, 30.0, 1.0))
    line = StepMetrics.of(generation, update, {}).metrics()
    again = StepMetrics.of(resumed, update, {}).metrics()
    assert list(again.items()) == list(line.items())
    assert resumed.state_dict()["metrics"] == state["metrics"]  # and its next checkpoint keeps it again


def test_the_step_line_is_made_of_the_records_after_the_step():
    generation = a_generation(figures(kl_penalty=None))
    update = Update(UpdateFigures(policy_loss=-0.5, entropy=0.3), OptimizerFigures(2.0, 1, False, 300.0, 1.5))
    line = StepMetrics.of(generation, update, {"collapse/acr": 0.5}).metrics()
    assert list(line)[:9] == ["reward/toy/mean", "reward/errors", "sampler/samples_kept", "reward/mean",
                              "reward/std", "completion/mean_length", "completion/truncated_frac",
                              "prompt/truncated_frac", "perf/gen_tokens_per_s"]
    assert "kl/reward_penalty" not in line and line["avspo/tau"] == 0.5 and line["toy/calls"] == 1.0
    assert line["loss/policy"] == -0.5 and line["grad_norm"] == 2.0 and line["collapse/acr"] == 0.5
    assert line["perf/train_tokens_per_s"] == 200.0  # 300 tokens / 1.5 s


def test_a_real_generation_and_update_hold_data_only(tmp_path, tiny_llama, tiny_tokenizer):
    args = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=4, per_device_train_batch_size=8,
                      max_completion_length=4, max_steps=1, num_iterations=2, beta=0.1, seed=0)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=args)
    generation = trainer._generate()
    assert isinstance(generation.figures, GenerationFigures) and generation.drawn.samples_generated == 8
    assert generation.drawn.completions and generation.logged == {"toy/calls": 1.0}
    update = trainer._optimize(generation.next_batch())
    assert only_data(generation, "generation") == [] and only_data(update, "update") == []
    assert update.loss.kl is not None and update.optimizer.grad_norm >= 0.0
