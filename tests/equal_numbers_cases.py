"""The scripted step behind the equal-numbers tests, shared by every host's test (tests/test_trl_samplers.py in
.venv: grposcope's own trainer and the TRL subclass; tests/verl/test_verl_sampling.py in .venv-verl: the verl
wrapper), so that bench/equal_numbers.py can set their figures side by side.

A completion's reward is a function of its prompt p and of its index k among the samples drawn for p this step
(0, 1, 2, ... in the order the host scores them): 1 when k is in CORRECT[p], else 0. No model quality enters.
"""

from __future__ import annotations

G = 4  # num_generations / rollout.n
PROMPTS = list(range(6))
# With round_size 4 and G 4, balance (2 correct and 2 wrong) resolves prompt 0 after 1 round, 1 after 2, 5 after
# 3, 2 after 4; 3 (all wrong) and 4 (all correct) never; pos (1 correct) resolves 0, 4 and 5 after 1 round, 1
# after 2, 2 after 4, 3 never
CORRECT = {0: {0, 1}, 1: {5, 6}, 2: {13, 14}, 3: set(), 4: set(range(16)), 5: {2, 9, 10}}
RA = {"round_size": 4, "max_rounds": 4}
CASES = {  # name: (sampler, its options, grposcope's estimator)
    "reinforce_ada_balance": ("reinforce_ada", {"exit_rule": "balance", **RA}, "pool"),
    "reinforce_ada_pos": ("reinforce_ada", {"exit_rule": "pos", **RA}, "pool"),
    "reinforce_ada_balance_drop": ("reinforce_ada", {"exit_rule": "balance", "drop_unresolved": True, **RA}, "pool"),
    "budgeted": ("budgeted", {"sample_budget": 16}, "grpo"),  # 4 of 6 prompts drawn
}


def scripted_reward(p: int, k: int) -> float:
    return 1.0 if k in CORRECT[p] else 0.0


def table_row(case: str, host: str, rounds: list[dict[int, int]], kept: dict[int, int], worst: float) -> dict:
    """One line of bench/equal_numbers.py's table: rounds, one {prompt: samples drawn} per generation call."""
    return {"case": case, "host": host,
            "samples_per_prompt_per_round": {str(p): [r.get(p, 0) for r in rounds] for p in PROMPTS},
            "rows_kept": {str(p): n for p, n in kept.items()}, "max_advantage_difference": worst}
