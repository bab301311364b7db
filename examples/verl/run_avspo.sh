#!/usr/bin/env bash
# AVSPO (arXiv 2605.21125) as verl 0.9.1's advantage estimator, with the ACR family in verl's metrics.
# Needs GPUs and verl's GPU extras (pip install "verl[vllm]==0.9.1" plus grposcope, in their own environment):
# not run in CI. tests/verl (bash scripts/test_verl.sh) checks every grposcope piece used here on the CPU, and
# that these overrides compose with verl's own config.
#
#   bash examples/verl/run_avspo.sh MODEL TRAIN.parquet VAL.parquet [more overrides...]
#
# verl computes advantages in its TaskRunner (a Ray actor): VERL_USE_EXTERNAL_MODULES makes every process that
# imports verl import grposcope's plugin there. For a multi-node Ray cluster, also pass it to the workers:
#   +ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES=grposcope.integrations.verl
set -euo pipefail
model="$1" train="$2" val="$3"
shift 3
export VERL_USE_EXTERNAL_MODULES=grposcope.integrations.verl
exec python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=avspo \
  +algorithm.grposcope.virtual_sample_alpha=0.5 \
  +algorithm.grposcope.acr_threshold_init=0.5 \
  +algorithm.grposcope.success_threshold=0.5 \
  trainer.checkpoint_callback_class=grposcope.integrations.verl.GrposcopeCheckpointCallback \
  trainer.v1.sampler.custom_sampler.path=pkg://grposcope.integrations.verl_metrics \
  trainer.v1.sampler.custom_sampler.name=GrposcopeReplayBuffer \
  data.train_files="$train" data.val_files="$val" \
  data.train_batch_size=64 \
  actor_rollout_ref.model.path="$model" \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  trainer.n_gpus_per_node=8 trainer.nnodes=1 \
  trainer.logger='["console"]' \
  "$@"
