"""The budgets a comparison holds equal (max_updates beside max_samples and max_steps) and the sampled held-out
evaluation during training (eval_num_samples, eval_limit), on the tiny in-process Llama."""

from __future__ import annotations

import pytest
from test_trainer import DATA, read_lines, text_length, tiny_config

from grposcope import GRPOTrainer


class SilentFirst:
    """text_length's rewards, but 0 for every completion of the first `silent` calls: those steps have no
    signal, so grposcope takes no optimizer update on them."""

    def __init__(self, silent: int) -> None:
        self.silent, self.calls = silent, 0
        self.__name__ = "silent_first"

    def __call__(self, prompts, completions, **columns):
        self.calls += 1
        return [0.0] * len(completions) if self.calls <= self.silent else text_length(prompts, completions)


def test_max_updates_counts_updates_not_steps(tmp_path, tiny_llama, tiny_tokenizer):
    config = tiny_config(tmp_path, max_steps=10, max_updates=2)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=SilentFirst(1),
                          train_dataset=DATA, args=config)
    summary = trainer.train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    # step 1 has no signal and takes no update; steps 2 and 3 do, and the run stops there
    assert [line["optimizer/skipped_no_signal"] for line in lines] == [1.0, 0.0, 0.0]
    assert summary["optimizer/updates"] == 2 and summary["optimizer/skipped_no_signal_steps"] == 1
    with pytest.raises(ValueError, match="max_updates must be a positive integer"):
        tiny_config(tmp_path, max_updates=0)


def test_a_run_without_max_updates_reports_its_updates(tmp_path, tiny_llama, tiny_tokenizer):
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=SilentFirst(2),
                          train_dataset=DATA, args=tiny_config(tmp_path, max_steps=3))
    assert trainer.train()["optimizer/updates"] == 1  # 3 steps, the first two without signal


def _run(tmp_path, tiny_llama, tiny_tokenizer, name, **options):
    config = tiny_config(tmp_path, output_dir=str(tmp_path / name), max_steps=2, eval_steps=1, **options)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, eval_dataset=DATA[:4], args=config)
    return trainer, trainer.train(), read_lines(tmp_path / name / "metrics.jsonl")


def test_sampled_evaluations_on_a_subset_leave_the_training_draws_as_they_were(tmp_path, tiny_llama,
                                                                               tiny_tokenizer, monkeypatch):
    import grposcope.trainer.evaluation as evaluation

    seen = []

    def spy(examples, backend, scorer, settings):
        seen.append((len(examples), settings.num_samples, settings.temperature))
        return real(examples, backend, scorer, settings)

    real = evaluation.run_evaluation
    state = {k: v.clone() for k, v in tiny_llama.state_dict().items()}
    _, plain_summary, plain = _run(tmp_path, tiny_llama, tiny_tokenizer, "greedy")
    tiny_llama.load_state_dict(state)  # the second run starts from the same weights
    monkeypatch.setattr(evaluation, "run_evaluation", spy)
    _, summary, sampled = _run(tmp_path, tiny_llama, tiny_tokenizer, "sampled", eval_num_samples=2, eval_limit=3)
    # before, after step 1, after step 2 (reused as "after"): 3 prompts of the 4, 2 samples each at T = 1
    assert seen == [(3, 2, 1.0)] * 3
    assert all("eval/avg@2" in line and "eval/pass@2" in line for line in sampled)
    assert "eval/avg@2 before" in summary and "eval/avg@2" not in plain[0]
    # the training steps drew the same completions: sampling for the evaluation forks the random state
    for key in ("reward/mean", "completion/mean_length", "grad_norm"):
        assert [line[key] for line in sampled] == [line[key] for line in plain], key
