"""The runs bench/gpu_check.py is made of: model shapes, prompts and scripted rewards, the three trainers, and the
correctness and speed runs. Every run returns plain values (JSON-ready); gpu_check.py orders, times and writes them.

Notation: B prompts a step, G completions each (rows = B * G), L completion tokens, forced: every completion is
exactly L tokens (`min_new_tokens = max_new_tokens = L` in all three trainers), so they do the same work a step.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import math
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

# Qwen2.5-0.5B's and 1.5B's architecture (their config.json), randomly initialised: no weights can be downloaded
# where the check runs. "tiny" runs the same code paths on a 2-core CPU in seconds; its vocabulary is the
# tokenizer's plus 64 ids the tokenizer cannot decode, as Qwen's 151,936 ids exceed the embedded tokenizer's 49,152.
SHAPES: dict[str, dict[str, Any]] = {
    "0.5b": {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
             "intermediate_size": 4864, "vocab_size": 151936},
    "1.5b": {"hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
             "intermediate_size": 8960, "vocab_size": 151936},
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 128, "vocab_size": None},
}
COMMON = {"tie_word_embeddings": True, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
          "max_position_embeddings": 32768, "rms_norm_eps": 1e-6}
TRAINERS = ("grposcope", "grposcope_trl", "trl")  # own trainer, grposcope.integrations.trl, stock trl
EXTRA_IDS = 64  # the tiny shape's ids beyond the tokenizer's


@dataclass(frozen=True)
class Setup:
    """What every run of one check shares."""

    device: str
    dtype: torch.dtype
    seed: int
    learning_rate: float
    tokenizer_dir: Path
    work_dir: Path  # checkpoints and output_dirs: large, never under $OUT
    trl_checkpointing: bool  # TRL's gradient_checkpointing (its default True; off = the work grposcope does)


@dataclass(frozen=True)
class Batch:
    prompts: int  # B
    generations: int  # G
    length: int  # L, forced
    prompt_length: int  # tokens of every prompt

    @property
    def rows(self) -> int:
        return self.prompts * self.generations

    @property
    def completion_tokens(self) -> int:
        return self.rows * self.length


# --- model, tokenizer, prompts, rewards ---------------------------------------------------------------------


def load_tokenizer(folder: Path):
    """The tokenizer in `folder` (tokenizer.json and its config), set up as grposcope sets up every tokenizer;
    a copy for each trainer, since trainers change theirs."""
    return copy.deepcopy(_read_tokenizer(str(folder)))


@functools.lru_cache(maxsize=None)
def _read_tokenizer(folder: str):
    from transformers import AutoTokenizer

    from grposcope.models.loading import prepare_tokenizer

    # read once: parsing the 3.5 MB tokenizer.json takes seconds on a busy 2-core CPU, a copy a tenth of that
    return prepare_tokenizer(AutoTokenizer.from_pretrained(folder, local_files_only=True))


def model_config(shape: str, tokenizer):
    from transformers import Qwen2Config

    sizes = dict(SHAPES[shape])
    sizes["vocab_size"] = sizes["vocab_size"] or len(tokenizer) + EXTRA_IDS
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id}
    return Qwen2Config(**sizes, **COMMON, **ids)


def build_master(shape: str, tokenizer, dtype: torch.dtype, seed: int):
    """The shape's randomly initialised model, on the CPU: every run copies it to the device, so all trainers
    start from the same weights whatever the device's random generator does."""
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(model_config(shape, tokenizer)).to(dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval()


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights counted once


def make_prompts(tokenizer, count: int, length: int) -> list[dict]:
    """`count` plain-text prompts of `length` tokens each (so no trainer pads more than another), with a `pid`
    column that reaches the reward function."""
    rows = []
    for pid in range(count):
        head = f"Task {pid:04d}:"
        filler = max(length - len(tokenizer(head, add_special_tokens=False)["input_ids"]), 0)
        rows.append({"prompt": head + " x" * filler, "pid": pid})
    return rows


def prompt_lengths(tokenizer, rows: list[dict]) -> list[int]:
    return [len(tokenizer(r["prompt"], add_special_tokens=False)["input_ids"]) for r in rows]


def make_reward(generations: int, no_signal_step: int | None = None):
    """A reward that reads neither completion (a random model writes nothing worth scoring): a deterministic
    function of the prompt (`pid`), the sample's index in its group and the step, in {0, 1/3, 2/3, 1}.
    Neighbouring samples of a group differ, so every group is mixed (ACR 0); on `no_signal_step` every reward
    is 0, so every group collapses (ACR 1) and the step carries no signal.

    Both grposcope and TRL call reward functions with a whole number of groups, group after group, and pass
    `trainer_state` (optimizer steps done before this batch), so a resumed run scores as the straight one."""

    def scripted(prompts, completions, pid, trainer_state=None, **kwargs):
        step = None if trainer_state is None else trainer_state.global_step + 1
        if step is not None and step == no_signal_step:
            return [0.0] * len(completions)
        return [((3 * p + i % generations + (step or 0)) % 4) / 3 for i, p in enumerate(pid)]

    return scripted


# --- measuring ------------------------------------------------------------------------------------------------


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()  # a step's queued kernels belong to it


class StepClock:
    """Wall-clock time at the end of every optimizer step, from `start()` (just before train()). A step's
    time runs from the previous step's end to its own, so it holds all the trainer does for it (generation,
    scoring, update, logging); the first one also holds the trainer's start, and is always a warm-up."""

    def __init__(self, device: str, label: str) -> None:
        self.device, self.label = device, label
        self.t0, self.ends, self.records, self.logs = 0.0, [], [], []

    def start(self) -> None:
        synchronize(self.device)
        self.t0 = time.perf_counter()

    def mark(self, record: dict) -> None:
        synchronize(self.device)
        self.ends.append(time.perf_counter())
        self.records.append(record)
        print(f"    {self.label} step {len(self.ends)}: {self.step_seconds()[-1]:.2f} s", flush=True)

    def step_seconds(self) -> list[float]:
        marks = [self.t0, *self.ends]
        return [b - a for a, b in zip(marks, marks[1:])]


class OwnSteps:
    """grposcope's callback: times each step, keeps its metrics, and copies the weights (and AdamW's step
    count) after the steps in `snapshot_steps`."""

    def __init__(self, clock: StepClock, snapshot_steps: set[int] = frozenset()) -> None:
        self.clock, self.snapshot_steps = clock, snapshot_steps
        self.snapshots: dict[int, dict[str, torch.Tensor]] = {}
        self.adam_steps: dict[int, float] = {}

    def on_step_end(self, trainer, metrics: dict) -> None:
        self.clock.mark({"step": trainer.global_step, **metrics})
        if trainer.global_step in self.snapshot_steps:
            self.snapshots[trainer.global_step] = weights(trainer.model)
            self.adam_steps[trainer.global_step] = adam_step_count(trainer.optimizer)


def trl_callback(clock: StepClock):
    """TRL's callback for the same clock: marks each step's end, keeps what TRL logs (logging_steps=1)."""
    from transformers import TrainerCallback

    class TRLSteps(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            clock.mark({"step": state.global_step})

        def on_log(self, args, state, control, logs=None, **kwargs):
            clock.logs.append(dict(logs or {}))

    return TRLSteps()


def weights(model) -> dict[str, torch.Tensor]:
    """A CPU copy of every parameter (tied ones once)."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max((a[n].float() - b[n].float()).abs().max().item() for n in a)


def adam_step_count(optimizer) -> float:
    """AdamW's step count for the first parameter it has state for (all share it); 0 before the first step."""
    for state in optimizer.state.values():
        if "step" in state:
            return float(state["step"])
    return 0.0


def finite(values) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def timing(step_s: list[float], warmup: int, tokens_per_step: int) -> dict:
    """Per-step times with the warm-up dropped, their median and range, and seconds per 1,000 completion tokens."""
    measured = step_s[warmup:]
    per_1k = [1000 * t / tokens_per_step for t in measured]
    out = {"step_s": step_s, "warmup_steps": warmup, "measured_step_s": measured,
           "completion_tokens_per_step": tokens_per_step, "s_per_1k_tokens": per_1k}
    for name, values in (("step_s", measured), ("s_per_1k_tokens", per_1k)):
        out[f"median_{name}"] = statistics.median(values) if values else None
        out[f"min_{name}"] = min(values, default=None)
        out[f"max_{name}"] = max(values, default=None)
    return out


def gpu_memory(device: str) -> dict:
    if device != "cuda":
        return {}
    return {"allocated_mib": torch.cuda.memory_allocated() / 2**20,
            "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
            "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20}


def release(device: str) -> None:
    """Frees what the last run left (its trainer and model went out of scope), so the next run's peak is its own."""
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


@contextlib.contextmanager
def deterministic(notes: dict):
    """Deterministic kernels for the resume check (warn_only: an op without a deterministic version warns,
    and the warnings land in `notes`), cuDNN's autotuning off; restored afterwards, so the speed runs use the
    fast kernels. CUBLAS_WORKSPACE_CONFIG, which cuBLAS needs for deterministic GEMMs, is set by gpu_check.py
    before torch loads."""
    import os

    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
    notes["settings"] = {"use_deterministic_algorithms": "True (warn_only)", "cudnn.benchmark": False,
                         "cudnn.deterministic": True,
                         "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = before[2], before[3]
        notes["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught})[:20]


# --- the trainers ---------------------------------------------------------------------------------------------


def own_trainer(model, tokenizer, data, reward, setup: Setup, batch: Batch, out_dir: Path, *, max_steps: int,
                callbacks: list, save_steps: int | None = None, resume: Path | None = None):
    """grposcope's own trainer with its defaults, except the shared batch, forced lengths and learning rate, and
    generation on the model's own weights as in TRL: its default rollout_dtype="float32" would generate with a
    float32 copy of a bf16 model."""
    from grposcope import GRPOConfig, GRPOTrainer

    config = GRPOConfig(
        output_dir=str(out_dir), overwrite_output_dir=True, seed=setup.seed,
        per_device_train_batch_size=batch.rows, num_generations=batch.generations,
        max_completion_length=batch.length, generation_kwargs={"min_new_tokens": batch.length},
        temperature=1.0, beta=0.0, learning_rate=setup.learning_rate, max_steps=max_steps,
        save_steps=save_steps or max_steps + 1, logging_steps=max_steps, log_completions=False,
        resume_from_checkpoint=str(resume) if resume else None, rollout_dtype=str(setup.dtype).removeprefix("torch."),
    )
    return GRPOTrainer(model=model, args=config, reward_funcs=reward, train_dataset=data,
                       processing_class=tokenizer, callbacks=callbacks)


def trl_trainer(kind: str, model, tokenizer, data, reward, setup: Setup, batch: Batch, out_dir: Path, *,
                max_steps: int, callbacks: list):
    """grposcope's TRL subclass ("grposcope_trl") or stock TRL ("trl"), plain `generate` (no vLLM), with the
    same batch, lengths, temperature, beta, learning rate and seed as the own trainer."""
    from datasets import Dataset

    if kind == "grposcope_trl":
        from grposcope.integrations.trl import GRPOConfig, GRPOTrainer
    else:
        from trl import GRPOConfig, GRPOTrainer
    config = GRPOConfig(
        output_dir=str(out_dir), seed=setup.seed, per_device_train_batch_size=batch.rows,
        gradient_accumulation_steps=1, num_generations=batch.generations, max_completion_length=batch.length,
        generation_kwargs={"min_new_tokens": batch.length}, temperature=1.0, beta=0.0, num_iterations=1,
        learning_rate=setup.learning_rate, max_steps=max_steps, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=setup.device == "cpu", bf16=setup.dtype == torch.bfloat16,
        gradient_checkpointing=setup.trl_checkpointing, disable_tqdm=True, use_vllm=False,
    )
    return GRPOTrainer(model=model, args=config, reward_funcs=reward, processing_class=tokenizer,
                       train_dataset=Dataset.from_list(data), callbacks=callbacks)


# --- correctness: finite figures, the no-signal skip, an exact resume -----------------------------------------


@dataclass(frozen=True)
class CheckPlan:
    steps: int  # N: the straight run's steps
    resume_at: int  # k: the checkpoint the second run resumes from
    no_signal_step: int  # s: the step whose rewards are all equal


def correctness(master, setup: Setup, batch: Batch, plan: CheckPlan) -> dict:
    """N steps straight (a checkpoint at k, step s without signal), then a fresh trainer resumed from step k to N
    in the same output_dir; both under deterministic kernels."""
    data = make_prompts(load_tokenizer(setup.tokenizer_dir), 4 * batch.prompts, batch.prompt_length)
    reward = make_reward(batch.generations, plan.no_signal_step)
    out_dir, notes = setup.work_dir / "correctness", {}
    s = plan.no_signal_step
    with deterministic(notes):
        straight = _own_run(master, setup, batch, data, reward, out_dir, plan.steps, "straight",
                            save_steps=plan.resume_at, snapshot_steps={s - 1, s, s + 1})
        resumed = _own_run(master, setup, batch, data, reward, out_dir, plan.steps, "resumed",
                           resume=out_dir / f"checkpoint-{plan.resume_at}")
    return {"plan": plan.__dict__, "batch": batch.__dict__, "determinism": notes,
            **figures_check(straight["records"] + resumed["records"], plan),
            "no_signal": no_signal_check(straight, plan),
            "resume": resume_check(straight, resumed, plan)}


def _own_run(master, setup, batch, data, reward, out_dir, max_steps, label, save_steps=None, resume=None,
             snapshot_steps=frozenset()) -> dict:
    model = copy.deepcopy(master).to(setup.device)
    clock = StepClock(setup.device, f"grposcope ({label})")
    steps = OwnSteps(clock, snapshot_steps)
    trainer = own_trainer(model, load_tokenizer(setup.tokenizer_dir), data, reward, setup, batch, out_dir,
                          max_steps=max_steps, callbacks=[steps], save_steps=save_steps, resume=resume)
    clock.start()
    trainer.train()
    return {"records": clock.records, "snapshots": steps.snapshots, "adam_steps": steps.adam_steps,
            "final": weights(trainer.model)}


FAMILY = "collapse/"  # the ACR family (docs/metrics.md)


def figures_check(records: list[dict], plan: CheckPlan) -> dict:
    """Losses, gradient norms and the ACR family finite; the ACR as scripted (0 on mixed steps, 1 on the
    no-signal step). On-policy GRPO's loss is ~0 by construction (ratio 1, advantages centred per group), so
    the gradient norm is the figure that would show a NaN first."""
    losses = [r.get("loss/policy") for r in records]
    grad_norms = [r.get("grad_norm") for r in records]
    family = {k: v for r in records for k, v in r.items() if k.startswith(FAMILY)}
    family_values = [v for r in records for k, v in r.items() if k.startswith(FAMILY)]
    acr = {r["step"]: r.get("collapse/acr") for r in records}
    expected = {step: float(step == plan.no_signal_step) for step in acr}
    return {"losses": losses, "losses_finite": bool(losses) and finite(losses),
            "grad_norms": grad_norms, "grad_norms_finite": bool(grad_norms) and finite(grad_norms),
            "acr_family_names": sorted(family), "acr_family_finite": bool(family) and finite(family_values),
            "acr_by_step": acr, "acr_as_scripted": acr == expected}


def no_signal_check(run: dict, plan: CheckPlan) -> dict:
    """The no-signal step is logged as skipped, leaves weights and AdamW's step count as they were, and the next
    step (with signal) moves the weights again (the control: a check that cannot pass by doing nothing)."""
    s, snaps, adam = plan.no_signal_step, run["snapshots"], run["adam_steps"]
    flags = {r["step"]: r.get("optimizer/skipped_no_signal") for r in run["records"]}
    out = {"step": s, "skipped_flags": flags,
           "skipped": flags.get(s) == 1.0 and all(v == 0.0 for step, v in flags.items() if step != s),
           "weights_unchanged": s - 1 in snaps and s in snaps and same_weights(snaps[s - 1], snaps[s]),
           "adam_steps_before_after": [adam.get(s - 1), adam.get(s)],
           "adam_step_count_unchanged": s - 1 in adam and adam.get(s - 1) == adam.get(s)}
    out["control_changed"] = s + 1 in snaps and s in snaps and not same_weights(snaps[s], snaps[s + 1])
    return out


def resume_check(straight: dict, resumed: dict, plan: CheckPlan) -> dict:
    """The resumed run's steps k+1..N and final weights equal the straight run's, bit for bit."""
    tail = [r for r in straight["records"] if r["step"] > plan.resume_at]
    keys = ("loss/policy", "reward/mean", "grad_norm")
    theirs = [[r.get(k) for k in keys] for r in tail]
    ours = [[r.get(k) for k in keys] for r in resumed["records"]]
    equal = same_weights(straight["final"], resumed["final"])
    return {"compared": list(keys), "straight": theirs, "resumed": ours, "losses_equal": bool(ours) and ours == theirs,
            "weights_equal": equal, "max_abs_diff": 0.0 if equal else max_abs_diff(straight["final"], resumed["final"]),
            "resumed_steps": [r["step"] for r in resumed["records"]]}


# --- speed and memory -----------------------------------------------------------------------------------------


def speed(kind: str, master, setup: Setup, batch: Batch, warmup: int, steps: int) -> dict:
    """One trainer, warm-up + measured steps on the shared batch with mixed rewards; per-step times, seconds per
    1,000 completion tokens, peak GPU memory from the model's copy onwards, and its logged figures' sanity."""
    tokenizer = load_tokenizer(setup.tokenizer_dir)
    data = make_prompts(tokenizer, 4 * batch.prompts, batch.prompt_length)
    reward = make_reward(batch.generations)
    if setup.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    before = gpu_memory(setup.device).get("allocated_mib")  # what earlier runs left behind
    model = copy.deepcopy(master).to(setup.device)
    clock = StepClock(setup.device, kind)
    out_dir, total = setup.work_dir / f"speed-{kind}", warmup + steps
    if kind == "grposcope":
        trainer = own_trainer(model, tokenizer, data, reward, setup, batch, out_dir, max_steps=total,
                              callbacks=[OwnSteps(clock)])
    else:
        trainer = trl_trainer(kind, model, tokenizer, data, reward, setup, batch, out_dir, max_steps=total,
                              callbacks=[trl_callback(clock)])
    clock.start()
    trainer.train()
    result = {**timing(clock.step_seconds(), warmup, batch.completion_tokens),
              "gpu_memory": {**gpu_memory(setup.device), "allocated_before_mib": before},
              "prompt_lengths": sorted(set(prompt_lengths(tokenizer, data)))}
    result.update(own_figures(clock.records, batch) if kind == "grposcope" else trl_figures(clock.logs, batch))
    return result


def own_figures(records: list[dict], batch: Batch) -> dict:
    lengths = [r.get("completion/mean_length") for r in records]
    phases = sorted({k for r in records for k in r if k.startswith("perf/") and k.endswith("_s")})
    return {"mean_lengths": lengths, "lengths_forced": all(v == batch.length for v in lengths),
            "losses_finite": finite([r.get("loss/policy") for r in records]),
            "acr_family_finite": finite([v for r in records for k, v in r.items() if k.startswith(FAMILY)]),
            "acr": [r.get("collapse/acr") for r in records],
            "phases_median_s": {k: statistics.median(r[k] for r in records if k in r) for k in phases}}


def trl_figures(logs: list[dict], batch: Batch) -> dict:
    steps = [log for log in logs if "loss" in log]  # the per-step logs (the run's summary has train_loss)
    lengths = [log.get("completions/mean_length") for log in steps]
    family = [v for log in steps for k, v in log.items() if k.startswith(FAMILY)]
    out = {"mean_lengths": lengths, "lengths_forced": bool(steps) and all(v == batch.length for v in lengths),
           "losses_finite": bool(steps) and finite([log["loss"] for log in steps]),
           "frac_reward_zero_std": [log.get("frac_reward_zero_std") for log in steps]}
    if family:  # grposcope's subclass logs the ACR family; stock TRL does not
        out["acr_family_finite"] = finite(family)
        out["acr"] = [log.get("collapse/acr") for log in steps]
    return out
