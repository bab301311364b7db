"""grposcope.integrations.verl_metrics: the ACR family in verl's step metrics through v1's custom sampler hook.

verl builds the sampler with its own PPOTrainer._build_replay_buffer from a config composed by verl's Hydra
files. TransferQueue itself is not started: its batch read and the parent buffer's polling are replaced by
fixed answers, so what runs for real is verl's loading and constructor contract and grposcope's measurement.
Runs in .venv-verl (scripts/test_verl.sh).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl.trainer.ppo.core_algos", reason="needs verl 0.9.1: bash scripts/test_verl.sh")
pytest.importorskip("transfer_queue", reason="needs TransferQueue (verl's v1 trainer): bash scripts/test_verl.sh")

from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer  # noqa: E402
from verl.trainer.ppo.v1.trainer_base import PPOTrainer  # noqa: E402

from grposcope.integrations import verl_metrics  # noqa: E402

SAMPLER = ["trainer.v1.sampler.custom_sampler.path=pkg://grposcope.integrations.verl_metrics",
           "trainer.v1.sampler.custom_sampler.name=GrposcopeReplayBuffer"]


def compose(overrides):
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose("ppo_trainer", overrides=overrides)


def build_sampler(overrides):
    """verl's own PPOTrainer._build_replay_buffer on a trainer that has just what it reads."""
    config = compose(overrides)
    trainer = SimpleNamespace(config=config, trainer_mode=config.trainer.v1.trainer_mode,
                              _add_prompts_to_generate=lambda n: None)
    trainer._resolve_filter_groups_metric = lambda: PPOTrainer._resolve_filter_groups_metric(trainer)
    return PPOTrainer._build_replay_buffer(trainer)


def test_batch_metrics_hand_computed():
    # keys {uid}_{session}_{index}; uid a: [1, 1] collapsed, all correct; b: [0, 0, 0] collapsed, all wrong;
    # c: [1, 0] mixed; d: one trajectory, no group. ACR 2/3, all correct 1/3, all wrong 1/3.
    keys = ["a_0_0", "b_0_0", "c_0_0", "a_1_0", "b_1_0", "c_1_0", "b_2_0", "d_0_0"]
    scores = torch.tensor([1, 0, 1, 1, 0, 0, 0, 1], dtype=torch.float64)
    metrics = verl_metrics.batch_metrics(keys, scores, success_threshold=0.5)
    assert metrics == pytest.approx({"collapse/acr": 2 / 3, "collapse/acr_all_correct": 1 / 3,
                                     "collapse/acr_all_wrong": 1 / 3})


def test_verl_builds_it_from_the_config_and_its_metrics_join_the_steps(monkeypatch):
    sampler = build_sampler(SAMPLER + ["+trainer.v1.sampler.sampler_kwargs.success_threshold=2.0"])
    assert type(sampler) is verl_metrics.GrposcopeReplayBuffer
    keys = ["u1_0_0", "u1_1_0", "u2_0_0", "u2_1_0"]
    rm_scores = [torch.tensor([0.0, 0.0, 2.0]), torch.tensor([0.0, 2.0]), torch.tensor([1.0]), torch.tensor([0.0])]
    monkeypatch.setattr(ReplayBuffer, "sample", lambda self, global_steps, partition_id, batch_size: (
        KVBatchMeta(keys=keys, tags=[{}] * 4, partition_id=partition_id), {"training/filter_groups/x": 1}))
    monkeypatch.setattr(verl_metrics.tq, "kv_batch_get", lambda keys, partition_id, select_fields: {
        "rm_scores": rm_scores})
    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=2)
    # u1 sums to [2, 2]: collapsed, correct at success_threshold 2.0; u2 [1, 0] mixed
    assert batch.keys == keys
    assert metrics == {"training/filter_groups/x": 1, "collapse/acr": 0.5, "collapse/acr_all_correct": 0.5,
                       "collapse/acr_all_wrong": 0.0, "collapse/acr_ema": 0.5, "collapse/acr_cumulative": 0.5,
                       "collapse/acr_100": 0.5, "collapse/volatility": 0.0, "alarm/stagnation": 0.0}
    _, val_metrics = sampler.sample(global_steps=1, partition_id="val", batch_size=2)
    assert val_metrics == {"training/filter_groups/x": 1}  # validation batches are not measured
    # the next step: both groups mixed; the run-long part moves on (acr_ema with lambda 0.9: 0.9 * 0.5 + 0)
    rm_scores[:] = [torch.tensor([2.0]), torch.tensor([0.0]), torch.tensor([1.0]), torch.tensor([0.0])]
    _, metrics = sampler.sample(global_steps=2, partition_id="train", batch_size=2)
    assert metrics["collapse/acr"] == 0.0 and metrics["collapse/acr_ema"] == pytest.approx(0.45)
    assert metrics["collapse/acr_cumulative"] == 0.25 and metrics["collapse/acr_100"] == 0.25
    # its state goes into grposcope's checkpoint state (GrposcopeCheckpointCallback saves it)
    from grposcope.integrations import verl as plugin

    assert plugin.state_dict()[verl_metrics.MONITOR_STATE]["step"] == 2


def test_verl_gives_a_custom_sampler_no_group_filter():
    builtin = build_sampler(["algorithm.filter_groups.enable=True"])
    ours = build_sampler(SAMPLER + ["algorithm.filter_groups.enable=True"])
    assert builtin.filter_groups_metric == "reward"  # verl's buffer drops zero-variance groups
    assert ours.filter_groups_metric is None  # ours keeps them: collapse stays measurable


def test_the_example_scripts_overrides_compose_with_verls_config():
    import shlex
    from pathlib import Path

    from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback

    from grposcope.integrations import verl as plugin

    script = (Path(__file__).parents[2] / "examples" / "verl" / "run_avspo.sh").read_text()
    command = script.split("-m verl.trainer.main_ppo", 1)[1].split('"$@"', 1)[0]
    command = command.replace('"$model"', "m").replace('"$train"', "t.parquet").replace('"$val"', "v.parquet")
    overrides = shlex.split(command.replace("\\\n", " "))
    config = compose(overrides)
    assert config.algorithm.adv_estimator == "avspo"
    assert plugin.estimator_params("avspo", config.algorithm)[0] == {
        "virtual_sample_alpha": 0.5, "acr_threshold_init": 0.5, "success_threshold": 0.5}
    assert isinstance(build_checkpoint_callback(config), plugin.GrposcopeCheckpointCallback)
    assert type(build_sampler(overrides)) is verl_metrics.GrposcopeReplayBuffer
