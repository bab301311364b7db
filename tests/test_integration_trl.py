"""grposcope inside TRL (grposcope.integrations.trl), on the tiny in-process Llama: nothing is downloaded.

Stock TRL and the subclass generate from the same seed on the same batch, so they see the same completions;
what differs is only what grposcope replaces (advantages, samplers, metrics).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")

from conftest import make_tiny_llama, make_tiny_tokenizer  # noqa: E402

from grposcope.components.build import build  # noqa: E402
from grposcope.integrations import trl_batch  # noqa: E402
from grposcope.integrations.trl import STATE_FILE, GRPOConfig, GRPOTrainer, check_trl  # noqa: E402
from grposcope.trainer import config as own_config  # noqa: E402

PROMPTS = [{"prompt": f"What is {i} + {i} ?", "kind": i % 3, "value": v}
           for i, v in enumerate(torch.rand(12, generator=torch.Generator().manual_seed(0)).tolist())]
G = 4


def parity(prompts, completions, **kwargs):
    """0/1 rewards: the parity of the completion's word count (mixed and collapsed groups both occur)."""
    return [float(len(c.split()) % 2) for c in completions]


def partial_credit(prompts, completions, value, **kwargs):
    """The same partial credit on every completion of a prompt: every group is collapsed."""
    return list(value)


def scripted(prompts, completions, kind, **kwargs):
    """kind 0: all correct, kind 1: all wrong, kind 2: the first half of each group correct (mixed)."""
    return [1.0 if k == 0 else 0.0 if k == 1 else float(i % G < G // 2) for i, k in enumerate(kind)]


def kinds_and_parity(prompts, completions, kind, **kwargs):
    """kind 0: all correct, kind 1: all wrong, kind 2: the parity of the completion's word count."""
    return [1.0 if k == 0 else 0.0 if k == 1 else float(len(c.split()) % 2) for c, k in zip(completions, kind)]


def settings(tmp_path, **overrides):
    values = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=G,
                  max_completion_length=6, max_steps=2, logging_steps=1, save_strategy="no", report_to="none",
                  use_cpu=True, bf16=False, learning_rate=1e-3, seed=0, disable_tqdm=True)
    values.update(overrides)
    return values


def make(cls, config, reward, dataset=PROMPTS):
    torch.manual_seed(0)
    trainer = cls(model=make_tiny_llama(), reward_funcs=reward, args=config, train_dataset=list(dataset)
                  if cls is GRPOTrainer else _dataset(dataset), processing_class=make_tiny_tokenizer())
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by train(); compute_loss reads it
    return trainer


def _dataset(rows):
    from datasets import Dataset

    return Dataset.from_list(rows)


def one_generation(trainer, rows, seed=1, g=G):
    """A training generation on `rows` (the process's batch), from a fixed seed."""
    torch.manual_seed(seed)
    return trainer._generate_and_score_completions([dict(r) for r in rows for _ in range(g)])


def last(trainer, name):
    return trainer._metrics["train"][name][-1]


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_gives_stock_trl_advantages_and_loss(tmp_path, scale):
    values = settings(tmp_path, scale_rewards=scale, per_device_train_batch_size=12)
    ours = make(GRPOTrainer, GRPOConfig(**values), kinds_and_parity)
    stock = make(trl.GRPOTrainer, trl.GRPOConfig(**values), kinds_and_parity)
    mine, theirs = one_generation(ours, PROMPTS[:3]), one_generation(stock, PROMPTS[:3])
    assert torch.equal(mine["completion_ids"], theirs["completion_ids"])  # same seed, same completions
    assert last(ours, "collapse/acr") == pytest.approx(2 / 3)  # all correct, all wrong, mixed
    torch.testing.assert_close(mine["advantages"], theirs["advantages"], atol=1e-6, rtol=0)
    assert mine["advantages"].abs().max() > 0.1
    loss_mine = ours.compute_loss(ours.model, mine)
    loss_theirs = stock.compute_loss(stock.model, theirs)
    torch.testing.assert_close(loss_mine, loss_theirs, atol=1e-6, rtol=0)
    print(f"scale_rewards={scale}: max |A - A_TRL| {(mine['advantages'] - theirs['advantages']).abs().max():.2e}, "
          f"loss {loss_mine.item():.6f} vs TRL {loss_theirs.item():.6f}")
    # on-policy, the loss is sum_i A_i * tokens_i / tokens, often 0; its gradient is not, and must match too
    loss_mine.backward()
    loss_theirs.backward()
    grads = [(a.grad, b.grad) for a, b in zip(ours.model.parameters(), stock.model.parameters())]
    assert max(a.abs().max() for a, _ in grads) > 1e-4
    for a, b in grads:
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    print(f"  gradients: largest {max(a.abs().max() for a, _ in grads):.3g}, largest difference from TRL's "
          f"{max((a - b).abs().max() for a, b in grads):.2e}")
    # on 0/1 rewards, the ACR is TRL's frac_reward_zero_std under group scaling or none; under batch scaling TRL
    # tests the batch's std, which is not zero here
    frac = last(stock, "frac_reward_zero_std")
    assert last(ours, "frac_reward_zero_std") == frac
    assert frac == (0.0 if scale == "batch" else pytest.approx(last(ours, "collapse/acr"), abs=1e-6))


def test_acr_counts_the_partial_credit_groups_trl_misses(tmp_path):
    """All-equal groups of a partial-credit reward: TRL's float32 std is not always exactly 0, so
    frac_reward_zero_std misses some and hands them advantages; grposcope's float64 statistics count them all
    and give them exactly 0."""
    eight = settings(tmp_path, per_device_train_batch_size=96, num_generations=8)
    ours = make(GRPOTrainer, GRPOConfig(**eight), partial_credit)
    stock = make(trl.GRPOTrainer, trl.GRPOConfig(**eight), partial_credit)
    mine, theirs = one_generation(ours, PROMPTS, g=8), one_generation(stock, PROMPTS, g=8)
    assert last(ours, "collapse/acr") == 1.0
    assert torch.count_nonzero(mine["advantages"]) == 0
    missed = 1.0 - last(stock, "frac_reward_zero_std")
    assert missed > 0, "these values were chosen because TRL's isclose(std, 0) misses some of them"
    assert torch.count_nonzero(theirs["advantages"]) > 0
    print(f"TRL frac_reward_zero_std {last(stock, 'frac_reward_zero_std'):.3f}, grposcope collapse/acr 1.0; "
          f"TRL's largest |A| on these all-equal groups: {theirs['advantages'].abs().max():.3g}")


def test_avspo_on_a_collapsed_batch_matches_the_own_trainer(tmp_path):
    options = dict(use_avspo=True, acr_threshold_init=0.2, virtual_sample_alpha=0.5, acr_ema_lambda=0.0)
    ours = make(GRPOTrainer, GRPOConfig(**settings(tmp_path), **options), scripted)
    output = one_generation(ours, PROMPTS[1:3])  # an all-wrong group and a mixed one
    assert last(ours, "collapse/acr") == 0.5 and last(ours, "avspo/frac_groups_augmented") == 0.5
    # grposcope's own trainer builds its estimator from its own config, with the same options
    own = own_config.GRPOConfig(num_generations=G, seed=0, **options)
    rewards = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    expected = build(own, "advantage_estimator")(rewards).advantages.reshape(-1)
    assert expected[:G].abs().min() > 0  # the all-wrong group is pushed down, not left at 0
    torch.testing.assert_close(output["advantages"], expected, atol=1e-6, rtol=0)
    assert list(ours._logs["advantages"]) == pytest.approx(expected.tolist())


def test_dynamic_sampling_refills_with_mixed_groups(tmp_path):
    config = GRPOConfig(**settings(tmp_path, per_device_train_batch_size=12), sampler="dynamic", max_gen_batches=4)
    ours = make(GRPOTrainer, config, scripted)
    output = one_generation(ours, PROMPTS[:3])  # kinds 0, 1, 2: two groups collapsed
    rounds = last(ours, "sampler/gen_batches")
    assert rounds > 1 and last(ours, "collapse/acr") >= 2 / 3
    assert output["completion_ids"].shape[0] == 12 and output["advantages"].shape == (12,)
    kept = 12 - int(last(ours, "sampler/shortfall")) * G
    trained = output["advantages"].view(-1, G)[: kept // G]
    assert (trained.abs().sum(dim=1) > 0).all()  # every kept group is mixed
    assert output["completion_mask"][kept:].sum() == 0  # a shortfall's filler takes no part in the loss
    assert float(output["num_items_in_batch"]) == float(output["completion_mask"].sum())
    assert last(ours, "collapse/acr_post") == 0.0


def test_greso_skips_collapsing_prompts_before_rollout_and_refills_in_trl(tmp_path):
    config = GRPOConfig(**settings(tmp_path, per_device_train_batch_size=12), sampler="greso", max_gen_batches=4)
    ours = make(GRPOTrainer, config, scripted)
    skipped = []
    for seed in range(4):  # the same batch again and again: kinds 0 and 1 build streaks, kind 2 stays mixed
        output = one_generation(ours, PROMPTS[:3], seed=seed)
        skipped.append(last(ours, "sampler/prompts_skipped"))
        kept = 12 - int(last(ours, "sampler/shortfall")) * G
        assert (output["advantages"].view(-1, G)[: kept // G].abs().sum(dim=1) > 0).all()  # only mixed groups
        assert output["completion_mask"][kept:].sum() == 0
    assert skipped[0] == 0 and sum(skipped[1:]) > 0  # nothing known at first; later the streaks are skipped
    assert {kind for kind, _ in ours.sampler.history.values()} == {1, -1, 0}  # easy, hard and mixed prompts seen


def test_pick_rows_fills_a_shortfall_with_masked_rows():
    # two rounds of 2 groups of 2 rows: round 0 rows 0-3, round 1 rows 4-7; keep rows 2, 3 and 6, 7
    batch = {"prompt_ids": torch.arange(8).view(8, 1), "prompt_mask": torch.ones(8, 1, dtype=torch.long),
             "completion_ids": torch.arange(16).view(8, 2), "completion_mask": torch.ones(8, 2, dtype=torch.long)}
    kept, advantages = torch.tensor([[2, 3], [6, 7]]), torch.tensor([[1.0, -1.0], [0.5, -0.5]])
    out = trl_batch.pick_rows(batch, kept, advantages, groups=3, g=2)
    assert out["prompt_ids"].flatten().tolist() == [2, 3, 6, 7, 0, 1]
    assert out["advantages"].tolist() == [1.0, -1.0, 0.5, -0.5, 0.0, 0.0]
    assert out["completion_mask"].sum(dim=1).tolist() == [2, 2, 2, 2, 0, 0]
    assert int(trl_batch.items_in_batch(out)) == 8
    assert trl_batch.local_slice(out, 1, 3)["prompt_ids"].flatten().tolist() == [7, 0, 1]


def test_trim_drops_padding_columns():
    batch = {"prompt_ids": torch.tensor([[0, 0, 5], [0, 4, 5]]), "prompt_mask": torch.tensor([[0, 0, 1], [0, 1, 1]]),
             "completion_ids": torch.tensor([[7, 0, 0], [7, 8, 0]]),
             "completion_mask": torch.tensor([[1, 0, 0], [1, 1, 0]]), "advantages": torch.tensor([1.0, -1.0])}
    out = trl_batch.trim(batch)
    assert out["prompt_ids"].tolist() == [[0, 5], [4, 5]] and out["completion_ids"].tolist() == [[7, 0], [7, 8]]
    assert out["advantages"].tolist() == [1.0, -1.0]


def test_estimator_state_saved_and_restored_with_trl_checkpoints(tmp_path):
    config = GRPOConfig(**settings(tmp_path, save_strategy="steps", save_steps=2, max_steps=2), use_avspo=True)
    first = make(GRPOTrainer, config, parity)
    first.train()
    saved = tmp_path / "out" / "checkpoint-2" / STATE_FILE
    assert saved.exists()
    state = first.grposcope_state()
    assert state["monitor"]["step"] == 2 and state["estimator"]["acr_ema"] is not None
    resumed = make(GRPOTrainer, GRPOConfig(**settings(tmp_path, save_strategy="steps", save_steps=2, max_steps=3),
                                           use_avspo=True), parity)
    resumed.create_optimizer_and_scheduler(num_training_steps=3)
    resumed._load_optimizer_and_scheduler(str(saved.parent))
    assert resumed.monitor.state_dict() == state["monitor"]
    assert resumed.estimator.state_dict()["tau"] == state["estimator"]["tau"]
    assert resumed.estimator.state_dict()["acr_ema"] == state["estimator"]["acr_ema"]
    # through TRL's own resume: the monitor continues from step 2, so one more step makes 3
    again = make(GRPOTrainer, GRPOConfig(**settings(tmp_path, save_strategy="no", max_steps=3), use_avspo=True), parity)
    again.train(resume_from_checkpoint=str(saved.parent))
    assert again.monitor.step == 3 and again.monitor.groups_seen == 3 * 2
    saved.unlink()
    with pytest.raises(FileNotFoundError, match="not written by grposcope"):
        resumed._load_optimizer_and_scheduler(str(saved.parent))


@pytest.mark.parametrize("option, value, message", [
    ("success_threshold", float("nan"), r"option success_threshold: got nan; give a finite number"),
    ("kl_bound", -1.0, r"kl_bound must be > 0 \(the mean per-token KL above which the KL-drift alarm fires, "
                       r"e.g. 0.5\), got -1.0"),
    ("diagnose_every", -3, r"diagnose_every must be >= 0 .*got -3"),
    ("advantage_eps", 0.0, r"advantage_eps must be > 0 .*got 0.0"),
])
def test_the_trl_config_applies_grposcopes_option_ranges(tmp_path, option, value, message):
    # the one table (components/ranges.py) wherever a GRPOConfig is built: TRL's too
    with pytest.raises(ValueError, match=message):
        GRPOConfig(**settings(tmp_path), **{option: value})


def test_config_errors_name_the_fix(tmp_path):
    with pytest.raises(ValueError, match="known: "):
        GRPOConfig(**settings(tmp_path), advantage_estimator="nope")
    with pytest.raises(ValueError, match="use_avspo=True conflicts with advantage_estimator='rloo'"):
        GRPOConfig(**settings(tmp_path), use_avspo=True, advantage_estimator="rloo")
    with pytest.raises(ValueError, match="sum_then_normalize"):
        GRPOConfig(**settings(tmp_path), multi_objective_aggregation="normalize_then_sum")
    with pytest.raises(ValueError, match="all_wrong_max_share"):
        GRPOConfig(**settings(tmp_path), use_avspo=True, all_wrong_max_share=2.0)
    with pytest.raises(TypeError, match="grposcope's config"):
        GRPOTrainer(model=make_tiny_llama(), reward_funcs=parity, args=trl.GRPOConfig(**settings(tmp_path)),
                    train_dataset=PROMPTS, processing_class=make_tiny_tokenizer())
    with pytest.warns(UserWarning, match="scale_rewards='batch' is not used: advantage_estimator='avspo'"):
        GRPOConfig(**settings(tmp_path), use_avspo=True, scale_rewards="batch")
    config = GRPOConfig(**settings(tmp_path), use_avspo=False, virtual_sample_alpha=0.3, scale_rewards="none")
    assert (config.advantage_estimator, config.virtual_sample_alpha, config.scale_rewards) == ("grpo", 0.3, "none")
    assert config.unused_options() == ["virtual_sample_alpha=0.3 is not used: advantage_estimator='grpo' does not "
                                       "read it (read by advantage_estimator avspo)"]


def test_untested_trl_is_refused(monkeypatch):
    with pytest.raises(ImportError, match=r"tested with TRL <1.17,>=1.16 and this is TRL 1.15.0"):
        check_trl("1.15.0")
    monkeypatch.setenv("GRPOSCOPE_ALLOW_UNTESTED_TRL", "1")
    check_trl("1.15.0")  # allowed, at the user's word


def test_seed_readme_example_runs_with_the_import_changed(tmp_path):
    """The seed's README example: only the import line differs from `from trl import ...`."""
    from grposcope.rewards import box_accuracy_reward

    dataset = [{"prompt": f"What is {i} + 1 ?", "answer": str(i + 1)} for i in range(4)]
    config = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                        temperature=1.0, learning_rate=1e-6, max_completion_length=6, max_steps=1,
                        use_avspo=True, acr_threshold_init=0.5, virtual_sample_alpha=0.5,
                        use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=make_tiny_llama(), args=config, reward_funcs=box_accuracy_reward,
                          train_dataset=dataset, processing_class=make_tiny_tokenizer())
    trainer.train()
    logged = trainer.state.log_history[0]
    assert {"collapse/acr", "avspo/tau", "frac_reward_zero_std", "reward"} <= set(logged)


NEEDS_LAUNCHER = pytest.mark.skipif(
    shutil.which("accelerate") is None and not (Path(sys.executable).parent / "accelerate").exists(),
    reason="needs accelerate's launcher")


def _two_processes(tmp_path, *mode):
    """tests/trl_two_process.py on two CPU processes (torchrun through `accelerate launch --multi_gpu`, gloo)."""
    launcher = Path(sys.executable).parent / "accelerate"
    command = [str(launcher), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no",
               str(Path(__file__).parent / "trl_two_process.py"), str(tmp_path), *mode]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parent)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@NEEDS_LAUNCHER
def test_two_processes_agree_on_advantages_metrics_and_rounds(tmp_path):
    """A group straddling the two processes, dynamic sampling with refill and AVSPO's state: both processes
    hold the same batch and metrics, run the same number of rounds, and the run ends (a hang fails the test
    at the timeout, not CI)."""
    _two_processes(tmp_path)
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(2)]
    assert ranks[0]["processes"] == 2
    assert ranks[0]["records"] == ranks[1]["records"]
    records = ranks[0]["records"]
    assert len(records) == 3 and all(r["rows"] == 6 for r in records)
    assert max(r["metrics"]["sampler/gen_batches"] for r in records) > 1  # refills happened, on both alike
    for r in records:
        assert len(r["advantages"]) == 12
        assert r["num_items_in_batch"] == sum(r["completion_tokens"])
    print(json.dumps([{k: r["metrics"][k] for k in ("sampler/gen_batches", "collapse/acr", "avspo/tau")}
                      for r in records]))



@NEEDS_LAUNCHER
def test_two_processes_skip_a_step_without_signal_together(tmp_path):
    """Step 2 has no signal on either process: both skip it, weights and optimizer state unchanged. Step 3 has
    signal on process 0 only: both take it (the gradients are shared), and the weights stay equal."""
    _two_processes(tmp_path, "skip")
    ranks = [json.loads((tmp_path / f"skip{i}.json").read_text()) for i in range(2)]
    for rank in ranks:
        assert rank["skipped"] == [0.0, 1.0, 0.0]
        _, second, third = rank["records"]
        assert second["weights_unchanged"] and second["optimizer_unchanged"]
        assert not third["weights_unchanged"] and not third["optimizer_unchanged"]
    assert [r["checksum"] for r in ranks[0]["records"]] == [r["checksum"] for r in ranks[1]["records"]]


@pytest.mark.embedded
def test_cluster_recipe_script_runs_on_the_cpu(tmp_path):
    """examples/trl/train_grpo.py, as train_grpo.sh launches it on GPUs, here on the CPU with the embedded model
    and no vLLM, for 2 steps: the checkpoint's log history holds the collapse and AVSPO metrics."""
    script = Path(__file__).parents[1] / "examples" / "trl" / "train_grpo.py"
    command = [sys.executable, str(script), "--model_name_or_path", "embedded:smollm2-135m-instruct",
               "--dataset_name", "arithmetic", "--use_vllm", "false", "--use_cpu", "true", "--bf16", "false",
               "--max_steps", "2", "--output_dir", str(tmp_path / "out"), "--per_device_train_batch_size", "4",
               "--num_generations", "4", "--max_completion_length", "16", "--use_avspo", "true", "--train_size", "16",
               "--logging_steps", "1", "--save_steps", "2", "--report_to", "none", "--disable_tqdm", "true"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = tmp_path / "out" / "checkpoint-2"
    history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "loss" in h]
    assert len(steps) == 2
    assert all({"collapse/acr", "collapse/acr_all_wrong", "avspo/tau", "avspo/k_mean"} <= set(h) for h in steps)
    assert (checkpoint / STATE_FILE).exists()


def test_unscored_completions_get_zero_and_are_counted(tmp_path):
    """A completion every reward function returned None for gets 0.0 and is counted in reward/none_frac, as in
    grposcope's own trainer."""

    def first_unscored(prompts, completions, **kwargs):
        return [None if i % G == 0 else 1.0 for i in range(len(completions))]

    ours = make(GRPOTrainer, GRPOConfig(**settings(tmp_path)), first_unscored)
    output = one_generation(ours, PROMPTS[:2])
    assert last(ours, "reward/none_frac") == 0.25
    assert last(ours, "collapse/acr") == 0.0  # 0, 1, 1, 1: not collapsed
    # (0 - 0.75) / (std([0, 1, 1, 1]) + 1e-4) with the unbiased std 0.5: -1.4997; the others 0.25 / 0.5001
    torch.testing.assert_close(output["advantages"].view(2, G)[:, 0], torch.full((2,), -0.75 / 0.5001))
    torch.testing.assert_close(output["advantages"].view(2, G)[:, 1:], torch.full((2, 3), 0.25 / 0.5001))


def parity_then_zero(prompts, completions, trainer_state, **kwargs):
    """Mixed 0/1 rewards on the first step (word-count parity), every completion 0 after it: step 2 has no signal."""
    if trainer_state.global_step >= 1:
        return [0.0] * len(completions)
    return [float(len(c.split()) % 2) for c in completions]


class _AfterStepOne(transformers.TrainerCallback):
    """Keeps the weights and the optimizer state as they are after optimizer step 1."""

    def __init__(self):
        self.weights = self.optimizer = None

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        if state.global_step == 1:
            self.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self.optimizer = copy.deepcopy(optimizer.state_dict())


def _same_state(a, b):
    return a["state"].keys() == b["state"].keys() and all(
        torch.equal(torch.as_tensor(v), torch.as_tensor(b["state"][k][n]))
        for k in a["state"] for n, v in a["state"][k].items())


@pytest.mark.parametrize("skip", [True, False])
def test_a_step_without_signal_leaves_weights_and_optimizer_unchanged(tmp_path, skip):
    config = GRPOConfig(**settings(tmp_path, max_steps=2, skip_no_signal_steps=skip))
    trainer = make(GRPOTrainer, config, parity_then_zero, PROMPTS[:4])
    after_one = _AfterStepOne()
    trainer.add_callback(after_one)
    trainer.train()
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert steps[0]["collapse/acr"] < 1.0 and steps[1]["collapse/acr"] == 1.0
    now = trainer.model.state_dict()
    unchanged = all(torch.equal(now[k], after_one.weights[k]) for k in now)
    same_optimizer = _same_state(trainer.optimizer.state_dict(), after_one.optimizer)
    if skip:
        assert unchanged and same_optimizer
        assert [h["optimizer/skipped_no_signal"] for h in steps] == [0.0, 1.0]
        assert trainer.skipped_no_signal_steps == 1
    else:  # stock TRL: AdamW moves every weight along step 1's momentum
        assert not unchanged and not same_optimizer
        assert "optimizer/skipped_no_signal" not in steps[1]
    assert trainer.lr_scheduler.last_epoch == 2  # the schedule follows the step count either way
