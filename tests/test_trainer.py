"""End-to-end runs of GRPOTrainer on the tiny in-process Llama (and one smoke run on the embedded model)."""

from __future__ import annotations

import json

import pytest
import torch

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.trainer.policy import completion_logps
from grposcope.trainer.setup import make_estimator

DATA = [{"prompt": [{"role": "user", "content": f"What is {a} + {b} ?"}], "answer": str(a + b)}
        for a, b in [(1, 2), (3, 4), (2, 2), (5, 1), (4, 3), (6, 2)]]


def text_length(prompts, completions, **columns):
    """A dense toy reward: the completion's length in characters / 50 (groups of a random model rarely tie)."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [len(t) / 50 for t in texts]


def always_zero(prompts, completions, **columns):
    return [0.0] * len(completions)


def tiny_config(tmp_path, **overrides) -> GRPOConfig:
    options = dict(output_dir=str(tmp_path / "run"), num_generations=4, per_device_train_batch_size=4,
                   gradient_accumulation_steps=2, max_completion_length=6, learning_rate=1e-3, max_steps=2,
                   logging_steps=1, seed=0, temperature=1.0)
    return GRPOConfig(**(options | overrides))


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_steps_log_every_applicable_metric(tmp_path, tiny_llama, tiny_tokenizer):
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, eval_dataset=DATA[:2], args=tiny_config(tmp_path, use_avspo=True))
    summary = trainer.train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert [line["step"] for line in lines] == [1, 2]
    expected = {
        "collapse/acr", "collapse/acr_all_correct", "collapse/acr_all_wrong", "collapse/acr_ema",
        "collapse/acr_cumulative", "collapse/acr_post", "collapse/volatility", "collapse/acr_100",
        "alarm/stagnation", "alarm/entropy_collapse", "alarm/kl_drift", "avspo/tau", "avspo/k_mean",
        "avspo/frac_groups_augmented", "entropy/mean", "reward/mean", "reward/std", "reward/text_length/mean",
        "loss/policy", "clip/low_frac", "clip/high_frac", "grad_norm", "sampler/samples_generated",
        "sampler/tokens_generated", "sampler/samples_kept", "sampler/informative_frac", "sampler/rounds_mean",
        "sampler/prompts_dropped", "completion/mean_length", "completion/truncated_frac", "perf/step_s",
        "perf/gen_tokens_per_s", "perf/train_tokens_per_s",
    }
    for line in lines:
        assert expected <= set(line), expected - set(line)
        assert all(v is None or v == v for v in line.values())  # no NaN
        assert line["sampler/samples_generated"] == 8.0  # 2 prompts x 4 completions
    assert torch.isfinite(torch.tensor(lines[-1]["loss/policy"]))
    assert (tmp_path / "run" / "model" / "model.safetensors").exists()
    assert isinstance(summary, dict)
    # where the run's wall time went, in summary.json only (the printed table is unchanged)
    parts = ["time/load_s", "time/eval_before_s", "time/steps_s", "time/eval_after_s", "time/save_s"]
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [summary[p] > 0 for p in parts] == [True] * 5 and {p: saved[p] for p in parts} == {
        p: summary[p] for p in parts}


def test_an_update_moves_log_probs_the_way_the_advantages_ask(tmp_path, tiny_llama, tiny_tokenizer):
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=tiny_config(tmp_path, learning_rate=1e-4))
    generation = trainer._generate()
    batch = generation.batch
    assert batch.advantages.abs().sum() > 0, "the toy reward should give some non-zero advantages"
    with torch.no_grad():
        before = completion_logps(trainer.model, batch, 1.0, with_entropy=False)[0]
    trainer._optimize(batch)
    with torch.no_grad():
        after = completion_logps(trainer.model, batch, 1.0, with_entropy=False)[0]
    change = ((after - before) * batch.loss_mask).sum(dim=1)  # (N,) change of each completion's log-prob
    # the step ascends sum_i A_i * logp_i: to first order its change is positive
    assert (batch.advantages * change).sum() > 0
    up, down = batch.advantages > 0, batch.advantages < 0
    assert change[up].mean() > change[down].mean()


def test_collapsed_rewards_give_acr_1_and_avspo_rescues_them(tmp_path, tiny_llama, tiny_tokenizer):
    # GRPO: nothing reaches the loss; the paper's AVSPO: every group gets virtual samples; the guard (the
    # default): an all-wrong batch beside no mixed group is left alone, as under GRPO
    for use_avspo, guard, expected_post in ((False, 0.5, 1.0), (True, None, 0.0), (True, 0.5, 1.0)):
        base = tmp_path / f"avspo-{use_avspo}-{guard}"
        args = tiny_config(base, use_avspo=use_avspo, all_wrong_max_share=guard, max_steps=1)
        trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=always_zero,
                              train_dataset=DATA, args=args)
        trainer.train()
        line = read_lines(base / "run" / "metrics.jsonl")[-1]
        assert line["collapse/acr"] == 1.0 and line["reward/mean"] == 0.0
        assert line["collapse/acr_post"] == expected_post


def test_a_reused_generation_is_diagnosed_once_and_clipped_against_its_sampling_policy(tmp_path, tiny_llama,
                                                                                      tiny_tokenizer):
    config = tiny_config(tmp_path, num_iterations=2, max_steps=2, learning_rate=5e-2)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=config)
    trainer.train()
    first, second = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert first["reward/mean"] == second["reward/mean"]  # one generation fed both steps
    assert "collapse/acr" in first and "collapse/acr" not in second  # ... and was diagnosed once
    assert first["clip/low_frac"] == first["clip/high_frac"] == 0.0  # on-policy: ratio 1
    assert second["clip/low_frac"] + second["clip/high_frac"] > 0  # the big first step moved the ratios


def test_generation_runs_in_eval_mode_and_updates_in_train_mode(tmp_path, tiny_llama, tiny_tokenizer):
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=tiny_config(tmp_path))
    modes = []
    generate = trainer.backend.generate

    def recording(*args, **kwargs):
        modes.append(trainer.model.training)
        return generate(*args, **kwargs)

    trainer.backend.generate = recording
    trainer.train()  # 2 steps: the second generation follows an update, which left the model in train mode
    assert modes == [False, False]


def test_lora_run_measures_kl_to_the_adapters_off_policy_at_beta_0(tmp_path, tiny_llama, tiny_tokenizer):
    pytest.importorskip("peft")
    config = tiny_config(tmp_path, use_peft=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, beta=0.0,
                         learning_rate=5e-2)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=config)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)  # only the adapters train
    trainer.train()
    first, second = read_lines(tmp_path / "run" / "metrics.jsonl")
    # step 1: the adapters start at zero (LoRA's B = 0), so the policy is the reference: KL exactly 0;
    # step 2 follows an update, so the policy has moved away from it
    assert first["kl/mean"] == pytest.approx(0.0, abs=1e-6) and second["kl/mean"] > 1e-6
    assert "loss/kl" not in first  # beta 0: measured, not in the loss


def test_a_used_output_dir_is_not_overwritten(tmp_path, tiny_llama, tiny_tokenizer):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1}\n')
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=tiny_config(tmp_path))
    with pytest.raises(ValueError, match="already holds a run.*--resume"):  # checked when train() starts
        trainer.train()
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == '{"step": 1}\n'


def test_seed_example_runs_with_only_the_import_changed(tmp_path, tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM

    monkeypatch.chdir(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    dataset = [{"prompt": "What is 2 + 3 ?", "answer": "5"}]
    # --- the seed's example, with its import line changed (and max_steps, to keep the test short) ---
    from grposcope import GRPOConfig, GRPOTrainer
    from grposcope.rewards import box_accuracy_reward
    config = GRPOConfig(output_dir="./output", per_device_train_batch_size=1, num_generations=8, temperature=1.0,
                        learning_rate=1e-6, max_completion_length=1024,
                        use_avspo=True, acr_threshold_init=0.5, virtual_sample_alpha=0.5, max_steps=1)
    trainer = GRPOTrainer(model=model, args=config, reward_funcs=box_accuracy_reward, train_dataset=dataset)
    trainer.train()
    # -------------------------------------------------------------------------------------------------
    line = read_lines(tmp_path / "output" / "metrics.jsonl")[0]
    assert line["sampler/samples_generated"] == 8.0  # one prompt with its 8 completions in the step
    assert line["collapse/acr"] == 1.0 and line["avspo/frac_groups_augmented"] == 1.0  # no box: all wrong


def test_strict_format_collapse_all_wrong_batch():
    from grposcope.rewards import box_accuracy_reward

    completions = ["The answer is 5.", "5", "I think it is 4", "five"] * 2  # no \\boxed{}: all score 0
    rewards = torch.tensor(box_accuracy_reward(["What is 2 + 3?"] * 8, completions, answer=["5"] * 8)).view(1, 8)
    assert rewards.sum() == 0
    grpo = make_estimator(GRPOConfig())(rewards)
    assert torch.equal(grpo.advantages, torch.zeros(1, 8))  # the collapse: no gradient at all
    avspo = make_estimator(GRPOConfig(use_avspo=True, all_wrong_max_share=None))(rewards)
    assert (avspo.advantages < 0).all()  # the paper's AVSPO turns the same batch into a push away from them
    guarded = make_estimator(GRPOConfig(use_avspo=True))(rewards)
    assert torch.equal(guarded.advantages, torch.zeros(1, 8))  # the guard: no mixed group, no push


@pytest.mark.embedded
def test_smoke_on_the_embedded_model(tmp_path):
    config = GRPOConfig(output_dir=str(tmp_path / "smoke"), num_generations=2, per_device_train_batch_size=4,
                        max_completion_length=16, max_steps=1, learning_rate=1e-6, dataset_name="arithmetic",
                        dataset_size=4, eval_size=2, logging_steps=1)
    summary = GRPOTrainer(args=config).train()
    assert summary["eval/accuracy before"] >= 0.0
    line = read_lines(tmp_path / "smoke" / "metrics.jsonl")[0]
    assert line["sampler/samples_generated"] == 4.0  # 2 prompts x 2 completions
    assert line["completion/mean_length"] <= 16 and "collapse/acr" in line
    assert torch.isfinite(torch.tensor(line["loss/policy"]))


def test_entropy_kl_and_clip_fractions_are_token_means_over_the_whole_batch(tmp_path, tiny_llama, tiny_tokenizer,
                                                                           monkeypatch):
    # Hand case: 4 rows x 2 tokens at entropy 1.0, 4 rows x 20 tokens at 0.2, micro-batches of 4 (one group
    # each). Token mean: (8 * 1.0 + 80 * 0.2) / 88 = 24 / 88 = 0.272727; a mean of micro-batch means reads 0.6.
    from grposcope.trainer import trainer as trainer_module
    from grposcope.trainer.policy import TrainBatch

    args = tiny_config(tmp_path, per_device_train_batch_size=4, gradient_accumulation_steps=2, kl_estimator="k1")
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=args)
    short = torch.arange(8) < 4  # (8,) rows 0-3: 2 tokens; rows 4-7: 20 tokens
    loss_mask = torch.zeros(8, 20)
    loss_mask[short, :2], loss_mask[~short] = 1, 1
    per_row = lambda a, b: torch.where(short, a, b).unsqueeze(1).expand(8, 20).clone()  # noqa: E731  (8, 20)
    batch = TrainBatch(
        prompt_ids=torch.tensor([[5, 6, 7]] * 4 + [[8, 9, 10]] * 4), prompt_mask=torch.ones(8, 3, dtype=torch.long),
        completion_ids=torch.randint(3, 60, (8, 20)), loss_mask=loss_mask, advantages=torch.ones(8),
        old_logp=per_row(-1.5, -1.0),  # ratio e^0.5 = 1.65 > 1 + eps on the short rows: clipped high there
        ref_logp=per_row(-2.0, -1.2),  # k1 = logp - ref = 1.0 on the short rows, 0.2 on the long ones
    )
    real = trainer_module.completion_logps

    def fixed_logps(model, micro, temperature, with_entropy=False, entropy_grad=False):
        logp, _ = real(model, micro, temperature)  # (n, T), keeps the graph (its gradient here is 0)
        is_short = micro.loss_mask.sum(dim=1, keepdim=True) == 2  # (n, 1)
        entropy = torch.where(is_short, 1.0, 0.2).expand_as(logp)
        return logp * 0 - 1.0, entropy  # logp = -1 everywhere

    monkeypatch.setattr(trainer_module, "completion_logps", fixed_logps)
    figures, _ = trainer._optimize(batch)
    metrics = figures.metrics()
    assert metrics["entropy/mean"] == figures.entropy == pytest.approx(24 / 88, abs=1e-6)
    assert metrics["kl/mean"] == figures.kl == pytest.approx(24 / 88, abs=1e-6)
    assert metrics["clip/high_frac"] == pytest.approx(8 / 88, abs=1e-6) and metrics["clip/low_frac"] == 0.0


def test_completions_and_what_reward_functions_log_are_visible(tmp_path, tiny_llama, tiny_tokenizer):
    from grposcope.logging import read_completions

    seen_states = []

    def judged(completions, answer, trainer_state, log_extra, log_metric, **kwargs):
        seen_states.append((trainer_state.global_step, trainer_state.max_steps, trainer_state.epoch))
        log_metric("judge/calls", 1.0)
        log_extra("judge", [f"answer {a}" for a in answer])
        return [len(c[0]["content"]) / 50 for c in completions]

    args = tiny_config(tmp_path, max_steps=4, logging_steps=2, num_completions_to_print=6)
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=[judged, always_zero],
                train_dataset=DATA, args=args).train()
    # 2 prompts per step of the 6: the state each generation saw, epochs as a fraction of the prompts taken
    assert seen_states == [(0, 4, 0.0), (1, 4, 2 / 6), (2, 4, 4 / 6), (3, 4, 1.0)]
    rows = read_completions(tmp_path / "run" / "completions.jsonl")
    assert [r["step"] for r in rows] == [2] * 6 + [4] * 6  # every logging_steps, num_completions_to_print rows
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    for row in rows[:6]:
        assert set(row) == {"step", "prompt", "completion", "rewards", "reward", "advantage", "answer", "judge"}
        assert row["rewards"]["judged"] == pytest.approx(len(row["completion"][0]["content"]) / 50)
        assert row["rewards"]["always_zero"] == 0.0 and row["reward"] == pytest.approx(row["rewards"]["judged"])
        answer = next(e["answer"] for e in DATA if e["prompt"] == row["prompt"])
        assert row["answer"] == answer  # the reference answer, for grposcope audit-rewards
        assert row["judge"] == f"answer {answer}"  # log_extra's column follows its sample
    first_group = [r["reward"] for r in rows[:4]]  # the first G = 4 rows are one group
    mean, std = sum(first_group) / 4, torch.tensor(first_group).std().item()
    assert rows[0]["advantage"] == pytest.approx((first_group[0] - mean) / (std + 1e-4), abs=1e-5)
    assert all(line["judge/calls"] == 1.0 for line in lines)  # log_metric lands in metrics.jsonl


def test_a_log_extra_column_named_answer_is_refused_rather_than_overwritten(tmp_path, tiny_llama,
                                                                           tiny_tokenizer):
    def parses(completions, log_extra, **kwargs):
        log_extra("answer", ["?"] * len(completions))  # would hide the reference answer completions.jsonl keeps
        return [0.0] * len(completions)

    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=parses,
                          train_dataset=DATA, args=tiny_config(tmp_path, max_steps=1))
    with pytest.raises(ValueError, match="log_extra column 'answer'.*rename the log_extra column"):
        trainer.train()


def test_avspo_and_the_monitor_update_once_per_generation_batch(tmp_path, tiny_llama, tiny_tokenizer):
    # docs/algorithms.md ("When it updates"): 4 optimizer steps fed by 2 generation batches of 2 steps each
    args = tiny_config(tmp_path, max_steps=4, gradient_accumulation_steps=1, steps_per_generation=2, use_avspo=True,
                       acr_threshold_eta=0.5)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=always_zero,
                          train_dataset=DATA, args=args)
    trainer.train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert trainer.monitor.step == 2 and [("collapse/acr" in line) for line in lines] == [True, False, True, False]
    signals = [line["avspo/signal"] for line in lines]
    assert signals[0] == signals[1] == 1.0 and signals[2] == signals[3]  # one estimator call per generation


def test_max_samples_stops_once_the_completions_are_spent_and_resumes_counting(tmp_path, tiny_llama, tiny_tokenizer,
                                                                               capsys):
    # 8 completions a step (2 prompts x G = 4, the fixed sampler): a budget of 20 is spent by step 3 (24)
    def run(max_samples, resume=None):
        config = tiny_config(tmp_path, max_steps=10, max_samples=max_samples, save_steps=2)
        trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                              train_dataset=DATA, args=config)
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    trainer = run(20)
    # the progress line counts to where the budget ends (3), not to max_steps (10)
    shown = [line.split(" |")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert shown == ["step 1/3", "step 2/3", "step 3/3"]
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert [line["step"] for line in lines] == [1, 2, 3]
    assert [line["sampler/samples_generated"] for line in lines] == [8, 8, 8]
    assert trainer.state_dict()["samples_generated"] == 24
    # from checkpoint-2 (16 spent) with a budget of 40: steps 3, 4 and 5 spend the other 24
    resumed = run(40, resume=str(tmp_path / "run" / "checkpoint-2"))
    assert resumed.global_step == 5 and resumed.samples_generated == 40
    with pytest.raises(ValueError, match="max_samples must be > 0"):
        tiny_config(tmp_path, max_samples=0)


def test_max_samples_counts_every_completion_drawn_not_those_kept(tmp_path, tiny_llama, tiny_tokenizer):
    # dynamic sampling on groups that always collapse: each step draws max_gen_batches = 3 batches of 2 prompts x
    # G = 4 = 24 completions and trains on 8. A budget of 30 is spent by step 2 (48); counting the kept ones
    # (8 a step) would run to step 4 (32)
    config = tiny_config(tmp_path, max_steps=10, max_samples=30, sampler="dynamic")
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=always_zero,
                          train_dataset=DATA, args=config)
    trainer.train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert [line["step"] for line in lines] == [1, 2]
    assert [line["sampler/samples_generated"] for line in lines] == [24, 24]
    assert [line["sampler/samples_kept"] for line in lines] == [8, 8]
    assert trainer.samples_generated == 48


def test_a_train_batch_moves_every_field_to_the_models_device():
    # the rollout hands its rows back on the CPU and the loss runs where the model is (on a GPU: cuda); the
    # "meta" device stands in for a second device on this machine
    from dataclasses import fields

    from grposcope.trainer.policy import TrainBatch

    batch = TrainBatch(**{f.name: torch.zeros(2, 3) for f in fields(TrainBatch)})
    moved = batch.to(torch.device("meta"))
    assert all(getattr(moved, f.name).device.type == "meta" for f in fields(TrainBatch))
    assert TrainBatch(*(torch.zeros(2, 3) for _ in range(5))).to(torch.device("meta")).old_logp is None
