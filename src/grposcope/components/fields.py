"""The components' options as dataclass fields, for IDEs and type checkers: rendered from their
signatures and docstrings by `python -m grposcope.cli.render` (do not edit; a stale file fails
GRPOConfig() in one line naming that command). grposcope's GRPOConfig inherits the first three, the
TRL integration's the TRL ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class EstimatorOptions:
    """The advantage estimators' options, one field each."""

    acr_threshold_init: float = 0.5
    """AVSPO's initial adaptive threshold tau: groups are augmented while the collapse signal exceeds it."""
    virtual_sample_alpha: float = 0.5
    """AVSPO's alpha in K = ceil(G * signal ** alpha): how fast the number of virtual samples grows."""
    virtual_sample_strategy: str = 'stratified'
    """AVSPO's virtual reward values: "stratified" (the paper's Eq. 9), "uniform", "fixed", "exp_decay", "opposite"."""
    virtual_reward_range: tuple[float, float] = (0.0, 1.0)
    """AVSPO: the reward range [r_lo, r_hi] virtual rewards are drawn within (set it to your reward's range)."""
    virtual_reward_anchor: float = 0.1
    """AVSPO: r_anchor, how far above an all-wrong group's common reward its virtual rewards reach (Eq. 9)."""
    virtual_reward_partial: float = 0.5
    """AVSPO: the value of every virtual reward under virtual_sample_strategy="fixed"."""
    acr_threshold_adaptive: bool = True
    """AVSPO's adaptive threshold: tau moves towards the signal while the smoothed batch reward rises and away from it
    while it falls. False keeps tau at acr_threshold_init."""
    acr_threshold_eta: float = 0.01
    """AVSPO: step size of the adaptive threshold."""
    acr_threshold_reward_ema: float = 0.9
    """AVSPO: smoothing of the batch mean reward J_t whose rise or fall moves the threshold."""
    acr_threshold_min: float = 0.1
    """AVSPO: the adaptive threshold never goes below this."""
    acr_threshold_max: float = 0.9
    """AVSPO: the adaptive threshold never goes above this."""
    all_wrong_max_share: float | None = 0.5
    """AVSPO guard (grposcope's; docs/algorithms.md, "When it hurts"): the largest share W / (W + R) of advantage mass
    that augmented all-wrong groups (W) may carry against the step's mixed groups (R). Above it their advantages are
    scaled down, so beside no mixed group they make no update, as under GRPO. 0.5 (the default, from 5 seeds at two
    learning rates): never more than the mixed groups. None: the paper's AVSPO, unbounded."""
    advantage_std_unbiased: bool = True
    """The std that normalises advantages (grpo, avspo, pool with pool_std): unbiased (ddof 1, as TRL) or the population
    std (False; the AVSPO paper's worked example)."""
    advantage_eps: float = 0.0001
    """Added to that std before dividing (TRL's 1e-4), so that a group of near-equal rewards stays finite."""
    scale_rewards: str | bool = 'group'
    """grpo's std: "group", "batch" or "none" (TRL; True = "group", False = "none")."""
    pool_std: bool = False
    """pool (Reinforce-Ada's baseline): also divide by the std of the prompt's pool. The released Reinforce-Ada script
    trains with the mean only."""


@dataclass
class SamplerOptions:
    """The samplers' options, one field each."""

    sample_budget: int | None = None
    """budgeted, knapsack: completions generated per step (default: prompts per generation x num_generations, what
    "fixed" spends)."""
    budget_candidates: float = 4.0
    """budgeted: prompts considered per step, as a multiple of the batch (the batch and the next ones)."""
    budget_first_round: float = 0.75
    """budgeted: the share of the budget its first round spends; later rounds re-rank the untried prompts with what the
    first one taught."""
    budget_decay: float = 0.95
    """budgeted: per-step discount of a prompt's success/failure counts: old evidence fades as the policy moves, so a
    skipped prompt is tried again."""
    budget_prior_strength: float = 2.0
    """budgeted: the weight, in samples, of the prior (the run's recent success rate) in each prompt's belief."""
    budget_min_p_mixed: float = 0.05
    """budgeted: never draw a prompt whose chance of a mixed group is below this (almost surely solved or hopeless for
    now)."""
    max_gen_batches: int = 3
    """dynamic, greso: batches generated per step at most while collecting informative groups (verl's
    max_num_gen_batches)."""
    on_shortfall: str = 'train'
    """dynamic: when fewer informative groups than the batch were found, "train" on those kept (logged in
    `sampler/shortfall`) or stop with an "error" (verl's behaviour)."""
    greso_p_easy: float = 0.5
    """greso: the initial exploration probability p of prompts whose recent groups all succeeded; such a prompt with z
    in a row is skipped with probability 1 - p^z (arXiv 2506.02177)."""
    greso_p_hard: float = 0.5
    """greso: the same for prompts whose recent groups all failed."""
    greso_target_zero_variance: float = 0.25
    """greso: the share of zero-variance groups the exploration probabilities steer towards, a third of it all-correct
    and two thirds all-wrong (the release's split)."""
    greso_p_step: float = 0.01
    """greso: how much p_easy and p_hard move per step towards their targets."""
    greso_max_candidates: float = 8.0
    """greso: prompts the pre-rollout filter may look at per batch, as a multiple of the batch, before it draws the
    survivors it has."""
    knapsack_max_groups: int = 4
    """knapsack: the most samples one prompt may get in a step, in groups of G (Knapsack RL, arXiv 2509.25849)."""
    exit_rule: str = 'balance'
    """reinforce_ada: a prompt stops being sampled once it has at least one correct sample ("pos") or G/2 correct and
    G/2 wrong ones ("balance")."""
    round_size: int = 8
    """reinforce_ada: samples per prompt per round."""
    max_rounds: int = 4
    """reinforce_ada: rounds at most; a prompt still unresolved after them is kept (see drop_unresolved)."""
    drop_unresolved: bool = False
    """reinforce_ada: drop prompts the exit rule never accepted instead of training on them."""


@dataclass
class LossOptions:
    """The policy losses' options, one field each."""

    cispo_epsilon_low: float | None = None
    """cispo loss: the weight's lower bound is 1 - this; None: no lower bound, as MiniMax-M1 (arXiv 2506.13585)."""
    cispo_epsilon_high: float = 4.0
    """cispo loss: the weight's upper bound is 1 + this (4: a weight of at most 5, the cap TRL recommends after ScaleRL,
    arXiv 2510.13786)."""
    epsilon: float = 0.2
    """grpo loss: lower clip range of the ratio (PPO)."""
    epsilon_high: float | None = None
    """grpo loss: upper clip range (clip-higher; DAPO, arXiv 2503.14476, uses 0.28). Default: epsilon."""
    dual_clip: float | None = None
    """grpo loss: cap the loss of negative-advantage tokens at dual_clip * |A| (dual-clip PPO, arXiv 1912.09729; 3 is
    usual)."""
    gspo_epsilon: float = 0.0003
    """gspo loss: lower clip range of the sequence ratio (GSPO, arXiv 2507.18071: 3e-4)."""
    gspo_epsilon_high: float = 0.0004
    """gspo loss: upper clip range of the sequence ratio (GSPO: 4e-4)."""


@dataclass
class TRLRunWideOptions:
    """grposcope's run-wide fields in the TRL integration's config (trainer/config.py)."""

    advantage_estimator: str = 'grpo'
    """"grpo", "dr_grpo", "rloo", "avspo" or "pool" (docs/algorithms.md), or your own by its dotted path,
    "mypkg.estimators:MyEstimator" (docs/architecture.md, "Plug-ins from outside the package")."""
    advantage_estimator_kwargs: dict[str, Any] | str | None = None
    """A plug-in estimator's keyword arguments that are not config fields (those it takes by their names, such as seed
    or success_threshold): on the command line as JSON, --advantage_estimator_kwargs '{"eps": 0.001}'."""
    use_avspo: bool = False
    """AVSPO virtual samples for collapsed groups ("Advantage Collapse in Group Relative Policy Optimization: Diagnosis
    and Mitigation", arXiv 2605.21125). Same as advantage_estimator="avspo"."""
    sampler: str = 'fixed'
    """Who gets how many completions (docs/algorithms.md, "Samplers"): "fixed" (G per prompt), "dynamic" (DAPO's dynamic
    sampling, arXiv 2503.14476), "reinforce_ada" (Reinforce-Ada, arXiv 2510.04996; pair it with
    advantage_estimator="pool") or "budgeted" (grposcope's: a fixed sample budget spent where a mixed group is most
    likely), or your own by its dotted path, "mypkg.samplers:MySampler"."""
    sampler_kwargs: dict[str, Any] | str | None = None
    """A plug-in sampler's keyword arguments that are not config fields: --sampler_kwargs '{"rounds": 2}'."""
    success_threshold: float = 0.5
    """A completion with reward >= this counts as correct (all-correct vs all-wrong collapse, AVSPO)."""
    acr_ema_lambda: float = 0.9
    """Smoothing of `collapse/acr_ema`, which is also AVSPO's collapse signal: ema = lam * ema + (1 - lam) * ACR. 0 uses
    each step's ACR, as the AVSPO paper does (it trains one prompt a step, so its ACR is 0 or 1)."""
    kl_bound: float = 0.5
    """The KL-drift alarm fires when the mean per-token KL to the reference exceeds this."""
    skip_no_signal_steps: bool = True
    """A step whose loss has no gradient (every advantage of every row with a real token exactly 0, no KL term (beta 0)
    and no entropy bonus) takes no optimizer step: the weights, AdamW's moments and its step count stay as they were,
    and the learning-rate schedule goes on with the run's step count. Without this, AdamW still moves the weights on
    such a step, replaying its last real update (1.67x the first step's move after one empty step, 4.19x after nine;
    docs/algorithms.md, "A step with no signal"). grposcope's own trainer also skips the backward pass of micro-batches
    without signal; TRL's runs it. Logged as `optimizer/skipped_no_signal`. False: every step updates, as stock TRL and
    verl do (for comparisons)."""
    diagnose_every: int = 10
    """Run `grposcope diagnose`'s detectors on the run's own metrics every this many steps: a warning or critical
    finding is logged once when it fires or worsens, and findings.json is written to output_dir at the end
    (docs/diagnose.md). 0 turns it off."""


@dataclass
class TRLEstimatorOptions:
    """The advantage estimators' options that run in TRL, without TRL's own fields."""

    acr_threshold_init: float = 0.5
    """AVSPO's initial adaptive threshold tau: groups are augmented while the collapse signal exceeds it."""
    virtual_sample_alpha: float = 0.5
    """AVSPO's alpha in K = ceil(G * signal ** alpha): how fast the number of virtual samples grows."""
    virtual_sample_strategy: str = 'stratified'
    """AVSPO's virtual reward values: "stratified" (the paper's Eq. 9), "uniform", "fixed", "exp_decay", "opposite"."""
    virtual_reward_range: tuple[float, float] = (0.0, 1.0)
    """AVSPO: the reward range [r_lo, r_hi] virtual rewards are drawn within (set it to your reward's range)."""
    virtual_reward_anchor: float = 0.1
    """AVSPO: r_anchor, how far above an all-wrong group's common reward its virtual rewards reach (Eq. 9)."""
    virtual_reward_partial: float = 0.5
    """AVSPO: the value of every virtual reward under virtual_sample_strategy="fixed"."""
    acr_threshold_adaptive: bool = True
    """AVSPO's adaptive threshold: tau moves towards the signal while the smoothed batch reward rises and away from it
    while it falls. False keeps tau at acr_threshold_init."""
    acr_threshold_eta: float = 0.01
    """AVSPO: step size of the adaptive threshold."""
    acr_threshold_reward_ema: float = 0.9
    """AVSPO: smoothing of the batch mean reward J_t whose rise or fall moves the threshold."""
    acr_threshold_min: float = 0.1
    """AVSPO: the adaptive threshold never goes below this."""
    acr_threshold_max: float = 0.9
    """AVSPO: the adaptive threshold never goes above this."""
    all_wrong_max_share: float | None = 0.5
    """AVSPO guard (grposcope's; docs/algorithms.md, "When it hurts"): the largest share W / (W + R) of advantage mass
    that augmented all-wrong groups (W) may carry against the step's mixed groups (R). Above it their advantages are
    scaled down, so beside no mixed group they make no update, as under GRPO. 0.5 (the default, from 5 seeds at two
    learning rates): never more than the mixed groups. None: the paper's AVSPO, unbounded."""
    advantage_std_unbiased: bool = True
    """The std that normalises advantages (grpo, avspo, pool with pool_std): unbiased (ddof 1, as TRL) or the population
    std (False; the AVSPO paper's worked example)."""
    advantage_eps: float = 0.0001
    """Added to that std before dividing (TRL's 1e-4), so that a group of near-equal rewards stays finite."""
    pool_std: bool = False
    """pool (Reinforce-Ada's baseline): also divide by the std of the prompt's pool. The released Reinforce-Ada script
    trains with the mean only."""


@dataclass
class TRLSamplerOptions:
    """The samplers' options that run in TRL, without TRL's own fields."""

    sample_budget: int | None = None
    """budgeted, knapsack: completions generated per step (default: prompts per generation x num_generations, what
    "fixed" spends)."""
    budget_candidates: float = 4.0
    """budgeted: prompts considered per step, as a multiple of the batch (the batch and the next ones)."""
    budget_first_round: float = 0.75
    """budgeted: the share of the budget its first round spends; later rounds re-rank the untried prompts with what the
    first one taught."""
    budget_decay: float = 0.95
    """budgeted: per-step discount of a prompt's success/failure counts: old evidence fades as the policy moves, so a
    skipped prompt is tried again."""
    budget_prior_strength: float = 2.0
    """budgeted: the weight, in samples, of the prior (the run's recent success rate) in each prompt's belief."""
    budget_min_p_mixed: float = 0.05
    """budgeted: never draw a prompt whose chance of a mixed group is below this (almost surely solved or hopeless for
    now)."""
    max_gen_batches: int = 3
    """dynamic, greso: batches generated per step at most while collecting informative groups (verl's
    max_num_gen_batches)."""
    on_shortfall: str = 'train'
    """dynamic: when fewer informative groups than the batch were found, "train" on those kept (logged in
    `sampler/shortfall`) or stop with an "error" (verl's behaviour)."""
    greso_p_easy: float = 0.5
    """greso: the initial exploration probability p of prompts whose recent groups all succeeded; such a prompt with z
    in a row is skipped with probability 1 - p^z (arXiv 2506.02177)."""
    greso_p_hard: float = 0.5
    """greso: the same for prompts whose recent groups all failed."""
    greso_target_zero_variance: float = 0.25
    """greso: the share of zero-variance groups the exploration probabilities steer towards, a third of it all-correct
    and two thirds all-wrong (the release's split)."""
    greso_p_step: float = 0.01
    """greso: how much p_easy and p_hard move per step towards their targets."""
    greso_max_candidates: float = 8.0
    """greso: prompts the pre-rollout filter may look at per batch, as a multiple of the batch, before it draws the
    survivors it has."""
    exit_rule: str = 'balance'
    """reinforce_ada: a prompt stops being sampled once it has at least one correct sample ("pos") or G/2 correct and
    G/2 wrong ones ("balance")."""
    round_size: int = 8
    """reinforce_ada: samples per prompt per round."""
    max_rounds: int = 4
    """reinforce_ada: rounds at most; a prompt still unresolved after them is kept (see drop_unresolved)."""
    drop_unresolved: bool = False
    """reinforce_ada: drop prompts the exit rule never accepted instead of training on them."""
