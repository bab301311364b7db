"""grposcope inside verl 0.9.1's v1 trainer (trainer.use_v1=true, verl's default), on the CPU, with a real Ray and
TransferQueue.

verl's fit cannot run here: its agent loop generates only through an LLM server replica (vLLM, SGLang or
TensorRT-LLM, verl/workers/rollout/replica.py), none of which runs on this CPU, and its actor needs GPU workers.
So these tests build verl's real v1 trainer (`get_trainer_cls("sync")(config)`, from a config composed by verl's
Hydra files, its constructor run: the patched `_build_replay_buffer` builds grposcope's buffer), start a real
local Ray and TransferQueue, and call the trainer's real `step()`: `prepare_step`, the patched
`_add_batch_to_generate`, `_next_train_batch`, `_submit_batch_to_rollout`, `_step_once`, `_balance_batch` with
verl's padding rows, and the patched `_compute_advantage` with the registered estimators, all verl's code.

Stood in: the agent loop (`ScriptedLoop` writes each session's output into TransferQueue under verl's key format
`{uid}_{session}_{index}` with the fields and tags verl's AgentLoopWorkerTQ writes, `rm_scores` on the last
response token, and marks the prompt finished, from a thread, as the real workers do while the trainer polls),
the dataloader (a list of collated batches), the actor worker group's dispatch table, the replicas' sleep and
weight sync (`checkpoint_manager`), and the worker calls
(`_compute_old_log_prob`, `_update_actor`, which here reads the advantages verl wrote). The scripted reward is
tests/equal_numbers_cases.py's: a function of the prompt and of the sample's index among its draws this step.
Runs in .venv-verl (scripts/test_verl.sh).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl.trainer.ppo.core_algos", reason="needs verl 0.9.1: bash scripts/test_verl.sh")
pytest.importorskip("transfer_queue", reason="needs TransferQueue (verl's v1 trainer): bash scripts/test_verl.sh")

import numpy as np  # noqa: E402
import ray  # noqa: E402
import transfer_queue as tq  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402

from grposcope.core.advantages import ESTIMATORS  # noqa: E402
from grposcope.integrations import verl as plugin  # noqa: E402
from grposcope.integrations import verl_skip  # noqa: E402
from grposcope.sampling import SAMPLERS, ScoredDraw  # noqa: E402

from equal_numbers_cases import CASES, G, PROMPTS, scripted_reward  # noqa: E402  isort: skip

R = 8  # response width


def scripted_length(p: int, k: int) -> int:
    return 1 + (3 * p + 5 * k) % R


@pytest.fixture(scope="module")
def transfer_queue():
    """A local Ray (logical CPUs above the machine's: TransferQueue's controller and storage units each hold
    one) and TransferQueue's controller and storage, as verl's TaskRunner starts them."""
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    tq.init()
    yield
    tq.close()
    ray.shutdown()


@pytest.fixture(autouse=True)
def fresh():
    plugin.reset()
    yield
    plugin.reset()


class ScriptedLoop:
    """verl's AgentLoopManagerTQ, stood in for (module docstring): `generate_sequences` returns at once and a
    thread writes the outputs, as the real workers do while the replay buffer polls."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []  # the prompt of each session of each call
        self.drawn: Counter = Counter()
        self.step = None
        self.threads: list[threading.Thread] = []

    def generate_sequences(self, batch) -> None:
        step = tu.get(batch, "global_steps")
        if step != self.step:
            self.step, self.drawn = step, Counter()
        rows = []
        for i, (uid, raw) in enumerate(zip(tu.get(batch, "uid"), tu.get(batch, "raw_prompt"))):
            n = tu.get(batch, "__rollout_n__")[i] if "__rollout_n__" in batch.keys() else G
            p = int(raw[0]["content"].split()[-1])
            rows.append((uid, p, [self.drawn[p] + j for j in range(n)], tu.get(batch, "extra_info")[i]))
            self.drawn[p] += n
        self.calls.append([p for _, p, ks, _ in rows for _ in ks])
        thread = threading.Thread(target=self._write, args=(rows, step))
        thread.start()
        self.threads.append(thread)

    def _write(self, rows, step) -> None:
        for uid, p, ks, info in rows:
            tq.kv_put(key=uid, partition_id="train", tag={"status": "running"})
            keys, fields, tags = [], [], []
            for j, k in enumerate(ks):
                length, prompt = scripted_length(p, k), torch.full((2 + p % 3,), 10 + p)
                response = torch.full((length,), 50 + k)
                scores = torch.zeros(length)
                scores[-1] = scripted_reward(p, k)
                input_ids = torch.cat([prompt, response])
                keys.append(f"{uid}_{j}_0")
                fields.append({"prompts": prompt, "responses": response, "rm_scores": scores, "uid": uid,
                               "response_mask": torch.ones(length, dtype=torch.int64), "input_ids": input_ids,
                               "attention_mask": torch.ones_like(input_ids),
                               "position_ids": torch.arange(len(input_ids)), "extra_info": info,
                               "scripted_sample": f"{p}:{k}", "global_steps": step})
                tags.append({"status": "success", "prompt_len": len(prompt), "response_len": length,
                             "seq_len": len(input_ids), "global_steps": step})
            tq.kv_batch_put(keys=keys, fields=tu.list_of_dict_to_tensordict(fields), tags=tags, partition_id="train")
            tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})


class Loader:
    """The trainer's dataloader: the same collated batch of PROMPTS each step (RLHFDataset's fields)."""

    def __iter__(self):
        while True:
            yield {"raw_prompt": np.array([[{"role": "user", "content": f"question {p}"}] for p in PROMPTS],
                                          dtype=object),
                   "data_source": np.array(["scripted"] * len(PROMPTS), dtype=object),
                   "extra_info": np.array([{"index": p} for p in PROMPTS], dtype=object),
                   "index": np.array(PROMPTS)}

    def __len__(self) -> int:
        return 100

    def state_dict(self) -> dict:  # StatefulDataLoader's, as _save_checkpoint and _load_checkpoint use it
        return {"seen": 1}

    def load_state_dict(self, state: dict) -> None:
        assert state == {"seen": 1}


def compose(overrides: list[str]):
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose("ppo_trainer", overrides=overrides)


def v1_config(estimator: str, section: dict, *extra: str):
    overrides = [f"algorithm.adv_estimator={estimator}", "trainer.use_v1=true", "trainer.v1.trainer_mode=sync",
                 f"actor_rollout_ref.rollout.n={G}", f"data.train_batch_size={len(PROMPTS)}",
                 "actor_rollout_ref.actor.ppo_mini_batch_size=2", *extra]
    overrides += [f"+algorithm.grposcope.{k}={v}" for k, v in section.items()]
    return compose(overrides)


def v1_trainer(config):
    """verl's real sync v1 trainer, its constructor run; what needs GPUs, a model or a rollout server stood in."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    trainer = get_trainer_cls("sync")(config=config)
    trained: list[dict] = []

    def update_actor(batch, metrics):  # the actor worker: here it reads what it would train on
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["advantages", "scripted_sample", "uid", "response_mask"])
        trained.append({"keys": list(batch.keys), "tags": list(batch.tags), "data": data})
        return batch

    trainer.__dict__.update(
        agent_loop_manager=ScriptedLoop(), train_dataloader=Loader(), train_dataloader_it=None, global_steps=1,
        reward_loop_manager=SimpleNamespace(reward_loop_worker_handles=[object()]),
        actor_rollout_wg=SimpleNamespace(_dispatch_info={"actor": [0]}),
        checkpoint_manager=SimpleNamespace(sleep_replicas=lambda: None, update_weights=lambda step: None),
        tokenizer=SimpleNamespace(eos_token_id=2, pad_token_id=0), curr_step_profile=False,
        _compute_old_log_prob=lambda batch, metrics: batch, _update_actor=update_actor, trained=trained)
    trainer.replay_buffer.poll_interval = 0.02
    return trainer


def run_step(trainer, step: int) -> dict:
    """verl's fit loop's body for one step, as far as it runs here: step(), then the queue cleared."""
    trainer.global_steps = step
    metrics: dict = {}
    batch = trainer.step(metrics, {})
    for thread in trainer.agent_loop_manager.threads:
        thread.join()
    tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
    return metrics


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
        kept = {p: sorted(log[s] for s in row) for p, row in zip(selection.prompts, selection.samples.tolist())}
        advantage = {log[s]: a for row, values in zip(selection.samples.tolist(), adv.tolist())
                     for s, a in zip(row, values)}
        return selection, calls, kept, advantage


def trained_rows(record: dict) -> tuple[dict[int, list[str]], dict[str, float], int]:
    """What the actor got: the kept samples per prompt, each sample's advantage on its first token, and the
    count of verl's padding rows."""
    data, kept, adv, padding = record["data"], {}, {}, 0
    for i, tag in enumerate(record["tags"]):
        if tag.get("is_padding", False):
            padding += 1
            continue
        sample = data["scripted_sample"][i]
        kept.setdefault(int(sample.split(":")[0]), []).append(sample)
        adv[sample] = float(data["advantages"][i][0])
    return {p: sorted(s) for p, s in kept.items()}, adv, padding


@pytest.mark.parametrize("case", list(CASES))
def test_the_v1_trainer_trains_what_the_sampler_decides(transfer_queue, case):
    sampler, options, estimator = CASES[case]
    trainer = v1_trainer(v1_config(f"grposcope_{estimator}" if estimator != "grpo" else "grposcope_grpo",
                                   {"sampler": sampler, **options}))
    reference = Reference(sampler, options, estimator)
    for step in (1, 2):  # the second step of budgeted ranks by what the first taught
        start = len(trainer.agent_loop_manager.calls)
        metrics = run_step(trainer, step)
        selection, calls, kept, advantage = reference.step()
        # the same samples per prompt per round
        assert [Counter(c) for c in trainer.agent_loop_manager.calls[start:]] == [Counter(c) for c in calls]
        got, adv, padding = trained_rows(trainer.trained[-1])
        assert got == kept  # the kept samples of each prompt, from every round, and nothing else
        assert max(abs(adv[s] - advantage[s]) for s in advantage) <= 1e-6
        assert (sum(len(v) for v in got.values()) + padding) % (2 * G) == 0  # verl padded to its mini-batch
        assert {k: v for k, v in metrics.items() if k in selection.metrics} == pytest.approx(selection.metrics)
        assert metrics["sampler/rounds"] == len(calls) and "collapse/acr" in metrics
        # nothing of the step is left in the queue: the rounds' prompts, the outputs not kept
        assert not (tq.kv_list("train") or {}).get("train")
    assert trainer.replay_buffer.monitor.step == 2


def test_avspo_and_the_estimators_metrics_reach_verls_step_metrics_without_a_sampler(transfer_queue):
    # verl's own draw (no sampler, no custom buffer): prepare_step submits, verl's ReplayBuffer samples
    trainer = v1_trainer(v1_config("avspo", {"virtual_sample_alpha": 0.5}))
    metrics = run_step(trainer, 1)
    assert {"avspo/tau", "avspo/signal", "collapse/acr", "collapse/acr_post"} <= set(metrics)
    # first 4 draws (tests/equal_numbers_cases.py): 1, 2 and 3 all wrong, 4 all correct; 0 and 5 mixed
    assert metrics["collapse/acr"] == pytest.approx(4 / 6)


def test_the_sampler_state_survives_the_v1_trainers_checkpoint(transfer_queue, tmp_path):
    def trainer_in(folder):
        config = v1_config("grposcope_grpo", {"sampler": "budgeted", "sample_budget": 12},
                           f"trainer.default_local_dir={folder}")
        trainer = v1_trainer(config)
        stand_in = SimpleNamespace(save_checkpoint=lambda *a, **k: None, load_checkpoint=lambda *a, **k: None)
        trainer.__dict__.update(actor_rollout_wg=SimpleNamespace(_dispatch_info={"actor": [0]}, **vars(stand_in)),
                                use_critic=False)
        return trainer

    first = trainer_in(tmp_path)
    run_step(first, 1)
    first._save_checkpoint()
    assert (tmp_path / "global_step_1" / plugin.STATE_FILE).exists()
    state = first.replay_buffer.sampler.state_dict()
    plugin.reset()
    second = trainer_in(tmp_path)
    assert repr(second.replay_buffer.sampler.state_dict()) != repr(state)  # the first step taught it something
    second._load_checkpoint()
    assert second.global_steps == 1
    assert repr(second.replay_buffer.sampler.state_dict()) == repr(state)


def test_setups_the_v1_sampler_cannot_serve_fail_before_the_first_step():
    from verl.trainer.ppo.v1 import get_trainer_cls

    section = {"sampler": "reinforce_ada", **CASES["reinforce_ada_balance"][1]}
    with pytest.raises(ValueError, match="needs trainer.v1.trainer_mode=sync"):
        get_trainer_cls("colocate_async")(config=v1_config("grposcope_pool", section,
                                                           "trainer.v1.trainer_mode=colocate_async"))
    with pytest.raises(ValueError, match="both choose which groups train"):
        get_trainer_cls("sync")(config=v1_config("grposcope_pool", section, "algorithm.filter_groups.enable=true",
                                                 "algorithm.filter_groups.metric=acc"))
    with pytest.raises(ValueError, match="both replace verl's replay buffer"):
        get_trainer_cls("sync")(config=v1_config(
            "grposcope_pool", section, "trainer.v1.sampler.custom_sampler.path=pkg://grposcope.integrations."
            "verl_metrics", "trainer.v1.sampler.custom_sampler.name=GrposcopeReplayBuffer"))
    with pytest.raises(ValueError, match="enable_resource_pool=True"):
        get_trainer_cls("sync")(config=v1_config("grposcope_pool", section, "reward.reward_model.enable=true"))


@pytest.mark.parametrize("section, expected", [
    ({}, None),  # verl's own grpo, no grposcope key: stock verl decides (the variable, if the launcher set it)
    ({"virtual_sample_alpha": 0.5}, True),  # a grposcope estimator: on, as in grposcope's trainer and TRL
    ({"skip_no_signal_steps": False, "virtual_sample_alpha": 0.5}, False),
    ({"skip_no_signal_steps": True}, True),
])
def test_the_skip_is_a_config_key_with_a_default_that_leaves_stock_runs_alone(section, expected):
    estimator = "avspo" if "virtual_sample_alpha" in section else "grpo"
    assert plugin.skip_setting(v1_config(estimator, section)) is expected


def test_the_skip_setting_reaches_each_worker_groups_environment(monkeypatch):
    from verl.single_controller.ray.base import RayWorkerGroup

    monkeypatch.setenv(verl_skip.ENV, "unset")  # restored (to absent) after the test, like __init__ below
    monkeypatch.delenv(verl_skip.ENV)
    seen = {}
    monkeypatch.setattr(RayWorkerGroup, "__init__", lambda self, *a, **k: seen.update(k))
    plugin.forward_skip(v1_config("avspo", {"skip_no_signal_steps": True}))
    RayWorkerGroup(None, None, device_name="cpu", worker_env={"OTHER": "x"})
    assert seen["worker_env"] == {"OTHER": "x", verl_skip.ENV: "1"} and os.environ[verl_skip.ENV] == "1"
    plugin.forward_skip(v1_config("avspo", {"skip_no_signal_steps": False}))
    RayWorkerGroup(None, None, device_name="cpu")
    assert seen["worker_env"] == {verl_skip.ENV: "0"}


def test_verl_importing_its_v1_trainer_patches_it():
    import subprocess
    import sys

    code = ("import sys, verl\n"
            "print('verl_v1' in str(list(sys.modules)))\n"
            "from verl.trainer.ppo.v1.trainer_base import PPOTrainer as T\n"
            "print(all(getattr(getattr(T, m), '_grposcope', False) for m in ('_build_replay_buffer', "
            "'_add_batch_to_generate', '_compute_advantage', '_save_checkpoint', '_load_checkpoint', 'init')))\n")
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none",
           "VERL_USE_EXTERNAL_MODULES": "grposcope.integrations.verl"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[-3:-1] == ["False", "True"]
