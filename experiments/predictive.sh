#!/usr/bin/env bash
# The predictive analysis of docs/results.md (section 3): does early ACR predict final accuracy, and does a
# probe forecast the ACR a run measures? Every command that produced a number there, in order. Run from the
# repository root with the environment active (source .venv/bin/activate). Outputs go to runs/.
set -euo pipefail

# 3a. Simulator: G x difficulty sweep (45 runs of 100 steps, 5,000 prompts, 64 prompts a step; ~15 s), then the
#     acr_100 -> final accuracy regression over its runs.
grposcope sweep --out runs/predict/sim --backend simulate --group_sizes 4,8,16 --levels=-3,-2,-1,0,1 \
    --seeds 0,1,2 --max_steps 100 --prompts 5000 --batch_size 64
grposcope report runs/predict/sim --regress --out runs/predict/sim_report --overwrite
# The 45 runs' metrics.jsonl and summary.json are kept in experiments/results/predict/sim45/<run>.<file>.gz
# (rerun 2026-11-26: the same line, 0.739 - 0.537 x acr_100, r = -0.374, p = 0.0115).

# 3b. Embedded model: G x level sweep (4 runs of 12 steps, quickstart settings otherwise; ~25 min on 2 cores).
grposcope sweep --out runs/sweep16/embedded --group_sizes 4,8 --levels easy,hard --seeds 0 --max_steps 12 \
    --torch_threads 1 --eval_steps 6
grposcope report runs/sweep16/embedded --regress --out runs/predict/embedded_report --overwrite

# 3c. The study's own 21 runs (experiments/study.py train): ACR over the run against held-out greedy accuracy.
grposcope report runs/study/*-s[0-9] --regress --out runs/predict/study_report --overwrite

# 3d. Forecast against measured: a probe of 80 training prompts x 16 samples (~8 min), the forecast from it, and
#     8 fresh GRPO runs (G = 8, seeds 10-17, 5 steps each) whose first 80 groups are the measurement.
grposcope probe --k 16 --prompts 80 --seed 0 --eval_size 48 --max_completion_length 24 --max_prompt_length 256 \
    --out runs/forecast16/probe_k16.jsonl
grposcope forecast runs/forecast16/probe_k16.jsonl --group_sizes 2,4,8,16 --budget 16 \
    --json runs/forecast16/forecast_k16.json --plot runs/forecast16/forecast_k16.png
grposcope sweep --out runs/forecast16/measure --group_sizes 8 --seeds 10,11,12,13,14,15,16,17 --max_steps 5 \
    --learning_rate 1e-6 --eval_size 0
python bench/forecast_vs_runs.py runs/forecast16/forecast_k16.json runs/forecast16/measure --steps 5
