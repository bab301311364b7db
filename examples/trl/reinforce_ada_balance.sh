#!/usr/bin/env bash
# Reinforce-Ada-balance ("Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training",
# arXiv 2510.04996) inside TRL: Qwen2.5-Math-1.5B on MATH-style data, TRL driving vLLM and DeepSpeed ZeRO-3.
# NEEDS GPUs (8 on one node) and `pip install "trl[vllm]==1.16.*" deepspeed`; not run in CI.
#
#   bash examples/trl/reinforce_ada_balance.sh colocate   # vLLM shares the 8 training GPUs (default)
#   bash examples/trl/reinforce_ada_balance.sh server     # vLLM on GPU 7 (`trl vllm-serve`), training on 0-6
#   bash examples/trl/reinforce_ada_balance.sh cpu        # the same sampler flags on the CPU with the embedded
#                                                         # model and no vLLM, 2 steps (what the test suite runs)
#
# From the paper and its released verl script (scripts/run_reinforce_ada.sh of RLHFlow/Reinforce-Ada): rounds of
# 8 completions per active prompt, at most 4 rounds, the "balance" exit rule (a prompt leaves once it has G/2
# correct and G/2 wrong completions), each prompt's pool down-sampled to a balanced group of 4, the baseline the
# mean of the whole pool (advantage_estimator=pool, without the std), temperature 1.0, learning rate 1e-6 with
# 10 warm-up steps and no weight decay, clip 0.2 / 0.28 (epsilon, epsilon_high), no KL (beta 0), token-level
# loss, responses up to 2048 tokens, 400 steps. The batch is train_grpo.sh's (the script's 512 prompts a step
# need --gradient_accumulation_steps to match on your GPUs). Extra arguments go to train_grpo.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-colocate}"
shift || true
sampler=(
  --sampler reinforce_ada --exit_rule balance --round_size 8 --max_rounds 4
  --advantage_estimator pool --pool_std false --num_generations 4 --temperature 1.0
)
paper=(
  --learning_rate 1e-6 --warmup_steps 10 --weight_decay 0 --epsilon 0.2 --epsilon_high 0.28 --beta 0
  --loss_type dapo --max_completion_length 2048 --max_steps 400
)
model="${MODEL:-Qwen/Qwen2.5-Math-1.5B}"
data="${DATASET:-DigitalLearningGmbH/MATH-lighteval}"  # any dataset with `problem` and `solution` columns
common=(
  --model_name_or_path "$model" --dataset_name "$data" --output_dir "output/trl-reinforce-ada-balance"
  --per_device_train_batch_size 8 --gradient_accumulation_steps 4
  --bf16 true --logging_steps 1 --save_steps 100 --report_to wandb tensorboard
)
case "$mode" in
  colocate)
    accelerate launch --config_file "$here/zero3.yaml" --num_processes 8 "$here/train_grpo.py" \
      "${common[@]}" "${sampler[@]}" "${paper[@]}" --use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization 0.3 "$@"
    ;;
  server)
    CUDA_VISIBLE_DEVICES=7 trl vllm-serve --model "$model" &
    server=$!
    trap 'kill $server' EXIT
    CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 accelerate launch --config_file "$here/zero3.yaml" --num_processes 7 \
      "$here/train_grpo.py" "${common[@]}" "${sampler[@]}" "${paper[@]}" --use_vllm true --vllm_mode server "$@"
    ;;
  cpu)
    # the paper's flags too (so that they parse), then the CPU's: the last value of a flag wins
    python "$here/train_grpo.py" "${sampler[@]}" "${paper[@]}" --model_name_or_path embedded:smollm2-135m-instruct \
      --dataset_name arithmetic --use_vllm false --use_cpu true --bf16 false --max_steps 2 \
      --per_device_train_batch_size 4 --max_completion_length 16 --train_size 16 --logging_steps 1 --save_steps 2 \
      --report_to none --disable_tqdm true "$@"
    ;;
  *)
    echo "usage: bash examples/trl/reinforce_ada_balance.sh [colocate|server|cpu] [train_grpo.py flags]" >&2
    exit 2
    ;;
esac
