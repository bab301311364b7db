"""Reinforce-Ada and the budgeted sampler inside TRL (grposcope.integrations.trl), and the same numbers in every
host: for a scripted reward (a function of the prompt and the sample's index among that prompt's draws this
step, so no model quality enters), grposcope's own trainer and the TRL subclass draw the same samples per prompt
per round, keep the same rows and give the same advantages as the sampler alone.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest
import torch

trl = pytest.importorskip("trl")

from conftest import make_tiny_llama, make_tiny_tokenizer  # noqa: E402
from test_integration_trl import NEEDS_LAUNCHER, _two_processes, settings  # noqa: E402

from grposcope.core.advantages import ESTIMATORS  # noqa: E402
from grposcope.integrations.trl import GRPOConfig, GRPOTrainer  # noqa: E402
from grposcope.sampling import SAMPLERS  # noqa: E402
from grposcope.sampling.base import ScoredDraw  # noqa: E402
from grposcope.sampling.stream import PromptStream  # noqa: E402

from equal_numbers_cases import CASES as SHARED_CASES  # noqa: E402  isort: skip
from equal_numbers_cases import G, PROMPTS, scripted_reward, table_row  # noqa: E402  isort: skip

ROWS = [{"prompt": f"What is {p} + {p} ?", "pid": p} for p in PROMPTS]
CASES = {name: dict(sampler=sampler, advantage_estimator=estimator, **options)
         for name, (sampler, options, estimator) in SHARED_CASES.items()}


class ScriptedReward:
    """The reward of each completion from its prompt and its index among the prompt's samples so far: a
    counter per prompt, in the order the host scores its rows (sample j of prompt b is row b * n + j)."""

    __name__ = "scripted"

    def __init__(self) -> None:
        self.seen: dict[int, int] = defaultdict(int)

    def __call__(self, prompts, completions, pid, **kwargs):
        out = []
        for p in pid:
            out.append(scripted_reward(p, self.seen[p]))
            self.seen[p] += 1
        return out


class Recorder:
    """Wraps a host's sampler and estimator: every draw's prompts and size, the selection, the advantages."""

    def __init__(self, sampler, estimator) -> None:
        self.sampler, self.estimator = sampler, estimator
        self.rounds, self.selection, self.advantages, self.batch = [], None, None, None

    def sample(self, prompts, draw, more, g):
        self.batch = [key(p) for p in prompts]
        def recorded(subset, n):
            self.rounds.append({key(p): n for p in subset})
            return draw(subset, n)

        self.selection = self.sampler.sample(prompts, recorded, more, g)
        return self.selection

    def estimate(self, rewards, **kwargs):
        out = self.estimator(rewards, **kwargs)
        self.advantages = out.advantages
        return out

    def figures(self) -> dict:
        """Samples drawn per prompt per round, the kept samples' numbers per prompt, and the advantages."""
        kept = {key(p): row.tolist() for p, row in zip(self.selection.prompts, self.selection.samples)}
        advantages = {key(p): row.tolist() for p, row in zip(self.selection.prompts, self.advantages)}
        return {"batch": self.batch, "rounds": self.rounds, "kept": kept, "advantages": advantages}


def key(prompt) -> int:
    return prompt["pid"] if isinstance(prompt, dict) else prompt


def reference(case: dict) -> dict:
    """The sampler and estimator alone on the scripted rewards, the batch in PROMPTS' order."""
    options = {k: v for k, v in case.items() if k not in ("sampler", "advantage_estimator")}
    recorder = Recorder(SAMPLERS.make(case["sampler"], seed=0, **options), ESTIMATORS.make(case["advantage_estimator"]))
    seen: dict[int, int] = defaultdict(int)

    def draw(prompts, n):
        rewards = torch.zeros(len(prompts), n)
        for b, p in enumerate(prompts):
            for j in range(n):
                rewards[b, j] = scripted_reward(p, seen[p])
                seen[p] += 1
        return ScoredDraw(rewards, torch.ones(len(prompts), n))

    selection = recorder.sample(list(PROMPTS), draw, lambda count: [], G)
    recorder.estimate(selection.rewards, pool=selection.pool, as_drawn=selection.as_drawn)
    return recorder.figures()


def own_trainer_run(tmp_path, case: dict) -> dict:
    from test_trainer import tiny_config

    from grposcope import GRPOTrainer as OwnTrainer

    args = tiny_config(tmp_path, per_device_train_batch_size=len(PROMPTS) * G, gradient_accumulation_steps=1,
                       max_steps=1, save_steps=10, **case)
    # the trainer's first batch is its seeded stream's first permutation: lay the data out so that the batch
    # is PROMPTS in order, as TRL (shuffle off) and the verl test take it
    order = PromptStream(range(len(ROWS)), args.seed).take(len(ROWS))
    data = [None] * len(ROWS)
    for row, position in zip(ROWS, order):
        data[position] = row
    trainer = OwnTrainer(model=make_tiny_llama(), processing_class=make_tiny_tokenizer(),
                         reward_funcs=ScriptedReward(), train_dataset=data, args=args)
    recorder = _install(trainer, trainer.sampler, trainer.estimator)
    trainer.train()
    return recorder.figures()


def _install(trainer, sampler, estimator) -> Recorder:
    recorder = Recorder(sampler, estimator)
    trainer.sampler, trainer.estimator = recorder, recorder.estimate
    return recorder


def trl_generation(tmp_path, case: dict, monkeypatch):
    """One TRL training generation on the batch in PROMPTS' order (TRL's shuffle off), the scripted reward. Also
    returns each round's completions as TRL generated them (one process: no padding rows)."""
    stock, generated = trl.GRPOTrainer._generate_and_score_completions, []

    def recording(self, inputs):
        out = stock(self, inputs)
        generated.extend(_tokens(out))
        return out

    monkeypatch.setattr(trl.GRPOTrainer, "_generate_and_score_completions", recording)
    dataset = ROWS
    config = GRPOConfig(**settings(tmp_path, per_device_train_batch_size=len(PROMPTS) * G, max_steps=1,
                                   shuffle_dataset=False), **case)
    torch.manual_seed(0)
    trainer = GRPOTrainer(model=make_tiny_llama(), reward_funcs=ScriptedReward(), args=config,
                          train_dataset=dataset, processing_class=make_tiny_tokenizer())
    trainer.model.train()
    recorder = _install(trainer, trainer.sampler, trainer.estimator)
    output = trainer._generate_and_score_completions([dict(p) for p in dataset for _ in range(G)])
    return recorder, output, trainer, generated


def _tokens(output) -> list[list[int]]:
    """Each row's completion tokens, padding cut."""
    return [ids[mask.bool()].tolist() for ids, mask in zip(output["completion_ids"], output["completion_mask"])]


@pytest.mark.parametrize("name", list(CASES))
def test_every_host_draws_keeps_and_advantages_alike(tmp_path, name, monkeypatch):
    case = CASES[name]
    own = own_trainer_run(tmp_path / "own", case)
    expected = reference(case)
    recorder, output, trainer, generated = trl_generation(tmp_path / "trl", case, monkeypatch)
    ours = recorder.figures()
    table = []
    for host, got in (("grposcope", own), ("trl", ours)):
        assert got["batch"] == PROMPTS, host
        assert got["rounds"] == expected["rounds"], host
        assert got["kept"] == expected["kept"], host
        worst = max(abs(a - b) for p in expected["advantages"]
                    for a, b in zip(got["advantages"][p], expected["advantages"][p]))
        assert worst <= 1e-6, host
        table.append(table_row(name, host, got["rounds"], {p: len(v) for p, v in got["kept"].items()}, worst))
    # TRL's training batch: the kept groups' advantages in the sampler's order, then masked filler rows
    kept = torch.tensor([a for p in recorder.selection.prompts for a in ours["advantages"][key(p)]])
    torch.testing.assert_close(output["advantages"][: len(kept)], kept, atol=1e-6, rtol=0)
    # ... on the completions the sampler kept: sample s is row s of the rounds as generated, in order
    kept_samples = recorder.selection.samples.reshape(-1).tolist()
    assert _tokens(output)[: len(kept)] == [generated[s] for s in kept_samples]
    assert output["completion_mask"][len(kept):].sum() == 0
    assert float(output["num_items_in_batch"]) == float(output["completion_mask"].sum())
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    assert metrics["sampler/rounds"] == len(expected["rounds"])
    assert metrics["sampler/samples_generated"] == sum(sum(r.values()) for r in expected["rounds"])
    if case["sampler"] == "reinforce_ada":  # before the sampler: only 0 and 5 are mixed in their first 4
        assert metrics["collapse/acr"] == pytest.approx(4 / 6)
    _write(name, table)


def _write(name: str, rows: list[dict]) -> None:
    """The equal-numbers table's rows, when GRPOSCOPE_EQUAL_NUMBERS_OUT names a folder (bench/equal_numbers.py)."""
    folder = os.environ.get("GRPOSCOPE_EQUAL_NUMBERS_OUT")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"hosts-{name}.json").write_text(json.dumps(rows, indent=1))


def test_pool_without_a_pool_sampler_is_refused_and_reinforce_ada_without_pool_warned(tmp_path):
    with pytest.raises(ValueError, match="advantage_estimator='pool' takes its baseline .* use "
                                         "sampler='reinforce_ada'"):
        GRPOConfig(**settings(tmp_path), advantage_estimator="pool")
    with pytest.warns(UserWarning, match="advantage_estimator='grpo' ignores it"):
        GRPOConfig(**settings(tmp_path), sampler="reinforce_ada", round_size=4)
    with pytest.raises(ValueError, match="round_size=6 is not a multiple of num_generations=4"):
        GRPOConfig(**settings(tmp_path), sampler="reinforce_ada", advantage_estimator="pool", round_size=6)


def test_reinforce_ada_and_budgeted_train_and_checkpoint_in_trl(tmp_path):
    """Two optimizer steps through TRL's own train(): the sampler's metrics in TRL's log history, its state
    (budgeted's beliefs) in TRL's checkpoint, restored on resume."""
    for case in ("reinforce_ada_balance", "budgeted"):
        out = tmp_path / case
        config = GRPOConfig(**settings(out, per_device_train_batch_size=8, save_strategy="steps", save_steps=2),
                            **CASES[case])
        torch.manual_seed(0)
        trainer = GRPOTrainer(model=make_tiny_llama(), reward_funcs=ScriptedReward(), args=config,
                              train_dataset=ROWS, processing_class=make_tiny_tokenizer())
        trainer.train()
        history = [h for h in trainer.state.log_history if "loss" in h]
        assert len(history) == 2
        for h in history:
            assert {"sampler/rounds", "sampler/samples_generated", "sampler/informative_frac",
                    "collapse/acr"} <= set(h)
        state = torch.load(out / "out" / "checkpoint-2" / "grposcope_state.pt", weights_only=True)
        if case == "budgeted":
            assert state["sampler"]["step"] == 2 and len(state["sampler"]["keys"]) >= 2
        resumed = GRPOTrainer(model=make_tiny_llama(), reward_funcs=ScriptedReward(), args=config,
                              train_dataset=ROWS, processing_class=make_tiny_tokenizer())
        resumed.load_grposcope_state(state)
        assert torch.equal(resumed.sampler.generator.get_state(), trainer.sampler.generator.get_state())


@NEEDS_LAUNCHER
@pytest.mark.parametrize("case", ["reinforce_ada", "budgeted"])
def test_two_processes_run_the_same_rounds(tmp_path, case):
    """Both samplers on two processes, groups straddling them: both processes draw the same rounds, hold the same
    batch and metrics, and the run ends (a hang fails at the timeout)."""
    _two_processes(tmp_path, case)
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(2)]
    assert ranks[0]["records"] == ranks[1]["records"]
    records = ranks[0]["records"]
    assert all(r["rows"] == 6 and len(r["advantages"]) == 12 for r in records)
    assert all(r["num_items_in_batch"] == sum(r["completion_tokens"]) for r in records)
    if case == "reinforce_ada":
        assert max(r["metrics"]["sampler/rounds"] for r in records) > 1
    print(json.dumps([{k: r["metrics"][k] for k in ("sampler/rounds", "sampler/samples_generated",
                                                     "sampler/padding_samples", "collapse/acr")} for r in records]))


@pytest.mark.embedded
def test_reinforce_ada_balance_recipe_runs_on_the_cpu(tmp_path):
    """examples/trl/reinforce_ada_balance.sh's sampler flags on the CPU with the embedded model, 2 steps: the
    log history holds the sampler's rounds and the pool-baseline run's collapse metrics."""
    import subprocess
    import sys

    script = Path(__file__).parents[1] / "examples" / "trl" / "reinforce_ada_balance.sh"
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(script), "cpu", "--output_dir", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    history = json.loads((tmp_path / "out" / "checkpoint-2" / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "loss" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["sampler/samples_generated"] == 8 * h["sampler/rounds"]  # one prompt a step, rounds of 8
        assert 1 <= h["sampler/rounds"] <= 4 and h["sampler/samples_kept"] == 4
        assert {"collapse/acr", "collapse/acr_post", "sampler/informative_frac"} <= set(h)
