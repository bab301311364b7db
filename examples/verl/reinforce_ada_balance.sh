#!/usr/bin/env bash
# Reinforce-Ada-balance ("Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training",
# arXiv 2510.04996) inside verl 0.9.1's default (v1) trainer: Qwen2.5-Math-1.5B on MATH-style parquet data.
# NEEDS GPUs (8 on one node) and verl's GPU extras (pip install "verl[vllm]==0.9.1" plus grposcope, in their own
# environment): not run in CI. tests/verl/test_verl_v1.py (bash scripts/test_verl.sh) runs the sampler in verl's
# v1 trainer on the CPU with a stand-in agent loop; tests/verl/test_verl_sampling.py checks that these overrides
# compose with verl's config.
#
#   bash examples/verl/reinforce_ada_balance.sh TRAIN.parquet VAL.parquet [more overrides...]
#
# From the paper and its released verl script: rounds of 8 completions per still-active prompt, at most 4
# rounds, the "balance" exit rule (a prompt leaves once it has G/2 correct and G/2 wrong completions), each
# prompt's pool down-sampled to a balanced group of G = rollout.n = 4, the baseline the mean of the whole pool
# (grposcope_pool, no std, as the released script trains), 512 prompts per step in mini-batches of 128, learning
# rate 1e-6 with 10 warm-up steps and no weight decay, clip 0.2 / 0.28, no KL, token-mean loss, temperature 1.0,
# prompts up to 1024 and responses up to 2048 tokens, 400 steps.
#
# The v1 trainer's sync mode (its default) runs the sampler in grposcope's replay buffer; trainer.use_v1=False
# runs it around the legacy trainer's rollout manager instead, with the same keys. The no-signal skip is on
# (+algorithm.grposcope.skip_no_signal_steps=false turns it off). VERL_USE_EXTERNAL_MODULES makes every process that imports verl import
# grposcope's plugin (grposcope's "verl.plugins" entry point does the same once grposcope is installed); on a
# multi-node Ray cluster also pass it to the workers:
#   +ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES=grposcope.integrations.verl
set -euo pipefail
train="$1" val="$2"
shift 2
model="${MODEL:-Qwen/Qwen2.5-Math-1.5B}"
export VERL_USE_EXTERNAL_MODULES=grposcope.integrations.verl
exec python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grposcope_pool \
  +algorithm.grposcope.sampler=reinforce_ada \
  +algorithm.grposcope.exit_rule=balance \
  +algorithm.grposcope.round_size=8 \
  +algorithm.grposcope.max_rounds=4 \
  +algorithm.grposcope.success_threshold=0.5 \
  algorithm.use_kl_in_reward=False \
  data.train_files="$train" data.val_files="$val" \
  data.prompt_key=prompt data.truncation=left \
  data.max_prompt_length=1024 data.max_response_length=2048 \
  data.train_batch_size=512 \
  actor_rollout_ref.model.path="$model" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.optim.lr_warmup_steps=10 \
  actor_rollout_ref.actor.optim.weight_decay=0 \
  actor_rollout_ref.actor.ppo_mini_batch_size=128 \
  actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=6144 \
  actor_rollout_ref.actor.clip_ratio_low=0.2 \
  actor_rollout_ref.actor.clip_ratio_high=0.28 \
  actor_rollout_ref.actor.clip_ratio_c=10.0 \
  actor_rollout_ref.actor.use_kl_loss=False \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.actor.grad_clip=1.0 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.top_p=1.0 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.8 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.val_kwargs.temperature=0 \
  actor_rollout_ref.rollout.val_kwargs.do_sample=False \
  actor_rollout_ref.rollout.val_kwargs.n=1 \
  trainer.n_gpus_per_node=8 trainer.nnodes=1 \
  trainer.total_training_steps=400 \
  trainer.test_freq=50 trainer.save_freq=50 \
  trainer.project_name=grposcope trainer.experiment_name=reinforce-ada-balance-qwen2.5-math-1.5b \
  trainer.logger='["console"]' \
  "$@"
