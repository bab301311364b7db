"""Evaluation: greedy pass@1, avg@k and unbiased pass@k of a model on a list of examples.

    from grposcope.evaluation import EvalSettings, evaluate_model, load_eval_examples
    examples, task_rewards = load_eval_examples("arithmetic", split="eval")
    result = evaluate_model(model, tokenizer, examples, task_rewards, EvalSettings(num_samples=8))
    result.metrics    # {"eval/accuracy": .., "eval/avg@8": .., "eval/pass@1": .., "eval/pass@8": .., ...}
    result.save("eval.json")

One implementation serves `grposcope eval` and the trainer's held-out evaluation (greedy only there).

Notation: B prompts in a batch, k samples per prompt (`num_samples`), c of them correct.

A completion is correct when its weighted reward (the `RewardScorer`'s combination, as in training) is
>= `success_threshold`. Per prompt: the greedy completion gives `accuracy` (pass@1 greedy); k sampled
completions give `avg@k` = c / k and the unbiased `pass@j` of Chen et al., "Evaluating Large Language
Models Trained on Code" (arXiv 2107.03374), for j = 1, 2, 4, ... and j = k. Figures are means over prompts,
overall and per difficulty level (`example["level"]`, as a string).

Deviation from the paper: it draws n > k samples to estimate pass@k with low variance; here n = k, so
`pass@k` is the plain "at least one of k correct" share and the smaller `pass@j` use the same k samples.
This module never imports `grposcope.trainer` (the trainer imports it); the reward functions' inputs
follow `grposcope.rewards.inputs`, as in training.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from .data.tasks import is_file_spec
from .errors import InputTypeError
from .eval_settings import EvalSettings

Progress = Callable[[int, int], None]  # (prompts done, prompts in total)
SPLITS = ("eval", "train", "all")
# A MATH-500-style file asks for the answer in \boxed{}: checked with math-verify, as MATH-500 is scored.
FILE_REWARDS = ("box_accuracy_reward",)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k) (arXiv 2107.03374).

    Computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i), the paper's product form: no huge binomials, no overflow.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputTypeError(f"pass_at_k: {name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n (correct samples among n), got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n (k of the n samples drawn), got n={n}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_sizes(k: int) -> list[int]:
    """The j of the reported pass@j: powers of two below k, then k itself (k=6 -> [1, 2, 4, 6])."""
    sizes, j = [], 1
    while j < k:
        sizes.append(j)
        j *= 2
    return sizes + [k]


@dataclass
class EvalResult:
    """Figures overall and per level (`prompts`, `accuracy`, `avg@k`, `pass@j`), and one record per prompt."""

    overall: dict[str, float]
    levels: dict[str, dict[str, float]]
    records: list[dict[str, Any]]
    settings: EvalSettings
    reward_funcs: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def metrics(self) -> dict[str, float]:
        """Flat metric names: `eval/<figure>` overall and `eval/<figure>/<level>` (prompt counts left out)."""
        out = {f"eval/{name}": value for name, value in self.overall.items() if name != "prompts"}
        for level, figures in self.levels.items():
            out.update({f"eval/{name}/{level}": v for name, v in figures.items() if name != "prompts"})
        return out

    def to_dict(self, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """The results file's content: the config used (settings, reward functions, `config`), the
        metrics, the figures overall and per level, and the records."""
        from .version import package_version

        used = {**asdict(self.settings), "reward_funcs": self.reward_funcs, **(config or {})}
        return {
            "grposcope_version": package_version(), "config": used, "metrics": self.metrics,
            "overall": self.overall, "levels": self.levels, "seconds": round(self.seconds, 3),
            "records": self.records,
        }

    def save(
        self, path: str | os.PathLike, *, config: dict[str, Any] | None = None, overwrite: bool = False
    ) -> Path:
        """Writes `to_dict(config)` as JSON, atomically; an existing file is replaced only with overwrite."""
        path = Path(path)
        if path.is_dir():  # overwrite could not replace a folder with a file
            raise IsADirectoryError(f"{path} is a folder; name a file in it, e.g. {path / 'eval.json'}")
        if path.exists() and not overwrite:
            raise FileExistsError(
                f"{path} already exists; pass overwrite=True to replace it, or choose another path"
            )
        write_json_atomic(path, self.to_dict(config))
        return path


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """JSON into a temporary file beside `path`, then renamed over it: a reader never sees half a file."""
    from .files import write_text_atomic

    write_text_atomic(path, json_text(data))  # makes the missing folders


def json_text(data: Any) -> str:
    """How results files are written: indented UTF-8 JSON, values JSON cannot hold as their str()."""
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


# ---------------------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------------------


def evaluate(
    examples: Sequence[dict[str, Any]],
    backend: Any,
    scorer: Any,
    settings: EvalSettings = EvalSettings(),
    *,
    tokenizer: Any = None,
    progress: Progress | None = None,
) -> EvalResult:
    """Evaluates through a rollout backend (`grposcope.rollout`) and a `RewardScorer`, batch by batch.

    An example's text is its `prompt_text`, else its `prompt` rendered with `tokenizer` (default: the
    backend's). Other columns reach the reward functions as in training. `progress(done, total)` is called
    after each batch. Sampling runs under a forked torch RNG: the caller's random state is left as it was.
    """
    if not examples:
        raise ValueError("no examples to evaluate; check the dataset, the split and --limit")
    t0 = time.perf_counter()
    tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
    texts = _prompt_texts(examples, tokenizer)
    records: list[dict[str, Any]] = []
    with _forked_rng(settings.num_samples > 0):
        for start in range(0, len(examples), settings.batch_size):
            stop = start + settings.batch_size
            chunk, chunk_texts = examples[start:stop], texts[start:stop]
            records += _evaluate_batch(chunk, chunk_texts, backend, scorer, settings, start)
            if progress is not None:
                progress(len(records), len(examples))
    overall, levels = summarize(records, settings.num_samples)
    names = list(getattr(scorer, "names", []))
    return EvalResult(overall, levels, records, settings, names, time.perf_counter() - t0)


def evaluate_model(
    model: Any,
    tokenizer: Any,
    examples: Sequence[dict[str, Any]],
    reward_funcs: Any,
    settings: EvalSettings = EvalSettings(),
    *,
    max_prompt_length: int | None = None,
    reward_weights: Sequence[float] | None = None,
    progress: Progress | None = None,
) -> EvalResult:
    """`evaluate` with a model object: generation with transformers, rewards by name or callable."""
    from .rewards import RewardScorer
    from .rollout import ROLLOUTS

    if not reward_funcs:
        raise ValueError(
            "no reward function: pass reward_funcs, a registered name ('accuracy_reward') or a callable"
        )
    scorer = RewardScorer(reward_funcs, reward_weights=reward_weights)
    model.eval()  # no dropout while generating
    backend = ROLLOUTS.make(
        "transformers", model=model, tokenizer=tokenizer, max_prompt_length=max_prompt_length
    )
    return evaluate(examples, backend, scorer, settings, tokenizer=tokenizer, progress=progress)


def _evaluate_batch(
    chunk: Sequence[dict], texts: list[str], backend: Any, scorer: Any, settings: EvalSettings, offset: int
) -> list[dict[str, Any]]:
    """Greedy (and, with k > 0, k sampled) completions of B prompts, scored; one record per prompt."""
    from .rollout import SamplingParams

    greedy = backend.generate(texts, 1, SamplingParams(settings.max_completion_length, greedy=True))
    greedy_rewards = _score(scorer, chunk, greedy, 1)  # (B,)
    k = settings.num_samples
    sample_rewards = torch.empty(len(chunk), 0)  # (B, 0) without sampling
    if k > 0:
        # Seeded per batch from the index of its first prompt: with the same batch size, a run on the first
        # N prompts (--limit) draws the same samples as the first batches of a longer run.
        torch.manual_seed(settings.seed + offset)
        params = SamplingParams(settings.max_completion_length, settings.temperature, settings.top_p)
        sampled = backend.generate(texts, k, params)  # rows j*k .. j*k+k-1 belong to prompt j
        sample_rewards = _score(scorer, chunk, sampled, k).view(len(chunk), k)  # (B, k)
    threshold = settings.success_threshold
    return [
        _record(offset + i, example, greedy.texts[i], bool(greedy.truncated[i]), greedy_rewards[i],
                sample_rewards[i], threshold, k)
        for i, example in enumerate(chunk)
    ]


def _score(scorer: Any, chunk: Sequence[dict], rollout: Any, g: int) -> torch.Tensor:
    from .rewards.inputs import reward_inputs

    inputs = reward_inputs(chunk, rollout.texts, g, rollout.completion_ids, rollout.completion_mask)
    return scorer.score(*inputs).rewards  # (B*g,)


def _record(
    index: int, example: dict, text: str, truncated: bool, reward: torch.Tensor, samples: torch.Tensor,
    threshold: float, k: int,
) -> dict[str, Any]:
    """One prompt's outcome. Correctness is judged on the float32 rewards, exactly as the trainer does."""
    record: dict[str, Any] = {"index": index, "prompt": example["prompt"]}
    if "answer" in example:
        record["answer"] = example["answer"]
    if "level" in example:
        record["level"] = str(example["level"])
    record.update(
        greedy_completion=text, greedy_reward=_plain(reward), greedy_correct=bool(reward >= threshold),
        greedy_truncated=truncated, sample_rewards=[_plain(r) for r in samples],
        num_correct=int((samples >= threshold).sum()) if k > 0 else None,
    )
    return record


def _plain(value: torch.Tensor) -> float:
    return float(f"{float(value):.7g}")  # float32 noise off: 0.3, not 0.30000001192092896


def summarize(
    records: Sequence[dict[str, Any]], k: int
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Figures over all records, and per level (levels sorted by name; records without one count in all)."""
    by_level: dict[str, list[dict]] = {}
    for record in records:
        if "level" in record:
            by_level.setdefault(record["level"], []).append(record)
    levels = {level: figures(group, k) for level, group in sorted(by_level.items())}
    return figures(records, k), levels


def figures(records: Sequence[dict[str, Any]], k: int) -> dict[str, float]:
    """`prompts`, `accuracy` (greedy), and with k > 0 `avg@k` and `pass@j`: means over the records."""
    n = len(records)
    out: dict[str, float] = {"prompts": n, "accuracy": sum(r["greedy_correct"] for r in records) / n}
    if k > 0:
        out[f"avg@{k}"] = sum(r["num_correct"] / k for r in records) / n
        for j in pass_sizes(k):
            out[f"pass@{j}"] = sum(pass_at_k(k, r["num_correct"], j) for r in records) / n
    return out


def _prompt_texts(examples: Sequence[dict[str, Any]], tokenizer: Any) -> list[str]:
    from .data.chat import render_prompt

    texts = []
    for i, example in enumerate(examples):
        if "prompt_text" in example:
            texts.append(example["prompt_text"])
        elif "prompt" not in example:
            raise ValueError(f"example {i} has no 'prompt' column; every example needs one")
        elif tokenizer is None and not isinstance(example["prompt"], str):
            raise ValueError(f"example {i}: rendering a chat prompt needs a tokenizer; pass tokenizer=")
        else:
            texts.append(render_prompt(example["prompt"], tokenizer))
    return texts


@contextlib.contextmanager
def _forked_rng(active: bool):
    """Seeding inside leaves the caller's torch random state (CPU and CUDA) as it was."""
    if not active:
        yield
        return
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        yield


# ---------------------------------------------------------------------------------------------------------
# Examples from a task spec
# ---------------------------------------------------------------------------------------------------------


def default_split(spec: str) -> str:
    """`all` for a file (MATH-500 is a test set), `eval` (the held-out split) for a generated task."""
    return "all" if is_file_spec(spec) else "eval"


def load_eval_examples(
    spec: str,
    split: str | None = None,
    *,
    seed: int = 42,
    dataset_size: int | None = None,
    eval_size: int | None = None,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """Examples of task `spec` (as `load_task` takes it) and the rewards it recommends (a .jsonl file:
    `FILE_REWARDS`; None when there are none).

    `eval` and `train` are the splits a training run with the same seed, dataset_size and eval_size used;
    `all` is a whole file in its order, or train + eval of a generated task. `limit` keeps the first N.
    """
    from .data.tasks import load_task

    split = default_split(spec) if split is None else split
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int (the first N examples), got {limit!r}")
    if split == "all" and is_file_spec(spec):
        if eval_size is not None:  # the whole file has no held-out part: a silent no-op would mislead
            raise ValueError(f"eval_size={eval_size} has no effect on the 'all' split of {spec} (every example "
                             "is evaluated); leave it out, or use the 'eval' split for the examples a training "
                             "run with that eval_size holds out")
        task = load_task(spec, eval_size=0, seed=seed)  # no held-out part: train is the whole file, in order
        examples = task.train
    else:
        task = load_task(spec, size=dataset_size, seed=seed, eval_size=eval_size)
        examples = {"eval": task.eval, "train": task.train, "all": task.train + task.eval}[split]
    if not examples:
        raise ValueError(
            f"the {split!r} split of {spec!r} is empty; pick another split, or a larger eval_size"
        )
    rewards = task.reward_funcs or (list(FILE_REWARDS) if is_file_spec(spec) else None)
    return [dict(e) for e in examples[:limit]], rewards
