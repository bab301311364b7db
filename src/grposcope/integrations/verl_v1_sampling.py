"""grposcope's adaptive samplers inside verl 0.9.1's v1 trainer (`trainer.use_v1=true`, verl's default).

The same key as in the legacy trainer turns one on, with the same options:

    +algorithm.grposcope.sampler=reinforce_ada  +algorithm.grposcope.exit_rule=balance
    +algorithm.grposcope.round_size=8  +algorithm.grposcope.max_rounds=4  algorithm.adv_estimator=grposcope_pool

How verl's v1 trainer draws (v1/trainer_base.py, agent_loop_tq.py, replay_buffer.py): each step `prepare_step`
submits the dataloader's B prompts to the agent loop, which runs `rollout.n` sessions of each (or the prompt's
own `__rollout_n__`) and writes every output into TransferQueue under the key `{uid}_{session}_{index}`, with
the prompt's status under `{uid}`; then the replay buffer's `sample()` waits until enough prompts are finished
and hands the trainer their trajectories' keys. verl's own DAPO filter lives there too: it evicts the groups
whose reward has no spread and refills with new prompts from the dataloader. A grposcope sampler needs more
than eviction: Reinforce-Ada draws more completions of the *same* prompt until it resolves, the budgeted
sampler decides per prompt how many to draw. So, when `algorithm.grposcope.sampler` is set
(grposcope.integrations.verl_v1 wraps the trainer's methods):

1. `_add_batch_to_generate` hands the dataloader's batch to `SampledReplayBuffer` instead of the agent loop.
2. `sample()` runs the sampler on those prompts. Each `draw(prompts, k)` submits the prompts again, each under a
   fresh uid and with `__rollout_n__ = k`, through the trainer's own `_submit_batch_to_rollout` (one dispatch
   over the agent-loop workers), waits until TransferQueue marks every one finished, and reads each session's
   reward (the sum of its final output's `rm_scores`, written by verl's reward loop during generation) and
   length (its tag's `response_len`). Sample j of prompt a in a round is session j of that round's uid.
3. The kept samples' trajectories are the batch: their `uid` field is rewritten to the prompt's own uid, so
   that every advantage estimator, verl's `grpo` included, groups a prompt's kept samples from all its rounds
   as one group; the rest of the step's trajectories and the rounds' prompt entries are cleared. A prompt the
   sampler did not keep simply has no rows: verl's v1 trainer pads a batch of any size to its mini-batch
   multiple itself (`upsample_batch_to_divisible_size`), so no filler rows are needed, unlike the legacy
   trainer. A step where the sampler keeps no prompt at all trains on the first drawn prompt's first round,
   marked as filler (advantage 0 in grposcope's estimators; `sampler/filler_rows`): verl cannot run an empty
   batch, and a step without signal is then skipped by the no-signal skip.
4. The pools and the groups as first drawn are recorded in this process (verl_sampling.SamplerStep), where
   `_compute_advantage` calls the estimator; the metrics (`sampler/*`, the collapse monitor's, fed the groups
   as first drawn) are `sample()`'s, which verl merges into the step's.

Limits: `trainer.v1.trainer_mode=sync` only (in the async modes generation runs ahead of the trainer, so a
later round would draw from a policy the step does not train on); the reward must be known at sampling time
(rule-based, or a reward model on its own resource pool), as for verl's own filter; not beside
`algorithm.filter_groups` or a custom sampler. The dataloader fixes each step's candidates, so `more()` finds
no further prompts (`budget_candidates` changes nothing), as in the legacy trainer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from typing import Any

import torch

from ..core.diagnostics import CollapseMonitor, alarm_window
from ..sampling import Sampler, ScoredDraw, Selection
from . import verl_run as _checked  # noqa: F401  first: it checks verl's version
from .verl_groups import monitored
from .verl_sampling import SamplerState, SamplerStep, prompt_key, prompt_pools, record

# isort: split
import transfer_queue as tq  # verl's v1 trainer needs it too (verl's "verl-core" extra)
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils import tensordict_utils as tu

logger = logging.getLogger("grposcope")
PARTITION = "train"
TERMINAL = ("finished", "failure")


def split_key(key: str) -> tuple[str, int, int]:
    """verl's v1 trajectory key `{uid}_{session}_{index}` -> (uid, session, index)."""
    uid, session, index = key.rsplit("_", 2)
    return uid, int(session), int(index)


def row_fields(batch: TensorDict, b: int) -> dict[str, Any]:
    """Row b's dataset fields that identify a prompt (verl_sampling.prompt_key reads them)."""
    keys = ("raw_prompt", "data_source", "index", "extra_info")
    return {k: tu.get(batch, k)[b] for k in keys if k in batch.keys()}


class Rounds:
    """One sample() call's draws: each a submission of the prompts under fresh uids, waited for and scored."""

    def __init__(self, buffer: SampledReplayBuffer, base: TensorDict) -> None:
        self.buffer, self.base = buffer, base  # base: one row per prompt, as the dataloader gave them
        self.round_uids: list[str] = []  # every uid submitted, in order
        self.sessions: list[tuple[str, int]] = []  # sample number -> (round uid, session)
        self.keys: dict[tuple[str, int], list[str]] = {}  # (round uid, session) -> its outputs' keys, in order
        self.tags: dict[str, dict] = {}  # trajectory key -> its TransferQueue tag

    def draw(self, prompts: list[dict[str, Any]], k: int) -> ScoredDraw:
        """k completions of each prompt, in one dispatch.  -> rewards, lengths (A, k)"""
        request = tu.index_select_tensor_dict(self.base, [p["row"] for p in prompts])
        uids = [uuid.uuid4().hex for _ in prompts]  # a verl uid is a uuid4; '_' would break the key format
        tu.assign_non_tensor_stack(request, "uid", uids)
        tu.assign_non_tensor_stack(request, "__rollout_n__", [k] * len(prompts))
        self.buffer.trainer._submit_batch_to_rollout(request)
        self.round_uids.extend(uids)
        outputs, tags = self.buffer.wait_for(uids)
        self.tags.update(tags)
        finals = []
        for a, uid in enumerate(uids):
            for j in range(k):
                keys = outputs.get((uid, j))
                if not keys:
                    raise RuntimeError(f"session {j} of prompt {prompts[a]['uid']} (round uid {uid}) left no output in "
                                       "TransferQueue: the agent loop failed or returned nothing (see verl's log "
                                       "above); grposcope's sampler needs the reward of every completion it asks for")
                self.keys[(uid, j)] = keys
                self.sessions.append((uid, j))
                finals.append(keys[-1])  # a session's reward is its final output's (multi-turn agent loops)
        data = tq.kv_batch_get(keys=finals, partition_id=PARTITION, select_fields=["rm_scores"])
        rewards = torch.tensor([float(v.sum()) for v in data["rm_scores"]], dtype=torch.float32)  # (A * k,)
        lengths = torch.tensor([float(sum(self.tags[key]["response_len"] for key in self.keys[s]))
                                for s in self.sessions[-len(finals):]])  # (A * k,) completion tokens
        return ScoredDraw(rewards.view(len(prompts), k), lengths.view(len(prompts), k))

    def outputs_of(self, sample: int) -> list[str]:
        return self.keys[self.sessions[sample]]


class SampledReplayBuffer(SamplerState, ReplayBuffer):
    """verl's sync replay buffer with a grposcope sampler deciding each training batch (module docstring);
    validation is verl's own."""

    def __init__(self, *args: Any, trainer: Any, sampler: Sampler, name: str, g: int,
                 success_threshold: float = 0.5, run_steps: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trainer, self.sampler, self.name, self.g = trainer, sampler, name, g
        window = alarm_window(run_steps)
        self.monitor = CollapseMonitor(success_threshold, stagnation_steps=window, entropy_steps=window)
        self.waiting: TensorDict | None = None  # the step's prompts not yet sampled

    def hand_over(self, batch: TensorDict) -> None:
        """The dataloader's prompts for this step (the wrapped `_add_batch_to_generate`), in place of the agent
        loop: the sampler decides what is generated."""
        self.waiting = batch if self.waiting is None else tu.concat_tensordict([self.waiting, batch])

    def take(self, count: int) -> TensorDict:
        """The next `count` prompts handed over (one parameter_sync_step iteration's share)."""
        if self.waiting is None or len(self.waiting) < count:
            have = 0 if self.waiting is None else len(self.waiting)
            raise RuntimeError(f"grposcope's sampler was asked for {count} prompts and holds {have}: the trainer's "
                               "prepare_step did not hand them over (is grposcope.integrations.verl imported in "
                               "verl's TaskRunner, and trainer.v1.trainer_mode=sync?)")
        batch = self.waiting
        taken = tu.index_select_tensor_dict(batch, list(range(count)))
        rest = len(batch) - count
        self.waiting = tu.index_select_tensor_dict(batch, list(range(count, len(batch)))) if rest else None
        return taken

    def wait_for(self, uids: list[str]) -> tuple[dict[tuple[str, int], list[str]], dict[str, dict]]:
        """Polls TransferQueue until the prompts `uids` are terminal. -> {(uid, session): its outputs' keys, by
        index}, {output key: its tag}"""
        wanted, last_note = set(uids), time.time()
        while True:
            listing = (tq.kv_list(PARTITION) or {}).get(PARTITION, {})
            status = {key: tag.get("status") for key, tag in listing.items() if key in wanted}
            if len(status) == len(wanted) and all(s in TERMINAL for s in status.values()):
                break
            if time.time() - last_note > 60:
                logger.info("grposcope: waiting for %d of %d prompts of the sampling round",
                            sum(s not in TERMINAL for s in status.values()), len(wanted))
                last_note = time.time()
            time.sleep(self.poll_interval)
        outputs: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
        tags = {}
        for key, tag in listing.items():
            if tag.get("is_prompt", False) or key.split("_")[0] not in wanted:
                continue
            uid, session, index = split_key(key)
            outputs[(uid, session)].append((index, key))
            tags[key] = tag
        return {s: [key for _, key in sorted(found)] for s, found in outputs.items()}, tags

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        if partition_id != PARTITION:
            return super().sample(global_steps, partition_id, batch_size)  # validation: verl's own
        base = self.take(batch_size)
        group_uids = [str(u) for u in tu.get(base, "uid")]  # each prompt's own uid: its rows' group
        prompts = [{"prompt_text": prompt_key(row_fields(base, b)), "row": b, "uid": uid}
                   for b, uid in enumerate(group_uids)]
        rounds = Rounds(self, base)
        selection = self.sampler.sample(prompts, rounds.draw, lambda count: [], self.g)
        keys, uids, fillers = self.kept(selection, rounds, group_uids)
        self.relabel(keys, uids)
        kept = set(keys)
        tq.kv_clear(keys=rounds.round_uids + [k for k in rounds.tags if k not in kept], partition_id=PARTITION)
        record(self.step_record(selection, group_uids, fillers))
        assert selection.as_drawn is not None  # Selection.__post_init__ fills it
        metrics = monitored(self.monitor, selection.as_drawn)
        metrics.update(selection.metrics)
        metrics.setdefault("sampler/rounds", float(len(selection.draws)))
        metrics["sampler/filler_rows"] = float(len(keys) if fillers else 0)
        return KVBatchMeta(partition_id=PARTITION, keys=keys, tags=[rounds.tags[k] for k in keys]), metrics

    def kept(self, selection: Selection, rounds: Rounds, group_uids: list[str]) -> tuple[list[str], list[str],
                                                                                           set[str]]:
        """The kept samples' output keys and the uid each gets (its prompt's), and the filler uids: with no
        prompt kept, the first drawn prompt's first round, which must carry no signal."""
        keys, uids = [], []
        for prompt, samples in zip(selection.prompts, selection.samples.tolist()):
            for s in samples:
                outputs = rounds.outputs_of(s)
                keys.extend(outputs)
                uids.extend([prompt["uid"]] * len(outputs))
        if keys:
            return keys, uids, set()
        first = selection.draws[0].rewards.shape[1]  # the first draw's samples of its first prompt
        logger.warning("grposcope: the sampler kept no prompt this step; its first drawn prompt trains as filler "
                       "(no advantage)")
        keys = [key for s in range(first) for key in rounds.outputs_of(s)]
        return keys, [group_uids[0]] * len(keys), {group_uids[0]}

    @staticmethod
    def relabel(keys: list[str], uids: list[str]) -> None:
        """Writes each kept output's prompt uid into its `uid` field, where verl's _compute_advantage reads it."""
        if not keys:
            return
        fields = TensorDict({}, batch_size=[len(keys)])
        tu.assign_non_tensor_stack(fields, "uid", uids)
        tq.kv_batch_put(keys=keys, partition_id=PARTITION, fields=fields)

    @staticmethod
    def step_record(selection: Selection, group_uids: list[str], fillers: set[str]) -> SamplerStep:
        pools = prompt_pools(selection) if selection.prompts else torch.zeros(0, 3, dtype=torch.float64)  # (B', 3)
        by_uid = {p["uid"]: tuple(row) for p, row in zip(selection.prompts, pools.tolist())}
        assert selection.as_drawn is not None  # Selection.__post_init__ fills it
        return SamplerStep(by_uid, fillers, selection.as_drawn)


__all__ = ["Rounds", "SampledReplayBuffer", "split_key"]
