"""Which component reads each GRPOConfig option, in one table.

A config holds the options of every advantage estimator and sampler; the one the run chooses gets its own
(`estimator_options`, `sampler_options`), and an option that was set but that the chosen component, or the
run's setting, never reads is named at the start of the run with what would read it (`unused_options`), never
dropped silently. docs/usage.md's options table takes its "read by" column from here (`readers`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..core.advantages import ESTIMATORS
from ..sampling import SAMPLERS

# GRPOConfig field -> the keyword the registered estimators take it as (only those whose signature has it)
ESTIMATOR_OPTIONS = {
    "scale_rewards": "scale",
    "advantage_std_unbiased": "unbiased",
    "advantage_eps": "eps",
    "virtual_sample_alpha": "alpha",
    "acr_threshold_init": "tau_init",
    "virtual_sample_strategy": "strategy",
    "acr_ema_lambda": "ema_lambda",
    "acr_threshold_adaptive": "adaptive_threshold",
    "acr_threshold_eta": "eta",
    "acr_threshold_reward_ema": "reward_ema",
    "acr_threshold_min": "tau_min",
    "acr_threshold_max": "tau_max",
    "virtual_reward_range": "reward_range",
    "virtual_reward_anchor": "r_anchor",
    "virtual_reward_partial": "r_partial",
    "all_wrong_max_share": "all_wrong_max_share",
    "pool_std": "pool_std",
    "success_threshold": "success_threshold",
    "seed": "seed",
}

# GRPOConfig field -> the keyword the registered samplers take it as
SAMPLER_OPTIONS = {
    "max_gen_batches": "max_gen_batches",
    "on_shortfall": "on_shortfall",
    "exit_rule": "exit_rule",
    "round_size": "round_size",
    "max_rounds": "max_rounds",
    "drop_unresolved": "drop_unresolved",
    "sample_budget": "budget",
    "budget_candidates": "candidates",
    "budget_first_round": "first_round",
    "budget_decay": "decay",
    "budget_prior_strength": "prior_strength",
    "budget_min_p_mixed": "min_p_mixed",
    "success_threshold": "success_threshold",
    "seed": "seed",
}

# read by the trainer and the collapse monitor as well, whatever the components take
ALWAYS_READ = ("success_threshold", "seed", "acr_ema_lambda")


def _has_reference(args: Any) -> bool:
    return args.beta > 0 or args.use_peft  # LoRA's reference is the adapters-off model, free


# options that only some settings read: field -> (whether this run reads it, what reads it)
CONDITIONAL: dict[str, tuple[Callable[[Any], bool], str]] = {
    "kl_estimator": (_has_reference, "the KL term and kl/mean, which need a reference policy (beta > 0 or use_peft)"),
    "kl_bound": (_has_reference, "the KL-drift alarm, which needs a reference policy (beta > 0 or use_peft)"),
    "overlong_penalty_factor": (lambda a: a.overlong_buffer_len > 0, "the soft overlong penalty (overlong_buffer_len > 0)"),
    "num_completions_to_print": (lambda a: a.log_completions, "the completions log (log_completions=True)"),
    **{name: (lambda a: a.use_peft, "LoRA (use_peft=True)")
       for name in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")},
}


def _taken(registry, name: str, table: dict[str, str], args: Any) -> dict[str, Any]:
    """The options of `table` that entry `name` takes, under its own keywords."""
    options = {keyword: getattr(args, field) for field, keyword in table.items()}
    return registry.accepted(name, options)


def estimator_options(args: Any) -> dict[str, Any]:
    return _taken(ESTIMATORS, args.advantage_estimator, ESTIMATOR_OPTIONS, args)


def sampler_options(args: Any) -> dict[str, Any]:
    return _taken(SAMPLERS, args.sampler, SAMPLER_OPTIONS, args)


def _takers(registry, keyword: str) -> list[str]:
    return [name for name in registry.names() if keyword in registry.accepted(name, {keyword: None})]


def unused_options(args: Any) -> list[str]:
    """One line per option set away from its default that this run never reads, naming what would."""
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(args)}
    changed = [name for name in defaults if getattr(args, name) != defaults[name] and name not in ALWAYS_READ]
    notes = []
    for field in changed:
        value = getattr(args, field)
        for kind, registry, table, chosen in (("advantage_estimator", ESTIMATORS, ESTIMATOR_OPTIONS,
                                               args.advantage_estimator),
                                              ("sampler", SAMPLERS, SAMPLER_OPTIONS, args.sampler)):
            takers = _takers(registry, table[field]) if field in table else []
            if field in table and chosen not in takers:
                notes.append(f"{field}={value!r} is not used: {kind}={chosen!r} does not read it "
                             f"(read by {kind} {', '.join(takers)})")
        if field in CONDITIONAL and not CONDITIONAL[field][0](args):
            notes.append(f"{field}={value!r} is not used: it is read by {CONDITIONAL[field][1]}")
    return notes


def readers(field: str) -> str:
    """Who reads option `field`, for the docs' options table."""
    parts = []
    if field in ESTIMATOR_OPTIONS:
        parts.append("estimator " + ", ".join(_takers(ESTIMATORS, ESTIMATOR_OPTIONS[field])))
    if field in SAMPLER_OPTIONS:
        parts.append("sampler " + ", ".join(_takers(SAMPLERS, SAMPLER_OPTIONS[field])))
    if field in ALWAYS_READ:
        parts.append("monitor" if field == "acr_ema_lambda" else "trainer")
    if field in CONDITIONAL:
        parts.append(CONDITIONAL[field][1])
    return "; ".join(parts) or "trainer"
