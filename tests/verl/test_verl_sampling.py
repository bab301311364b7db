"""grposcope's samplers inside verl 0.9.1's legacy trainer (grposcope.integrations.verl_sampling), on the CPU.

verl cannot start vLLM here, so one thing is stood in for: the rollout manager. `ScriptedManager` answers
`generate_sequences` as verl's AgentLoopManager does (it splits the call over its workers with verl's own
`DataProto.chunk`, which asserts divisibility, and joins them with `DataProto.concat`), laying out each row as
the agent loop's `_postprocess` does (left-padded prompt, right-padded response, masks, position ids,
`rm_scores` on the last response token), with a scripted reward instead of a model: the reward of a sample is
a function of its prompt and of k, the index of that sample among all samples drawn for the prompt in the
step. With `colocated=True` it leaves `rm_scores` out, and `colocated_reward` stands in for the trainer's
`_compute_reward_colocate` (verl's RewardLoopManager). The trainer object itself is a stand-in except in the
checkpoint test, which builds a real RayPPOTrainer without running its constructor.

What runs for real (verl 0.9.1's own code): `DataProto` and everything it does on the way (from_single_dict,
repeat, select_idxs, slice, chunk, concat, union with its equality checks, reorder), the dataset's
`collate_fn`, `RayPPOTrainer._get_gen_batch`, `pad_dataproto_to_divisor`, `compute_response_mask`,
`extract_reward`, `compute_advantage` with the registered grposcope estimators, `agg_loss`, `Tracking` with its
file backend, and the legacy trainer's `_save_checkpoint` / `_load_checkpoint` (workers and dataloader stood
in) as patched by grposcope; the patch of RayPPOTrainer itself when verl imports it, in a fresh interpreter.
`fit_step` strings those together in the order RayPPOTrainer.fit calls them (a reorder stands in for
`_balance_batch`). Not run: fit itself, Ray, vLLM, the workers' forward and backward passes.

Each sampler's decisions are checked against the sampler run alone on the same scripted reward
(`SAMPLERS.make(name, **opts).sample(prompts, scripted_draw, lambda c: [], g)`, then the estimator on the
Selection): the samples drawn per prompt per round, the rows kept, the advantages (<= 1e-6). With
GRPOSCOPE_EQUAL_NUMBERS_OUT set, the per-prompt figures are written there as JSON.
Runs in .venv-verl (scripts/test_verl.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("verl.trainer.ppo.core_algos", reason="needs verl 0.9.1: bash scripts/test_verl.sh")

from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.core_algos import agg_loss  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_advantage, compute_response_mask  # noqa: E402
from verl.trainer.ppo.reward import extract_reward  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn  # noqa: E402
from verl.utils.tracking import Tracking  # noqa: E402

from grposcope.core.advantages import ESTIMATORS  # noqa: E402
from grposcope.integrations import verl as plugin  # noqa: E402
from grposcope.integrations import verl_sampling  # noqa: E402
from grposcope.integrations.verl_groups import verl_name  # noqa: E402
from grposcope.sampling import SAMPLERS, ScoredDraw  # noqa: E402

from equal_numbers_cases import CASES as SHARED_CASES  # noqa: E402  isort: skip
from equal_numbers_cases import CORRECT, RA, G, PROMPTS, scripted_reward, table_row  # noqa: E402,F401  isort: skip

P, R = 6, 8  # prompt and response widths (rollout.prompt_length / response_length); G: rollout.n
# the scripted step every host's equal-numbers test shares (tests/equal_numbers_cases.py)
CASES = {name: (sampler, options, verl_name(estimator), estimator)  # name: (sampler, its options, verl's name
         for name, (sampler, options, estimator) in SHARED_CASES.items()}  # of the estimator, grposcope's)
FIGURES: dict[str, dict] = {}
TABLE: list[dict] = []


def scripted_length(p: int, k: int) -> int:
    return 1 + (3 * p + 5 * k) % R  # response tokens, 1..R


def prompt_of(raw_prompt) -> int:
    return int(raw_prompt[0]["content"].split()[-1])


class ScriptedManager:
    """verl's AgentLoopManager, stood in for (module docstring)."""

    def __init__(self, workers: int = 4, colocated: bool = False) -> None:
        self.agent_loop_workers = [object()] * workers
        self.colocated = colocated
        self.calls: list[list[int]] = []  # the prompt of each row of each call, padding rows included
        self.drawn: Counter = Counter()  # samples drawn per prompt this step
        self.step = None

    def generate_sequences(self, batch: DataProto) -> DataProto:
        if batch.meta_info.get("global_steps") != self.step:
            self.step, self.drawn = batch.meta_info.get("global_steps"), Counter()
        self.calls.append([prompt_of(raw) for raw in batch.non_tensor_batch["raw_prompt"]])
        outputs = [self._answer(chunk) for chunk in batch.chunk(len(self.agent_loop_workers))]
        out = DataProto.concat(outputs)
        out.meta_info = {"timing": {"agent_loop/generate_sequences/max": 1.0,
                                    "agent_loop/slowest/response_length": float(R)}, **outputs[0].meta_info}
        return out

    def _answer(self, chunk: DataProto) -> DataProto:
        samples = []
        for raw in chunk.non_tensor_batch["raw_prompt"]:
            p = prompt_of(raw)
            samples.append((p, self.drawn[p]))
            self.drawn[p] += 1
        n = len(samples)
        prompts, responses = torch.zeros(n, P, dtype=torch.long), torch.zeros(n, R, dtype=torch.long)
        attention, response_mask = torch.zeros(n, P + R, dtype=torch.long), torch.zeros(n, R, dtype=torch.long)
        scores = torch.zeros(n, R)
        for i, (p, k) in enumerate(samples):
            length, plen = scripted_length(p, k), 2 + p % 3
            prompts[i, P - plen:] = 10 + p
            responses[i, :length] = 50 + k
            attention[i, P - plen:P + length] = 1
            response_mask[i, :length] = 1
            scores[i, length - 1] = scripted_reward(p, k)
        tensors = {"prompts": prompts, "responses": responses, "response_mask": response_mask,
                   "input_ids": torch.cat([prompts, responses], dim=1), "attention_mask": attention,
                   "position_ids": (attention.cumsum(dim=1) - 1).clamp(min=0)}
        rewards = np.array([scripted_reward(p, k) for p, k in samples])
        fields = {"__num_turns__": np.full(n, 2, dtype=np.int32),
                  "scripted_sample": np.array([f"{p}:{k}" for p, k in samples], dtype=object)}
        if self.colocated:  # no rm_scores; the input's fields come back (verl: reward_loop_worker_handles None)
            fields.update({k: v.copy() for k, v in chunk.non_tensor_batch.items()})
            fields["scripted_reward"] = rewards
            return DataProto.from_dict(tensors=tensors, non_tensors=fields)
        tensors["rm_scores"] = scores
        fields["acc"] = rewards  # a reward_extra_info, as verl's reward loop adds it
        return DataProto.from_dict(tensors=tensors, non_tensors=fields, meta_info={"reward_extra_keys": ["acc"]})


def colocated_reward(data: DataProto) -> DataProto:
    """Stands in for RayPPOTrainer._compute_reward_colocate: rm_scores on each row's last response token."""
    scores = torch.zeros(data.batch["responses"].shape)
    last = data.batch["response_mask"].sum(dim=-1) - 1
    rewards = data.non_tensor_batch["scripted_reward"]
    scores[torch.arange(len(data)), last] = torch.tensor(rewards, dtype=torch.float)
    return DataProto.from_dict(tensors={"rm_scores": scores}, non_tensors={"acc": rewards},
                               meta_info={"reward_extra_keys": ["acc"]})


def config(sampler: str, options: dict, estimator: str, workers: int = 4, folder: str = "unused"):
    return OmegaConf.create({
        "algorithm": {"adv_estimator": estimator, "grposcope": {"sampler": sampler, **options}},
        "actor_rollout_ref": {"rollout": {"n": G, "agent": {"num_workers": workers}},
                              "actor": {"checkpoint": {"async_save": False}}},
        "trainer": {"default_local_dir": folder, "resume_mode": "auto", "default_hdfs_dir": None,
                    "del_local_ckpt_after_load": False}})


def stand_in_trainer(cfg, manager: ScriptedManager):
    return SimpleNamespace(config=cfg, async_rollout_manager=manager, tokenizer=SimpleNamespace(pad_token_id=0),
                           _compute_reward_colocate=colocated_reward, total_training_steps=20)


def fit_step(trainer, step: int, seed: int = 0) -> tuple[DataProto, DataProto]:
    """One training step's data path, in RayPPOTrainer.fit's order, through verl's own functions: the batch
    right after the union with the wrapper's answer (rows in the order fit handed them over), and the batch
    after compute_advantage."""
    batch = DataProto.from_single_dict(collate_fn([
        {"raw_prompt": [{"role": "user", "content": f"question {p}"}], "dummy_tensor": torch.tensor([0]),
         "data_source": "scripted", "reward_model": {"ground_truth": str(p)}, "extra_info": {"index": p},
         "index": p, "tools_kwargs": {}, "interaction_kwargs": {}} for p in PROMPTS]))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in PROMPTS], dtype=object)
    gen_batch = RayPPOTrainer._get_gen_batch(None, batch)  # uses nothing of the trainer
    gen_batch.meta_info["global_steps"] = step
    out = trainer.async_rollout_manager.generate_sequences(gen_batch.repeat(repeat_times=G, interleave=True))
    out.meta_info.pop("timing")
    batch = batch.repeat(repeat_times=G, interleave=True).union(out)
    if "response_mask" not in batch.batch.keys():
        batch.batch["response_mask"] = compute_response_mask(batch)
    answer = batch.slice(0, None)  # reorder below replaces batch's fields, not this view's
    batch.reorder(torch.randperm(len(batch), generator=torch.Generator().manual_seed(seed)))  # as _balance_batch
    reward_tensor, _ = extract_reward(batch)
    batch.batch["token_level_scores"] = batch.batch["token_level_rewards"] = reward_tensor
    batch = compute_advantage(batch, adv_estimator=trainer.config.algorithm.adv_estimator, num_repeat=G,
                              config=trainer.config.algorithm)
    return answer, batch


class Reference:
    """The sampler alone on the scripted reward, then the estimator on its Selection."""

    def __init__(self, sampler: str, options: dict, estimator: str) -> None:
        self.sampler, self.estimator = SAMPLERS.make(sampler, **options), ESTIMATORS.make(estimator)

    def step(self):
        drawn, log, calls = Counter(), [], []

        def scripted_draw(prompts, k):
            rewards, lengths, call = torch.zeros(len(prompts), k), torch.zeros(len(prompts), k), []
            for a, p in enumerate(prompts):
                for j in range(k):
                    rewards[a, j], lengths[a, j] = scripted_reward(p, drawn[p]), scripted_length(p, drawn[p])
                    log.append(f"{p}:{drawn[p]}")
                    call.append(p)
                    drawn[p] += 1
            calls.append(call)
            return ScoredDraw(rewards, lengths)

        selection = self.sampler.sample(list(PROMPTS), scripted_draw, lambda count: [], G)
        adv = self.estimator(selection.rewards, pool=selection.pool, as_drawn=selection.as_drawn).advantages
        kept = {p: [log[s] for s in row] for p, row in zip(selection.prompts, selection.samples.tolist())}
        advantage = {log[s]: a for row, values in zip(selection.samples.tolist(), adv.tolist())
                     for s, a in zip(row, values)}
        return selection, calls, kept, advantage


def rows_by_prompt(data: DataProto) -> dict[int, list]:
    out: dict[int, list] = {}
    for info, sample, filler in zip(data.non_tensor_batch["extra_info"], data.non_tensor_batch["scripted_sample"],
                                    data.non_tensor_batch[verl_sampling.FILLER]):
        out.setdefault(info["index"], []).append(None if filler else sample)
    return out


@pytest.fixture(autouse=True)
def fresh():
    plugin.reset()
    yield
    plugin.reset()


def write_figures() -> None:
    """The equal-numbers table's verl rows (step 1, as the other hosts' tests run it) and every step's
    per-prompt figures, when GRPOSCOPE_EQUAL_NUMBERS_OUT names a folder (bench/equal_numbers.py)."""
    folder = os.environ.get("GRPOSCOPE_EQUAL_NUMBERS_OUT")
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "hosts-verl.json"), "w") as f:
            json.dump(TABLE, f, indent=1)
        with open(os.path.join(folder, "verl-steps.json.detail"), "w") as f:
            json.dump(FIGURES, f, indent=1, sort_keys=True)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("colocated", [False, True], ids=["reward_loop", "colocated"])
def test_the_wrapper_changes_nothing_the_sampler_decides(case, colocated):
    sampler, options, verl_estimator, core_estimator = CASES[case]
    manager = ScriptedManager(colocated=colocated)
    trainer = stand_in_trainer(config(sampler, options, verl_estimator), manager)
    rollouts = verl_sampling.install(trainer)
    reference = Reference(sampler, options, core_estimator)
    figures = {}
    for step in (1, 2):  # the second step of budgeted ranks by what the first taught
        start = len(manager.calls)
        out, batch = fit_step(trainer, step, seed=step)
        selection, calls, kept, advantage = reference.step()
        # the same samples per prompt per round (4 workers divide every round here: no padding rows)
        assert [Counter(c) for c in manager.calls[start:]] == [Counter(c) for c in calls]
        # n rows per uid, in the input's interleaved order, each its prompt's kept samples in the kept order
        uids = out.non_tensor_batch["uid"]
        assert len(out) == G * len(PROMPTS) and all(len(set(uids[i:i + G])) == 1 for i in range(0, len(out), G))
        got = rows_by_prompt(out)
        for p in PROMPTS:
            assert got[p] == kept.get(p, [None] * G)
        # the advantages verl computed, row by row after the reorder, against the estimator on the Selection
        adv, mask = batch.batch["advantages"], batch.batch["response_mask"]
        diff: dict[int, float] = {}
        for row, (info, sample) in enumerate(zip(batch.non_tensor_batch["extra_info"],
                                                 batch.non_tensor_batch["scripted_sample"])):
            p = info["index"]
            if batch.non_tensor_batch[verl_sampling.FILLER][row]:
                assert not mask[row].any() and not adv[row].any()
                continue
            expected = advantage[sample] * mask[row]
            diff[p] = max(diff.get(p, 0.0), float((adv[row] - expected).abs().max()))
        assert max(diff.values()) <= 1e-6
        metrics = verl_sampling.pending_metrics()
        assert {k: v for k, v in metrics.items() if k.startswith("sampler/") and k in selection.metrics} \
            == selection.metrics
        assert metrics["sampler/padding_samples"] == 0.0
        assert metrics["sampler/filler_rows"] == G * (len(PROMPTS) - len(kept))
        if step == 1 and not colocated:
            rounds = [Counter(c) for c in manager.calls[start:]]
            kept_rows = {p: sum(r is not None for r in got[p]) for p in PROMPTS if any(got[p])}
            TABLE.append(table_row(case, "verl", rounds, kept_rows, max(diff.values())))
        figures[f"step {step}"] = {str(p): {
            "samples_per_round": [c.count(p) for c in calls], "samples": sum(c.count(p) for c in calls),
            "rows_kept": kept.get(p, []), "max_abs_adv_diff": diff.get(p)} for p in PROMPTS}
    assert rollouts.monitor.step == 2
    if not colocated:
        FIGURES[case] = figures
        write_figures()


def test_reinforce_ada_rounds_and_the_pool_baseline_hand_computed():
    # balance, round_size 4, G 4: prompt 0 exits after round 1, 1 after 2, 5 after 3, 2 after 4; 3 and 4 run
    # all 4 rounds (unresolved, kept). Rounds: 6, 5, 4 and 3 prompts of 4 samples = 72 samples
    trainer = stand_in_trainer(config(*CASES["reinforce_ada_balance"][:3]), ScriptedManager())
    verl_sampling.install(trainer)
    out, batch = fit_step(trainer, 1)
    assert [sorted(set(c)) for c in trainer.async_rollout_manager.calls] == [[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5],
                                                                             [2, 3, 4, 5], [2, 3, 4]]
    metrics = verl_sampling.pending_metrics()
    assert metrics["sampler/rounds"] == 4 and metrics["sampler/samples_generated"] == 72
    # prompt 1: its pool is 8 samples with 2 correct (k 5, 6), mean 0.25; its balanced group is 2 correct and
    # 2 wrong. Pool baseline: 1 - 0.25 = 0.75 and 0 - 0.25 = -0.25 (the group's own mean would give +-0.5)
    rows = [i for i, info in enumerate(batch.non_tensor_batch["extra_info"]) if info["index"] == 1]
    first_token = batch.batch["advantages"][rows, 0]
    assert sorted(first_token.tolist()) == pytest.approx([-0.25, -0.25, 0.75, 0.75], abs=1e-7)
    assert set(batch.non_tensor_batch["grposcope_pool_mean"][rows]) == {0.25}
    assert set(batch.non_tensor_batch["grposcope_pool_count"][rows]) == {8.0}
    # the ACR before the sampler: each prompt's first 4 samples; collapsed: 1 (all wrong), 2, 3, 4 (all
    # correct) -> 4/6, of which 1/6 all-correct
    assert metrics["collapse/acr"] == pytest.approx(4 / 6)
    assert metrics["collapse/acr_all_correct"] == pytest.approx(1 / 6)


def test_filler_rows_take_no_part_in_verls_loss():
    trainer = stand_in_trainer(config(*CASES["budgeted"][:3]), ScriptedManager())
    verl_sampling.install(trainer)
    _, batch = fit_step(trainer, 1)
    filler = torch.as_tensor(batch.non_tensor_batch[verl_sampling.FILLER].astype(bool))
    assert 0 < int(filler.sum()) < len(batch)  # budgeted dropped or left undrawn some prompts
    b = batch.batch
    assert not b["response_mask"][filler].any() and not b["rm_scores"][filler].any()
    assert not b["advantages"][filler].any()
    assert (b["attention_mask"][filler].sum(dim=1) == 1).all()  # one padding token: the forward pass stays valid
    assert (b["input_ids"][filler] == 0).all()
    assert all(v is None for v in batch.non_tensor_batch["scripted_sample"][filler.numpy()])
    assert np.isnan(batch.non_tensor_batch["grposcope_pool_mean"][filler.numpy()].astype(float)).all()
    loss = torch.randn(b["response_mask"].shape, generator=torch.Generator().manual_seed(0))  # (N, T)
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum"):
        with_filler = agg_loss(loss, b["response_mask"], mode)
        without = agg_loss(loss[~filler], b["response_mask"][~filler], mode)
        torch.testing.assert_close(with_filler, without, atol=1e-6, rtol=0)  # float32 sums in another order


def test_padding_rows_make_each_round_divide_and_are_discarded():
    manager = ScriptedManager(workers=3)  # rounds of 24, 20, 16, 12 rows: 20 and 16 need 1 and 2 padding rows
    trainer = stand_in_trainer(config(*CASES["reinforce_ada_balance"][:3], workers=3), manager)
    verl_sampling.install(trainer)
    out, _ = fit_step(trainer, 1)
    assert [len(c) for c in manager.calls] == [24, 21, 18, 12]
    assert verl_sampling.pending_metrics()["sampler/padding_samples"] == 3.0
    # a padding row repeats the round's first rows: the 21st row of round 2 is prompt 1's 5th sample request
    assert manager.calls[1][20] == manager.calls[1][0]
    kept = [s for s in out.non_tensor_batch["scripted_sample"] if s is not None]
    assert len(kept) == len(set(kept)) == G * len(PROMPTS)  # unresolved prompts are kept: no filler


def test_metrics_reach_verls_logger(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    sampler, options = "budgeted", {"sample_budget": 16}
    trainer = stand_in_trainer(config(sampler, options, "avspo"), ScriptedManager())
    verl_sampling.install(trainer)
    tracking = Tracking(project_name="p", experiment_name="e", default_backend=["file"])
    tracking.log(data={"val/score": 1.0}, step=0)  # before any step: nothing of grposcope's
    reference, avspo = Reference(sampler, options, "grpo"), ESTIMATORS.make("avspo")
    for step in (1, 2):
        fit_step(trainer, step)
        selection = reference.step()[0]
        expected_avspo = avspo(selection.rewards, as_drawn=selection.as_drawn).metrics
        tracking.log(data={"actor/entropy": 0.7, "training/global_step": step}, step=step)
    tracking.finish()
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert list(lines[0]["data"]) == ["val/score"]
    logged = lines[2]["data"]
    assert logged["actor/entropy"] == 0.7  # verl's own keys stay
    for key in ("collapse/acr", "collapse/acr_ema", "collapse/acr_cumulative", "collapse/acr_100",
                "collapse/volatility", "alarm/stagnation", "sampler/rounds", "sampler/samples_generated",
                "sampler/filler_rows", "collapse/acr_post", "avspo/tau", "avspo/signal"):
        assert key in logged, key
    assert "alarm/entropy_collapse" not in logged  # not measured here
    # the ACR of the groups as first drawn (every group budgeted drew), not of the groups that trained
    drawn = torch.cat([d.rewards for d in selection.draws])
    assert logged["collapse/acr"] == pytest.approx(float((drawn == drawn[:, :1]).all(dim=1).float().mean()))
    # AVSPO read the sampler's as_drawn: its signal is the reference AVSPO's, fed the same
    assert logged["avspo/signal"] == pytest.approx(expected_avspo["avspo/signal"])
    assert logged["sampler/rounds"] == len(selection.draws)


def test_the_fixed_sampler_is_verls_own_draw_with_grposcopes_metrics(tmp_path, monkeypatch):
    """`+algorithm.grposcope.sampler=fixed` beside verl's own grpo: one call of the manager on fit's batch as
    fit hands it over, the same rows back, and the monitor's metrics in verl's logged dict."""
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    wrapped, stock = ScriptedManager(), ScriptedManager()
    trainer = stand_in_trainer(config("fixed", {}, "grpo"), wrapped)
    verl_sampling.install(trainer)
    tracking = Tracking(project_name="p", experiment_name="e", default_backend=["file"])
    out, batch = fit_step(trainer, 1)
    plain, _ = fit_step(stand_in_trainer(config("fixed", {}, "grpo"), stock), 1)
    assert wrapped.calls == stock.calls and len(wrapped.calls) == 1  # one call, the same rows in the same order
    assert list(out.non_tensor_batch["scripted_sample"]) == list(plain.non_tensor_batch["scripted_sample"])
    assert not out.non_tensor_batch[verl_sampling.FILLER].any()
    tracking.log(data={"actor/entropy": 0.7}, step=1)
    tracking.finish()
    logged = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])["data"]
    assert logged["collapse/acr"] == pytest.approx(4 / 6)  # prompts 1-4 collapse in their first 4 samples
    for key in ("collapse/acr_ema", "collapse/acr_cumulative", "collapse/acr_100", "collapse/volatility",
                "alarm/stagnation", "sampler/rounds"):
        assert key in logged, key
    assert logged["sampler/rounds"] == 1 and logged["sampler/samples_generated"] == G * len(PROMPTS)


class StandInLoader:
    """The trainer's StatefulDataLoader, as _save_checkpoint and _load_checkpoint use it."""

    def __len__(self) -> int:
        return 100

    def state_dict(self) -> dict:
        return {"seen": 1}

    def load_state_dict(self, state: dict) -> None:
        assert state == {"seen": 1}


def legacy_trainer(cfg, manager: ScriptedManager) -> RayPPOTrainer:
    """A real RayPPOTrainer, its constructor not run: the workers and the dataloader stood in."""
    trainer = RayPPOTrainer.__new__(RayPPOTrainer)
    workers = SimpleNamespace(save_checkpoint=lambda *a, **k: None, load_checkpoint=lambda *a, **k: None)
    trainer.__dict__.update(config=cfg, async_rollout_manager=manager, tokenizer=SimpleNamespace(pad_token_id=0),
                            total_training_steps=20, use_critic=False, global_steps=0, actor_rollout_wg=workers,
                            train_dataloader=StandInLoader())
    verl_sampling.install(trainer)
    return trainer


def test_the_sampler_state_survives_the_legacy_trainers_checkpoint(tmp_path):
    cfg = config("budgeted", {"sample_budget": 12}, "grposcope_grpo", folder=str(tmp_path))
    assert getattr(RayPPOTrainer._save_checkpoint, "_grposcope", False)  # patched when this module imported verl
    first = legacy_trainer(cfg, ScriptedManager())
    fit_step(first, 1)
    first.global_steps = 1
    first._save_checkpoint()  # verl's, then grposcope's state file
    saved = torch.load(tmp_path / "global_step_1" / plugin.STATE_FILE, weights_only=True)
    assert set(saved) == {"grposcope_grpo", plugin.SAMPLER_STATE}  # the estimators' too (AVSPO's, were it chosen)
    assert saved[plugin.SAMPLER_STATE]["state"]["step"] == 1  # budgeted's beliefs after one step
    continued, _ = fit_step(first, 2)

    plugin.reset()  # a new TaskRunner
    resumed_trainer = legacy_trainer(cfg, ScriptedManager())
    resumed_trainer._load_checkpoint()  # verl's, then grposcope's state file
    assert resumed_trainer.global_steps == 1
    resumed, _ = fit_step(resumed_trainer, 2)
    assert rows_by_prompt(resumed) == rows_by_prompt(continued)
    assert resumed_trainer.async_rollout_manager.manager.calls == first.async_rollout_manager.manager.calls[-len(
        resumed_trainer.async_rollout_manager.manager.calls):]
    assert resumed_trainer.async_rollout_manager.monitor.step == 2

    plugin.reset()  # without the state: step 2 is drawn as a first step would be, and differs
    fresh, _ = fit_step(legacy_trainer(cfg, ScriptedManager()), 2)
    assert rows_by_prompt(fresh) != rows_by_prompt(continued)


def test_init_workers_puts_the_sampler_around_the_manager_it_built(monkeypatch):
    from grposcope.integrations import verl_skip

    monkeypatch.setenv(verl_skip.ENV, "unset")  # restored (to what it was) after the test
    monkeypatch.delenv(verl_skip.ENV)

    class Trainer:
        def __init__(self, cfg):
            self.config, self.tokenizer, self.total_training_steps = cfg, SimpleNamespace(pad_token_id=0), 10

        def init_workers(self):
            self.skip_for_workers = os.environ.get(verl_skip.ENV)  # what the workers built here would get
            self.async_rollout_manager = ScriptedManager()

        def _save_checkpoint(self):
            pass

        def _load_checkpoint(self):
            pass

    plugin.patch_legacy_trainer(SimpleNamespace(RayPPOTrainer=Trainer))
    with_sampler = Trainer(config(*CASES["reinforce_ada_pos"][:3]))
    with_sampler.init_workers()
    assert isinstance(with_sampler.async_rollout_manager, verl_sampling.SampledRollouts)
    assert with_sampler.async_rollout_manager.agent_loop_workers  # everything else is the manager's
    assert with_sampler.skip_for_workers == "1"  # a run that uses grposcope: the skip on, set before the workers
    without = Trainer(OmegaConf.create({"algorithm": {"adv_estimator": "grpo"}}))
    without.init_workers()
    assert isinstance(without.async_rollout_manager, ScriptedManager)


def test_validation_passes_through_untouched():
    manager = ScriptedManager()
    rollouts = verl_sampling.install(stand_in_trainer(config(*CASES["budgeted"][:3]), manager))
    rows = [{"raw_prompt": [{"content": f"question {p}"}], "uid": f"u{p}"} for p in (1, 1, 2, 2)]
    out = rollouts.generate_sequences(DataProto.from_single_dict(collate_fn(rows), meta_info={"validate": True}))
    assert manager.calls == [[1, 1, 2, 2]] and verl_sampling.FILLER not in out.non_tensor_batch


def test_pairings_and_options_that_cannot_work_fail_before_the_first_step():
    with pytest.raises(ValueError, match="grposcope_pool beside algorithm.grposcope.sampler=budgeted"):
        verl_sampling.install(stand_in_trainer(config("budgeted", {}, "grposcope_pool"), ScriptedManager()))
    with pytest.raises(ValueError, match="exit_rul is not an option of sampler 'reinforce_ada'"):
        verl_sampling.install(stand_in_trainer(config("reinforce_ada", {"exit_rul": "pos"}, "grposcope_pool"),
                                               ScriptedManager()))
    with pytest.raises(ValueError, match="sampler=dynamic does not run in verl; there use one of fixed, "
                                         "reinforce_ada, budgeted .DAPO's dynamic sampling is verl's own"):
        verl_sampling.install(stand_in_trainer(config("dynamic", {}, "grpo"), ScriptedManager()))
    with pytest.warns(UserWarning, match="ignores it"):  # a pool drawn for nothing
        verl_sampling.install(stand_in_trainer(config("reinforce_ada", {}, "grposcope_grpo"), ScriptedManager()))
    # the sampler's options are not the estimator's unknown options
    assert plugin.estimator_params("grposcope_pool", config("reinforce_ada", RA, "grposcope_pool").algorithm)[0] == {}
    # a configured sampler whose step was not recorded in this process: the estimator refuses
    data = DataProto.from_dict(tensors={"token_level_rewards": torch.ones(2, 3), "response_mask": torch.ones(2, 3)},
                               non_tensors={"uid": np.array(["a", "a"], dtype=object)})
    with pytest.raises(ValueError, match="not drawn by grposcope's sampler in this process"):
        compute_advantage(data, adv_estimator="grposcope_pool", config=config("reinforce_ada", RA,
                                                                              "grposcope_pool").algorithm)


def test_verl_importing_its_legacy_trainer_patches_it():
    code = ("import sys, verl\n"
            "print('verl_sampling' in str(list(sys.modules)), 'ray_trainer' in str(list(sys.modules)))\n"
            "from verl.trainer.ppo.ray_trainer import RayPPOTrainer as T\n"
            "print(all(getattr(getattr(T, m), '_grposcope', False) for m in "
            "('init_workers', '_save_checkpoint', '_load_checkpoint')))\n")
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none",
           "VERL_USE_EXTERNAL_MODULES": "grposcope.integrations.verl"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # nothing heavy at `import verl`: the trainer's module is patched when verl itself imports it
    assert result.stdout.split("\n")[-3:-1] == ["False False", "True"]


def test_the_example_scripts_overrides_compose_with_verls_config():
    import shlex
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    script = (Path(__file__).parents[2] / "examples" / "verl" / "reinforce_ada_balance.sh").read_text()
    command = script.split("-m verl.trainer.main_ppo", 1)[1].split('"$@"', 1)[0]
    command = command.replace('"$model"', "m").replace('"$train"', "t.parquet").replace('"$val"', "v.parquet")
    config_dir = os.path.join(os.path.dirname(sys.modules["verl"].__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=shlex.split(command.replace("\\\n", " ")))
    assert cfg.trainer.use_v1 is True and cfg.actor_rollout_ref.rollout.n == 4  # verl's default trainer
    assert verl_sampling.sampler_options(cfg.algorithm) == (
        "reinforce_ada", {"exit_rule": "balance", "round_size": 8, "max_rounds": 4, "success_threshold": 0.5})
    assert plugin.estimator_params("grposcope_pool", cfg.algorithm) == ({}, 0.5)  # pool_std: the default, off
    rollouts = verl_sampling.install(stand_in_trainer(cfg, ScriptedManager(workers=8)))
    sampler = rollouts.sampler
    assert (sampler.exit_rule, sampler.round_size, sampler.max_rounds, rollouts.g, rollouts.divisor) == \
        ("balance", 8, 4, 4, 8)
