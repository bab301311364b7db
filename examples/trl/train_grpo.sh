#!/usr/bin/env bash
# The cluster recipe: Qwen2.5-Math-1.5B on MATH-style data with AVSPO, TRL driving vLLM and DeepSpeed ZeRO-3.
# NEEDS GPUs (8 on one node) and `pip install "trl[vllm]==1.16.*" deepspeed`; not run in CI.
#
#   bash examples/trl/train_grpo.sh colocate   # vLLM shares the 8 training GPUs (default)
#   bash examples/trl/train_grpo.sh server     # vLLM on GPU 7 (`trl vllm-serve`), training on GPUs 0-6
#
# Extra arguments go to train_grpo.py (any GRPOConfig field: --sampler dynamic, --max_steps 100, ...).
# The same script on the CPU, with the embedded model and no vLLM (what the test suite runs for 2 steps):
#   python examples/trl/train_grpo.py --model_name_or_path embedded:smollm2-135m-instruct \
#       --dataset_name arithmetic --use_vllm false --use_cpu true --bf16 false --max_steps 2
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-colocate}"
shift || true
model="${MODEL:-Qwen/Qwen2.5-Math-1.5B}"
data="${DATASET:-DigitalLearningGmbH/MATH-lighteval}"  # any dataset with `problem` and `solution` columns
common=(
  --model_name_or_path "$model" --dataset_name "$data" --output_dir "output/trl-avspo"
  --num_generations 8 --per_device_train_batch_size 8 --gradient_accumulation_steps 4
  --temperature 1.0 --learning_rate 1e-6 --max_completion_length 1024 --bf16 true
  --use_avspo true --acr_threshold_init 0.5 --virtual_sample_alpha 0.5
  --logging_steps 1 --save_steps 100 --report_to wandb tensorboard
)
case "$mode" in
  colocate)
    accelerate launch --config_file "$here/zero3.yaml" --num_processes 8 "$here/train_grpo.py" \
      "${common[@]}" --use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization 0.3 "$@"
    ;;
  server)
    CUDA_VISIBLE_DEVICES=7 trl vllm-serve --model "$model" &
    server=$!
    trap 'kill $server' EXIT
    CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 accelerate launch --config_file "$here/zero3.yaml" --num_processes 7 \
      "$here/train_grpo.py" "${common[@]}" --use_vllm true --vllm_mode server "$@"
    ;;
  *)
    echo "usage: bash examples/trl/train_grpo.sh [colocate|server] [train_grpo.py flags]" >&2
    exit 2
    ;;
esac
