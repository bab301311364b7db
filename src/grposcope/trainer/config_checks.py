"""What each GRPOConfig option may hold, checked in GRPOConfig.__post_init__ (trainer/config.py).

First every option's type, and every number finite (`check_types`). Then `RANGES`, one row per numeric
option: its interval, what the option means or a usual value, and what None means where None is allowed;
an error repeats them with the value given ("max_grad_norm must be >= 0 (...), got -1.0"). Below the table,
the options whose valid values are no interval (an empty path, an empty list) or depend on another option.

Component options (those an estimator, sampler or policy loss declares, trainer/options.py) are checked by
their component when the config builds it; the table holds only the few that the components take unchecked.
`success_threshold` has no range: rewards are any real numbers (weighted sums, penalties).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..errors import InputTypeError
from ..eval_settings import MAX_SEED

MAX_TORCH_THREADS = 1024  # far above any machine's cores, far below the threads a process may start
QUOTE_CHARS = 200  # what an error message quotes of a value: a YAML alias bomb repr'd in full takes gigabytes


@dataclass(frozen=True)
class Range:
    """An interval of valid values; `hint` says what the option means (the fix), `none` what None means."""

    rule: str  # as the message says it: "a positive integer", ">= 0", "in [0, 1]"
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    hint: str = ""
    none: str = ""  # empty: None is not allowed (the type check refuses it)

    def holds(self, value: Any) -> bool:
        if value is None:
            return True  # the type check already refused None where it is not allowed
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def message(self, name: str, value: Any) -> str:
        hint = f" ({self.hint})" if self.hint else ""
        none = f"; or None for {self.none}" if self.none else ""
        return f"{name} must be {self.rule}{hint}, got {quoted(value)}{none}"


def positive_int(hint: str = "", none: str = "") -> Range:
    return Range("a positive integer", low=1, hint=hint, none=none)


def at_least(low: float, hint: str = "", none: str = "", strict: bool = False, unit: str = "") -> Range:
    return Range(f"{'>' if strict else '>='} {low}{unit}", low=low, low_open=strict, hint=hint, none=none)


def within(low: float, high: float, bounds: str = "[]", hint: str = "") -> Range:
    return Range(f"in {bounds[0]}{low}, {high}{bounds[1]}", low, high, bounds[0] == "(", bounds[1] == ")",
                 hint=hint)


# Every numeric GRPOConfig option but those checked below the table (num_generations >= 2, max_steps,
# overlong_buffer_len) and the component options their components check.
RANGES: dict[str, Range] = {
    # run
    "seed": within(0, MAX_SEED, hint="seeds Python, torch and the samplers, e.g. 42"),
    "logging_steps": positive_int("steps between two console lines; metrics.jsonl gets every step"),
    "num_completions_to_print": positive_int("completions of a logged step written to completions.jsonl",
                                             none="all of them"),
    "save_steps": positive_int("steps between two checkpoints, e.g. 500"),
    "save_total_limit": positive_int("checkpoints to keep", none="keep all"),
    "eval_steps": positive_int("steps between two held-out evaluations", none="only before and after"),
    "eval_num_samples": at_least(0, "sampled completions per held-out prompt for eval/avg@k; 0: greedy only"),
    "eval_limit": positive_int("held-out prompts evaluated during training", none="the whole split"),
    # model
    "lora_r": positive_int("the LoRA rank, e.g. 16"),
    "lora_alpha": at_least(0, "LoRA's scaling numerator, e.g. 32", strict=True),
    "lora_dropout": within(0, 1, "[)", "a dropout probability, e.g. 0.05"),
    # data
    "dataset_size": positive_int("training prompts to generate", none="the task's own"),
    "eval_size": at_least(0, "held-out prompts; 0: no held-out evaluation", none="the task's own split"),
    "reward_timeout": at_least(0, "seconds a reward function may take on one batch, e.g. 60", strict=True),
    # batch geometry
    "num_generations": positive_int(),
    "per_device_train_batch_size": positive_int(),
    "gradient_accumulation_steps": positive_int(),
    "generation_batch_size": positive_int("completions generated at once",
                                          none="per_device_train_batch_size x steps_per_generation"),
    "steps_per_generation": positive_int("micro-batches generated at once",
                                         none="gradient_accumulation_steps, one generation per optimizer step"),
    "num_iterations": positive_int(),
    "num_train_epochs": at_least(0, "passes over the training prompts, read when max_steps is -1", strict=True),
    "max_samples": at_least(0, "completions to generate in all", none="no limit", strict=True),
    "max_updates": positive_int("optimizer updates to take in all", none="no limit"),
    # generation
    "max_prompt_length": positive_int("tokens a prompt keeps at most, e.g. 512", none="no limit"),
    "max_completion_length": at_least(0, "the longest reply to generate, e.g. 256, the default", strict=True,
                                      unit=" tokens"),
    "temperature": at_least(0, "sampling; greedy decoding cannot explore; 1.0 is the usual", strict=True),
    "top_p": within(0, 1, "(]", "the nucleus sampling mass; 1.0 keeps the whole distribution"),
    "top_k": at_least(0, "top-k sampling; 0: off"),
    "rollout_importance_sampling_clip_max": at_least(1, "the largest importance weight a token keeps, e.g. 2.0; "
                                                     "below 1 every token would be weighted down"),
    "overlong_penalty_factor": at_least(0, "the soft overlong penalty's largest penalty, e.g. 1.0; a negative "
                                        "one would reward overlong replies"),
    # optimisation
    "learning_rate": at_least(0, "AdamW's learning rate, e.g. 1e-6", strict=True),
    "weight_decay": at_least(0, "AdamW's weight decay, e.g. 0.0 or 0.01"),
    "max_grad_norm": at_least(0, "the largest global gradient norm an update keeps, e.g. 1.0; 0: no "
                              "clipping; a negative one would turn every update around"),
    "max_bad_steps": at_least(0, "skipped NaN/inf updates before the run stops; 0: stop at the first NaN/inf"),
    "diagnose_every": at_least(0, "steps between two live diagnoses of the run's metrics, e.g. 10; 0: off"),
    "warmup_ratio": within(0, 1, hint="the fraction of the steps that warms the learning rate up, e.g. 0.1"),
    # loss
    "beta": at_least(0, "the KL coefficient, e.g. 0.04; 0: no KL term"),
    "entropy_coef": at_least(0, "the entropy bonus; 0: off"),
    # advantages and collapse
    "acr_ema_lambda": within(0, 1, "[)", "the smoothing of collapse/acr_ema, e.g. 0.9; 0: each step's ACR"),
    "kl_bound": at_least(0, "the mean per-token KL above which the KL-drift alarm fires, e.g. 0.5", strict=True),
    # torch starts them all at once: 100,000 ends in "can't start new thread" and a segfault
    "torch_threads": Range(f"in [1, {MAX_TORCH_THREADS}]", 1, MAX_TORCH_THREADS,
                           hint="torch's CPU threads, e.g. the machine's cores; more only contend for them",
                           none="torch's choice"),
    # component options that their components take unchecked
    "advantage_eps": at_least(0, "added to the std before dividing, e.g. 1e-4; at 0 a group of equal rewards "
                              "gets NaN advantages", strict=True),
    "virtual_reward_anchor": at_least(0, "how far above an all-wrong group's reward AVSPO's virtual rewards "
                                      "reach, e.g. 0.1; at or below it the wrong replies would gain",
                                      strict=True),
    "acr_threshold_eta": at_least(0, "the step size of AVSPO's adaptive threshold, e.g. 0.01"),
}


def check_values(config: Any) -> None:
    """Raises naming the first option that holds a value it cannot take, the value and the fix."""
    check_types(config)
    for name, rule in RANGES.items():
        if hasattr(config, name) and not rule.holds(getattr(config, name)):
            raise ValueError(rule.message(name, getattr(config, name)))
    if config.num_generations < 2:
        raise ValueError(
            f"num_generations must be >= 2 (got {config.num_generations}): GRPO compares completions of the "
            "same prompt, so a group of one has no advantage. Use 8 (the usual) or more."
        )
    if config.max_steps == 0 or config.max_steps < -1:
        raise ValueError(f"set max_steps > 0, or max_steps=-1 with num_train_epochs > 0; got max_steps="
                         f"{config.max_steps}")
    if not 0 <= config.overlong_buffer_len <= config.max_completion_length:
        raise ValueError(f"overlong_buffer_len must be in [0, max_completion_length={config.max_completion_length}]"
                         f" (0: off), got {config.overlong_buffer_len}")
    _check_texts_and_lists(config)
    _check_virtual_reward_partial(config)


def check_options(values: dict[str, Any]) -> None:
    """What a host's config gets for the grposcope options it carries (the TRL integration's GRPOConfig): every
    number finite, and each option's row of RANGES, with the same messages as grposcope's own config."""
    for name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"option {name}: got {value}; give a finite number")
        rule = RANGES.get(name)
        if rule is not None and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and not rule.holds(value):
            raise ValueError(rule.message(name, value))


def _check_texts_and_lists(config: Any) -> None:
    """Paths that are empty, lists that name nothing: each would quietly mean something else."""
    if not config.output_dir.strip():
        raise ValueError(f"output_dir is empty ({config.output_dir!r}), so the run would write into the working "
                         "folder; give a folder, e.g. output/run")
    if not config.model_name_or_path.strip():
        raise ValueError(f"model_name_or_path is empty ({config.model_name_or_path!r}); give a model folder, or "
                         "embedded:smollm2-135m-instruct (the default)")
    if isinstance(config.resume_from_checkpoint, str) and not config.resume_from_checkpoint.strip():
        raise ValueError("resume_from_checkpoint is an empty path; give a checkpoint folder, True (--resume) for "
                         "the newest one in output_dir, or None to start a new run")
    empty = {"lora_target_modules": "module names, e.g. ['q_proj', 'v_proj'], or None for all linear layers",
             "reward_funcs": "reward names, e.g. ['accuracy_reward'], or None for the task's",
             "reward_weights": "one weight per reward function, or None for all 1"}
    for name, fix in empty.items():
        if getattr(config, name) is not None and len(getattr(config, name)) == 0:
            raise ValueError(f"{name} is an empty list; give {fix}")
    for i, weight in enumerate(config.reward_weights or []):
        if not math.isfinite(weight):
            raise ValueError(f"reward_weights[{i}] is {weight}; give finite numbers, one per reward function")
    if config.reward_weights is not None and config.reward_funcs is not None:
        if len(config.reward_weights) != len(config.reward_funcs):
            raise ValueError(f"{len(config.reward_weights)} reward_weights for {len(config.reward_funcs)} "
                             "reward_funcs; give one weight per reward function")


def _check_virtual_reward_partial(config: Any) -> None:
    """Under virtual_sample_strategy="fixed" every virtual reward is virtual_reward_partial: it must lie inside
    virtual_reward_range, above an all-wrong group's reward and below an all-correct one's."""
    if getattr(config, "virtual_sample_strategy", None) != "fixed":
        return
    low, high = config.virtual_reward_range
    if not low < config.virtual_reward_partial < high:
        raise ValueError(f"virtual_reward_partial must be inside virtual_reward_range ({low:g}, {high:g}) under "
                         f"virtual_sample_strategy='fixed', got {config.virtual_reward_partial}; e.g. "
                         f"{(low + high) / 2:g}, midway")


def naming_the_option(option: str, check: Any, *args: Any) -> None:
    """Runs `check(*args)`; its ValueError (an unknown name, say) is raised again starting with `option:`."""
    try:
        check(*args)
    except ValueError as err:
        raise ValueError(f"{option}: {err}") from None


def check_types(config: Any) -> None:
    """Each option holds a value of its declared type (a YAML file can hold anything: `learning_rate: [1, 2]`),
    and every number is finite: NaN or inf would surface steps later, after the model loaded, as a stranger
    error."""
    import typing

    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value, hint = getattr(config, f.name), hints.get(f.name, Any)
        if not _is_a(value, hint):
            raise InputTypeError(f"option {f.name}: got {quoted(value)} ({type(value).__name__}); it takes "
                                 f"{type_name(hint)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"option {f.name}: got {value}; give a finite number")


def quoted(value: Any, limit: int = QUOTE_CHARS) -> str:
    """repr(value) cut to about `limit` characters, built without the full repr: reprlib stops at a few items
    per level and a few levels deep (a 9-level YAML alias bomb holds 9^9 strings, shared, never expanded)."""
    import reprlib

    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxtuple, short.maxdict, short.maxset = 4, 8, 8, 8, 8
    short.maxstring = short.maxother = limit
    text = short.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_a(value: Any, hint: Any) -> bool:
    """Whether `value` fits type `hint` (Any, unions, list/tuple/dict of items); an int is a float, a bool is
    neither an int nor a float (YAML's `yes`)."""
    import types
    import typing

    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_a(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis] or [Any]
        return isinstance(value, (list, tuple)) and all(_is_a(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, origin or hint)


def type_name(hint: Any) -> str:
    """`float`, `int or None`, `a list of str`: the type as the error message says it."""
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if origin in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis] or [Any]
        return f"a list of {type_name(args[0])}"
    if origin is dict:
        return "a mapping"
    return getattr(hint, "__name__", str(hint))


def check_choice(name: str, value: Any, known) -> None:
    if value not in known:
        raise ValueError(f"unknown {name} {quoted(value)}; known: {', '.join(known)}")
