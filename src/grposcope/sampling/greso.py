"""`greso`: GRESO's pre-rollout filter ("Act Only When It Pays: Efficient Reinforcement Learning for LLM
Reasoning via Selective Rollouts", arXiv 2506.02177), on top of DAPO's dynamic sampling.

A prompt whose groups came back zero-variance (all G rewards equal) tends to do so again the next time it is
drawn. GRESO keeps, for each prompt, how many of its most recent groups in a row were zero-variance, and of
which kind: all succeeded ("easy") or all failed ("hard"). Before any completion is generated:
1. Filter. A prompt with a streak of z such groups is skipped with probability 1 - max(p^z, 0.01), where p is
   the exploration probability of its kind (p_easy or p_hard). A prompt without a streak is always drawn.
   Skipped prompts are replaced by the next ones of the data stream until the batch is full again.
2. Dynamic sampling. The survivors are drawn (G each); zero-variance groups are dropped and a further batch is
   filtered and drawn until B informative groups are kept or `max_gen_batches` batches were drawn. A further
   batch holds the prompts the paper's adaptive batch size asks for: the groups still missing, divided by the
   share of groups that came back informative this step, times 1.25, at most B.
3. Adaptation. After each step, the share of the groups drawn that were easy (hard) zero-variance is compared
   with its target, a third (two thirds) of `greso_target_zero_variance`: above it, p of that kind falls by
   `greso_p_step` (skip more), below it rises, within [0.05, 0.95].

Deviations from the paper's release, and why:
- The release adapts p only after the first epoch; here p adapts on the steps where at least one candidate had
  a streak, i.e. where the filter could act. Short runs that revisit a small pool within an epoch (a sampler
  sees no epochs) then adapt as the release would in its second epoch, and a first pass over unseen prompts
  leaves p alone, as there.
- "Easy" and "hard" are read from `success_threshold` (every reward at or above it, or every one below it),
  where the release compares the group's mean reward with 0.98 and 0.11 (binary rewards).
- Batches are counted by `max_gen_batches` (as `dynamic`), where the release keeps sampling until the batch
  is full; a shortfall trains on the informative groups kept, as `dynamic`'s `on_shortfall="train"` does.
- The filter looks at most `greso_max_candidates` x B prompts a batch, so a pool that is nearly all filtered
  cannot stall a step; the survivors found so far are drawn.
- A step's first batch holds B prompts, as `dynamic`'s does; the release's scripts draw 1.5 x the training
  batch first (`sampling_batch_size` 384 for 256).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import READS, DrawFn, KeptGroups, MorePrompts, Sampler, Selection, example_key, informative
from .registry import SAMPLERS

P_MIN, P_MAX = 0.05, 0.95  # the release's bounds on the exploration probabilities
KEEP_FLOOR = 0.01  # the release's least chance of drawing a prompt, however long its streak
BATCH_SLACK = 1.25  # the release's margin on the adaptive batch size
# The most greso_max_candidates may be: every prompt is drawn with chance KEEP_FLOOR at least, so looking at
# 1 / KEEP_FLOOR x the batch finds a full batch on average even when every prompt is filtered; more only lets
# a step stall longer (1e18 was taken without a word).
MAX_CANDIDATES = 1 / KEEP_FLOOR
EASY, HARD = 1, -1  # the kind of a zero-variance streak (0: the last group was informative, or none yet)


def skip_probability(streak: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """GRESO's chance of skipping a prompt before rollout: 1 - max(p^z, 0.01), 0 without a streak.

    streak (N,) long z >= 0, p (N,) the exploration probability of each prompt's kind -> (N,)
    """
    keep = torch.where(streak > 0, (p ** streak).clamp(min=KEEP_FLOOR), torch.ones_like(p))
    return 1.0 - keep


def zero_variance_kind(rewards: torch.Tensor, threshold: float) -> torch.Tensor:
    """Each group's kind: EASY (every reward >= threshold), HARD (every one below), 0 otherwise; a group whose
    rewards differ is 0 whatever they are.  rewards (B, G) -> (B,) long"""
    success = rewards >= threshold  # (B, G)
    kind = torch.where(success.all(dim=1), EASY, torch.where((~success).all(dim=1), HARD, 0))
    return torch.where(informative(rewards), 0, kind)


@SAMPLERS.register("greso", reads=READS, hosts=("grposcope", "trl"))
class Greso(Sampler):
    """GRESO (arXiv 2506.02177): skips prompts whose recent groups had zero variance, with a probability that learns.
    Its options are config fields of the same names.

    Args:
        greso_p_easy: greso: the initial exploration probability p of prompts whose recent groups all succeeded; such a
            prompt with z in a row is skipped with probability 1 - p^z (arXiv 2506.02177).
        greso_p_hard: greso: the same for prompts whose recent groups all failed.
        greso_target_zero_variance: greso: the share of zero-variance groups the exploration probabilities steer
            towards, a third of it all-correct and two thirds all-wrong (the release's split).
        greso_p_step: greso: how much p_easy and p_hard move per step towards their targets.
        greso_max_candidates: greso: prompts the pre-rollout filter may look at per batch, as a multiple of the batch,
            before it draws the survivors it has.
    """

    closed_form = False  # whom it draws depends on each prompt's history: Monte Carlo
    per_prompt = False  # the batch refills and the exploration probabilities are shared by the batch

    def __init__(self, greso_p_easy: float = 0.5, greso_p_hard: float = 0.5,
                 greso_target_zero_variance: float = 0.25, greso_p_step: float = 0.01,
                 greso_max_candidates: float = 8.0, max_gen_batches: int = 3, success_threshold: float = 0.5,
                 seed: int = 0) -> None:
        super().__init__(success_threshold, seed)
        for name, value in (("greso_p_easy", greso_p_easy), ("greso_p_hard", greso_p_hard)):
            if not P_MIN <= value <= P_MAX:
                raise ValueError(f"{name} must be in [{P_MIN}, {P_MAX}] (a chance of drawing a prompt again), "
                                 f"got {value!r}; the paper starts at 0.5")
        if not 0 < greso_target_zero_variance < 1 or not 0 < greso_p_step < 1:
            raise ValueError(f"greso_target_zero_variance and greso_p_step must be in (0, 1), got "
                             f"{greso_target_zero_variance!r} and {greso_p_step!r}; the paper uses 0.25 and 0.01")
        if not 1 <= greso_max_candidates <= MAX_CANDIDATES:
            raise ValueError(f"greso_max_candidates must be in [1, {MAX_CANDIDATES:g}] (prompts the filter may look "
                             "at per batch, as a multiple of the batch, e.g. 8, the default; each prompt is drawn "
                             f"with chance >= {KEEP_FLOOR}, so {MAX_CANDIDATES:g} x the batch fills it on average), "
                             f"got {greso_max_candidates!r}")
        if not isinstance(max_gen_batches, int) or max_gen_batches < 1:
            raise ValueError(f"max_gen_batches must be an int >= 1 (batches generated per step), got "
                             f"{max_gen_batches!r}")
        self.p = {EASY: float(greso_p_easy), HARD: float(greso_p_hard)}
        self.target = {EASY: greso_target_zero_variance / 3, HARD: greso_target_zero_variance * 2 / 3}
        self.p_step, self.max_candidates, self.max_gen_batches = greso_p_step, greso_max_candidates, max_gen_batches
        self.history: dict[Any, tuple[int, int]] = {}  # prompt key -> (kind of its streak, its length)

    # --- the filter ---------------------------------------------------------------------------------------

    def _filter(self, first: list[Any], more: MorePrompts, want: int) -> tuple[list[Any], int, int, bool]:
        """`want` prompts that pass the filter, from `first` and then the stream: (survivors, prompts looked
        at, prompts skipped, whether any had a streak)."""
        survivors: list[Any] = []
        looked, skipped, streaks, batch = 0, 0, False, list(first)
        limit = max(want, math.ceil(self.max_candidates * want))
        while True:
            kinds = torch.tensor([self.history.get(example_key(p), (0, 0))[0] for p in batch])  # (C,)
            lengths = torch.tensor([self.history.get(example_key(p), (0, 0))[1] for p in batch])
            p = torch.tensor([self.p.get(int(k), 1.0) for k in kinds], dtype=torch.float64)
            draw = torch.rand(len(batch), generator=self.generator, dtype=torch.float64)
            skip = draw < skip_probability(lengths, p)  # (C,)
            streaks = streaks or bool((lengths > 0).any())
            survivors += [prompt for prompt, s in zip(batch, skip.tolist()) if not s]
            looked, skipped = looked + len(batch), skipped + int(skip.sum())
            if len(survivors) >= want or looked >= limit:
                break
            batch = more(min(want - len(survivors), limit - looked))
            if not batch:  # a host whose batch is fixed (no stream to refill from)
                break
        return survivors[:want], looked, skipped, streaks

    def _remember(self, prompts: list[Any], rewards: torch.Tensor) -> torch.Tensor:
        """Extends each drawn prompt's streak (or ends it); returns the groups' kinds.  rewards (K, G) -> (K,)"""
        kinds = zero_variance_kind(rewards, self.success_threshold)
        for prompt, kind in zip(prompts, kinds.tolist()):
            key = example_key(prompt)
            last, length = self.history.get(key, (0, 0))
            self.history[key] = (kind, length + 1 if kind and kind == last else (1 if kind else 0))
        return kinds

    def _adapt(self, kinds: torch.Tensor) -> None:
        """Moves p_easy and p_hard towards their targets from the step's groups.  kinds (B0,)"""
        for kind in (EASY, HARD):
            share = (kinds == kind).float().mean().item()
            step = -self.p_step if share >= self.target[kind] else self.p_step  # too many: skip more
            self.p[kind] = min(max(self.p[kind] + step, P_MIN), P_MAX)

    # --- one step -----------------------------------------------------------------------------------------

    def sample(self, prompts: list[Any], draw: DrawFn, more: MorePrompts, g: int) -> Selection:
        want, kept, kinds = len(prompts), KeptGroups(), []
        looked, skipped, acted, batch_first, ask = 0, 0, False, list(prompts), len(prompts)
        while True:
            batch, seen, dropped_before, streaks = self._filter(batch_first, more, ask)
            looked, skipped, acted = looked + seen, skipped + dropped_before, acted or streaks
            if not batch:  # every prompt looked at was filtered out: draw the last ones as they came
                batch = batch_first[:ask]
            drawn = draw(batch, g)  # (K, G)
            kept.add(batch, drawn)
            kinds.append(self._remember(batch, drawn.rewards))
            if len(kept.prompts) >= want or len(kept.draws) == self.max_gen_batches:
                break
            missing = want - len(kept.prompts)  # the adaptive batch size:
            ask = min(want, math.ceil(missing / max(kept.mixed_share, 1.0 / want) * BATCH_SLACK))
            batch_first = more(ask)
            if not batch_first:  # a host whose batch is fixed: no further batch
                break
        if acted:
            self._adapt(torch.cat(kinds))  # (B0,)
        return kept.selection(want, prompts_skipped=skipped, candidates=looked, greso_p_easy=self.p[EASY],
                              greso_p_hard=self.p[HARD])

    # --- checkpoints --------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        keys = list(self.history)
        return {**super().state_dict(), "p_easy": self.p[EASY], "p_hard": self.p[HARD],
                "keys": [str(k) for k in keys], "key_is_int": [isinstance(k, int) for k in keys],
                "streaks": torch.tensor([self.history[k] for k in keys], dtype=torch.long).view(-1, 2)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.p = {EASY: float(state["p_easy"]), HARD: float(state["p_hard"])}
        keys = [int(k) if is_int else k for k, is_int in zip(state["keys"], state["key_is_int"])]
        self.history = {k: (int(kind), int(length)) for k, (kind, length) in zip(keys, state["streaks"].tolist())}
