"""Samplers on a seeded synthetic generator whose prompts have known success probabilities (and on scripted
outcomes where the exact answer is known), then end to end with the tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from grposcope.sampling import SAMPLERS, ScoredDraw, make
from grposcope.sampling.budgeted import p_mixed


class Synthetic:
    """Prompts are ints; prompt i succeeds with probability p[i]. Records every draw it was asked for."""

    def __init__(self, p: list[float], seed: int = 0) -> None:
        self.p = torch.tensor(p)
        self.gen = torch.Generator().manual_seed(seed)
        self.calls: list[tuple[list[int], int]] = []
        self.position = 0

    def draw(self, prompts: list[int], n: int) -> ScoredDraw:
        self.calls.append((list(prompts), n))
        probs = self.p[torch.tensor(prompts)].unsqueeze(1)  # (B, 1)
        rewards = (torch.rand(len(prompts), n, generator=self.gen) < probs).float()  # (B, n)
        return ScoredDraw(rewards, torch.full((len(prompts), n), 5.0))

    def more(self, count: int) -> list[int]:
        """The data stream: the prompts in order, round and round."""
        out = [(self.position + i) % len(self.p) for i in range(count)]
        self.position += count
        return out


class Scripted(Synthetic):
    """Each prompt replays a fixed list of outcomes, sample after sample (wrapping around)."""

    def __init__(self, outcomes: dict[int, list[float]]) -> None:
        super().__init__([0.0] * len(outcomes))
        self.outcomes, self.seen = outcomes, {k: 0 for k in outcomes}

    def draw(self, prompts: list[int], n: int) -> ScoredDraw:
        self.calls.append((list(prompts), n))
        rows = []
        for prompt in prompts:
            script, start = self.outcomes[prompt], self.seen[prompt]
            rows.append([script[(start + j) % len(script)] for j in range(n)])
            self.seen[prompt] += n
        return ScoredDraw(torch.tensor(rows), torch.full((len(prompts), n), 5.0))


def test_every_sampler_returns_g_samples_per_kept_prompt_that_point_at_what_was_drawn():
    world = Synthetic([0.0, 0.3, 0.5, 0.7, 1.0] * 8, seed=1)
    for name in SAMPLERS.names():
        sampler = make(name, seed=0)
        selection = sampler.sample(world.more(8), world.draw, world.more, 4)
        every = torch.cat([d.rewards.reshape(-1) for d in selection.draws])  # the step's samples in order
        assert selection.samples.shape == selection.rewards.shape == (len(selection.prompts), 4), name
        assert torch.equal(every[selection.samples], selection.rewards), name  # numbering is consistent
        assert selection.metrics["sampler/samples_generated"] == every.numel(), name
        assert selection.metrics["sampler/samples_kept"] == selection.rewards.numel(), name


def test_every_selection_counts_the_completions_its_sampler_drew_kept_or_not():
    # Selection.samples_generated is what max_samples counts: every completion asked of `draw` in the step
    world = Synthetic([0.0, 0.3, 0.5, 0.7, 1.0] * 8, seed=2)
    for name in SAMPLERS.names():
        sampler = make(name, seed=0)
        for _ in range(3):
            world.calls.clear()
            selection = sampler.sample(world.more(8), world.draw, world.more, 4)
            drawn = sum(len(prompts) * n for prompts, n in world.calls)
            assert selection.samples_generated == drawn, name
            assert selection.metrics["sampler/samples_generated"] == drawn, name
    # by hand: dynamic on prompts that always fail draws max_gen_batches = 3 batches of 8 prompts x G = 4,
    # 3 * 8 * 4 = 96 completions, and trains on the last batch's 8 * 4 = 32
    hopeless = Synthetic([0.0] * 40)
    selection = make("dynamic", seed=0).sample(hopeless.more(8), hopeless.draw, hopeless.more, 4)
    assert selection.samples_generated == 96 and selection.samples.numel() == 32


def test_fixed_draws_g_for_each_prompt_once():
    world = Synthetic([0.5] * 4)
    selection = make("fixed").sample([0, 1, 2, 3], world.draw, world.more, 8)
    assert world.calls == [([0, 1, 2, 3], 8)]
    assert torch.equal(selection.samples, torch.arange(32).view(4, 8)) and selection.pool is None
    assert selection.metrics["sampler/rounds_mean"] == 1.0 and selection.metrics["sampler/prompts_dropped"] == 0


def test_dynamic_drops_collapsed_groups_and_refills_with_fresh_prompts():
    # prompts 0, 1 always fail, 2, 3 alternate (always a mixed group of 4), 4, 5 always succeed
    world = Scripted({0: [0.0], 1: [0.0], 2: [1.0, 0.0], 3: [0.0, 1.0], 4: [1.0], 5: [1.0]})
    world.position = 4  # the stream continues with 4, 5, 0, 1, 2, 3
    selection = make("dynamic", max_gen_batches=3).sample([0, 1, 2, 3], world.draw, world.more, 4)
    assert [c[0] for c in world.calls] == [[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]]  # fresh batches of 4
    assert selection.prompts == [2, 3, 2, 3]  # the informative groups, in the order found
    assert selection.metrics["sampler/informative_frac"] == 1.0
    assert selection.metrics["sampler/shortfall"] == 0 and selection.metrics["sampler/gen_batches"] == 3
    assert selection.metrics["sampler/prompts_dropped"] == 8  # 12 drawn, 4 kept


def test_dynamic_shortfall_trains_on_what_was_kept_or_stops_when_asked():
    world = Scripted({0: [0.0], 1: [1.0, 0.0], 2: [1.0], 3: [0.0]})
    selection = make("dynamic", max_gen_batches=2).sample([0, 1, 2, 3], world.draw, world.more, 2)
    assert selection.prompts == [1, 1] and selection.metrics["sampler/shortfall"] == 2
    with pytest.raises(RuntimeError, match="kept 2 informative groups of the 4 wanted.*raise max_gen_batches"):
        make("dynamic", max_gen_batches=2, on_shortfall="error").sample([0, 1, 2, 3], world.draw, world.more, 2)
    dead = Scripted({0: [0.0], 1: [1.0]})  # nothing informative at all: the last batch trains as drawn
    selection = make("dynamic", max_gen_batches=2).sample([0, 1], dead.draw, dead.more, 2)
    assert len(selection.prompts) == 2 and selection.metrics["sampler/informative_frac"] == 0.0


def test_reinforce_ada_exit_rules_rounds_and_unresolved_prompts():
    # 0: always wrong (never exits); 1: always right; 2: right 1 in 4 (pos exits in round 1; balance needs
    # 2 right and 2 wrong among its samples, which round 1 (of 4) does not have: 1 right, 3 wrong)
    world = Scripted({0: [0.0], 1: [1.0], 2: [1.0, 0.0, 0.0, 0.0]})
    pos = make("reinforce_ada", exit_rule="pos", round_size=4, max_rounds=3).sample([0, 1, 2], world.draw, None, 4)
    assert [c[0] for c in world.calls] == [[0, 1, 2], [0], [0]]  # only the active prompt is sampled again
    assert pos.metrics["sampler/rounds_mean"] == pytest.approx((3 + 1 + 1) / 3)
    assert pos.metrics["sampler/unresolved"] == 1 and pos.prompts == [0, 1, 2]  # unresolved kept by default
    world = Scripted({0: [0.0], 1: [1.0], 2: [1.0, 0.0, 0.0, 0.0]})
    balance = make("reinforce_ada", exit_rule="balance", round_size=4, max_rounds=3, drop_unresolved=True)
    selection = balance.sample([0, 1, 2], world.draw, None, 4)
    assert [c[0] for c in world.calls] == [[0, 1, 2], [0, 1, 2], [0, 1]]  # 2 exits after 8 samples: 2 right
    assert selection.prompts == [2] and selection.metrics["sampler/prompts_dropped"] == 2


def test_reinforce_ada_down_samples_to_a_balanced_group_with_the_pool_as_baseline():
    # 1 right in 4: balance (2 right, 2 wrong) holds after round 2, with 2 right and 6 wrong -> the group of 4
    # holds 2 right and 2 wrong; the pool is all 8 samples, mean 2/8
    world = Scripted({0: [1.0, 0.0, 0.0, 0.0]})
    sampler = make("reinforce_ada", exit_rule="balance", round_size=4, max_rounds=3, seed=3)
    selection = sampler.sample([0], world.draw, None, 4)
    assert sorted(selection.rewards[0].tolist()) == [0.0, 0.0, 1.0, 1.0]
    assert selection.pool.mean.item() == pytest.approx(0.25)
    assert selection.pool.std().item() == pytest.approx(math.sqrt(0.25 * 0.75 * 8 / 7))  # unbiased
    assert selection.pool.std(unbiased=False).item() == pytest.approx(math.sqrt(0.25 * 0.75))
    assert selection.metrics["sampler/rounds_mean"] == 2.0
    # a short class is filled from the other: 1 right among 8 -> 1 right and 3 wrong
    world = Scripted({0: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]})
    selection = make("reinforce_ada", round_size=8, max_rounds=1).sample([0], world.draw, None, 4)
    assert sorted(selection.rewards[0].tolist()) == [0.0, 0.0, 0.0, 1.0]
    assert len(set(selection.samples[0].tolist())) == 4  # four different samples


def test_reinforce_ada_down_sampling_is_random_but_seeded():
    def run(seed):
        world = Scripted({0: [1.0, 0.0] * 8})
        return make("reinforce_ada", round_size=16, max_rounds=1, seed=seed).sample([0], world.draw, None, 4)
    assert torch.equal(run(1).samples, run(1).samples)
    assert any(not torch.equal(run(1).samples, run(s).samples) for s in range(2, 6))


def test_reinforce_ada_needs_enough_samples_for_a_group():
    with pytest.raises(ValueError, match="cannot fill a group of num_generations=16"):
        make("reinforce_ada", round_size=4, max_rounds=3).sample([0], Synthetic([0.5]).draw, None, 16)


def test_p_mixed_by_hand():
    one = torch.tensor([1.0])
    assert p_mixed(one, one, 2).item() == pytest.approx(1 - 1 / 3 - 1 / 3)  # uniform p: E[p^2] = 1/3
    assert p_mixed(one, one, 1).item() == pytest.approx(0.0, abs=1e-6)  # one sample is never mixed
    # Beta(2, 1), G = 2: E[p^2] = 2*3/(3*4) = 1/2, E[(1-p)^2] = 1*2/(3*4) = 1/6
    assert p_mixed(torch.tensor([2.0]), one, 2).item() == pytest.approx(1 - 1 / 2 - 1 / 6)
    # near-certain beliefs give ~0: a prompt solved 100 times, or failed 100 times
    assert p_mixed(torch.tensor([101.0, 1.0]), torch.tensor([1.0, 101.0]), 8).max().item() < 0.1


def test_budgeted_spends_its_budget_where_groups_are_mixed():
    # half the prompts are hopeless (p = 0), half even (p = 0.5); budget 64 samples of G = 8
    world = Synthetic([0.0, 0.5] * 32, seed=0)
    sampler = make("budgeted", sample_budget=64, budget_candidates=4.0, seed=0)
    fractions, spent = [], []
    for _ in range(20):
        selection = sampler.sample(world.more(8), world.draw, world.more, 8)
        spent.append(selection.metrics["sampler/samples_generated"])
        fractions.append(sum(p % 2 for p in selection.prompts) / len(selection.prompts))
    assert max(spent) <= 64  # never over budget
    assert all(f == 1.0 for f in fractions)  # only informative groups train: all from p = 0.5 prompts
    last = world.calls[-10:]
    hopeless = sum(1 for prompts, _ in last for p in prompts if p % 2 == 0)
    drawn = sum(len(prompts) for prompts, _ in last)
    assert hopeless / drawn < 0.25  # once known, hopeless prompts are mostly skipped


def test_budgeted_draws_a_prompt_at_most_once_per_step_when_the_look_ahead_wraps_around():
    world = Synthetic([0.5] * 4, seed=0)  # 4 prompts, 4 x 4 candidates: the stream comes round four times
    sampler = make("budgeted", sample_budget=64, budget_candidates=4.0)
    selection = sampler.sample(world.more(4), world.draw, world.more, 4)
    drawn = [p for prompts, _ in world.calls for p in prompts]
    assert sorted(drawn) == sorted(set(drawn)) and selection.metrics["sampler/candidates"] == 4


def test_budgeted_forgets_and_revisits_a_prompt_and_checkpoints_its_beliefs():
    sampler = make("budgeted", budget_decay=0.5)
    rows = sampler._rows([7])
    sampler.step = 1
    sampler._update(rows, torch.zeros(1, 8))  # 8 failures at step 1
    a, b = sampler._belief(rows)
    fresh = p_mixed(a, b, 8).item()
    sampler.step = 11  # ten steps later the evidence weighs 0.5 ** 10
    a, b = sampler._belief(rows)
    assert p_mixed(a, b, 8).item() > fresh + 0.1  # back towards the prior: worth a new look
    world = Synthetic([0.2, 0.5, 0.8, 0.0] * 4, seed=2)
    first = make("budgeted", sample_budget=32, seed=1)
    for _ in range(3):
        first.sample(world.more(4), world.draw, world.more, 4)
    second = make("budgeted", sample_budget=32, seed=99)
    second.load_state_dict(first.state_dict())
    copy = Synthetic([0.2, 0.5, 0.8, 0.0] * 4, seed=5)
    copy.position, world.gen = world.position, torch.Generator().manual_seed(5)
    a, b = first.sample(world.more(4), world.draw, world.more, 4), second.sample(copy.more(4), copy.draw, copy.more, 4)
    assert a.prompts == b.prompts and torch.equal(a.rewards, b.rewards)


def test_unknown_sampler_and_bad_options_are_named():
    with pytest.raises(ValueError, match=f"unknown sampler 'greedy'; known: {', '.join(SAMPLERS.names())}"):
        make("greedy")
    with pytest.raises(ValueError, match="unknown exit_rule 'any'; known: pos, balance"):
        make("reinforce_ada", exit_rule="any")
    with pytest.raises(ValueError, match="unknown on_shortfall"):
        make("dynamic", on_shortfall="crash")
    with pytest.raises(ValueError, match="sample_budget must be an int >= 1"):
        make("budgeted", sample_budget=0)


# --- collapse is measured on the groups as first drawn ----------------------------------------------------

# 8 prompts, G = 4: prompts 0-2 fail and 3-5 succeed on their first 4 samples (6 of 8 groups all-equal), 6 and 7
# alternate. Under "later", prompts 0-5 turn mixed after their first 4 samples (reinforce_ada's second round).
CONSTANT = {**{k: [0.0] for k in range(3)}, **{k: [1.0] for k in range(3, 6)}, 6: [1.0, 0.0], 7: [0.0, 1.0]}
LATER = {**{k: [0.0] * 4 + [1.0, 0.0] for k in range(3)}, **{k: [1.0] * 4 + [0.0, 1.0] for k in range(3, 6)},
         6: [1.0, 0.0], 7: [0.0, 1.0]}


@pytest.mark.parametrize("sampler, estimator, script, acr_post", [
    ("fixed", "grpo", CONSTANT, 0.75),  # nothing mitigates: all six reach the loss with zero advantage
    ("dynamic", "grpo", CONSTANT, 0.0),  # three batches of the 8, each 6/8 all-equal; kept: the 2 x 3 mixed
    ("budgeted", "grpo", CONSTANT, 0.0),  # all 8 drawn (6 then 2), the 2 mixed kept
    ("reinforce_ada", "pool", LATER, 0.0),  # prompts 0-5 get a second round of 4 and exit balanced
])
def test_acr_is_measured_before_the_sampler_and_acr_post_after(sampler, estimator, script, acr_post):
    from grposcope.core import advantages
    from grposcope.core.diagnostics import CollapseMonitor

    world = Scripted(script)
    options = {"round_size": 4} if sampler == "reinforce_ada" else {}
    selection = make(sampler, seed=0, **options).sample(world.more(8), world.draw, world.more, 4)
    out = advantages.make(estimator)(selection.rewards, pool=selection.pool, as_drawn=selection.as_drawn)
    metrics = CollapseMonitor().update(selection.as_drawn, out.advantages)  # as the trainer and simulator do
    assert metrics["collapse/acr"] == 0.75
    assert metrics["collapse/acr_all_wrong"] == 0.375 and metrics["collapse/acr_all_correct"] == 0.375
    assert metrics["collapse/acr_post"] == acr_post
    avspo = advantages.make("avspo")
    assert avspo(selection.rewards, as_drawn=selection.as_drawn).metrics["avspo/signal"] == 0.75


def by_answer(prompts, completions, answer, **kwargs):
    """answer "0": every completion fails, "1": every one succeeds, "mix": the group alternates."""
    return [float(i % 2) if a == "mix" else float(a) for i, a in enumerate(answer)]


def test_the_trainer_logs_acr_of_every_group_drawn_under_dynamic(tmp_path, tiny_llama, tiny_tokenizer):
    from test_trainer import read_lines, tiny_config

    from grposcope import GRPOTrainer

    data = [{"prompt": f"What is {k} ?", "answer": a} for k, a in enumerate(["0"] * 3 + ["1"] * 3 + ["mix"] * 2)]
    args = tiny_config(tmp_path, sampler="dynamic", per_device_train_batch_size=8, gradient_accumulation_steps=4,
                       max_steps=1, use_avspo=True)  # 8 prompts a step: the whole dataset, 3 batches of it
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=by_answer, train_dataset=data,
                args=args).train()
    [line] = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert line["sampler/gen_batches"] == 3 and line["sampler/samples_kept"] == 6 * 4
    assert line["collapse/acr"] == 0.75 and line["collapse/acr_post"] == 0.0
    assert line["avspo/signal"] == 0.75  # AVSPO's signal reads the drawn groups too


# --- end to end, with the tiny model ---------------------------------------------------------------------


def even_length(prompts, completions, **columns):
    """1.0 for a completion with an even number of characters: a coin the tiny random model flips."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(t) % 2 == 0) for t in texts]


@pytest.mark.parametrize("sampler, options", [
    ("fixed", {}),
    ("dynamic", {"max_gen_batches": 2}),
    ("reinforce_ada", {"advantage_estimator": "pool", "round_size": 4, "max_rounds": 2}),
    ("budgeted", {"sample_budget": 16, "budget_candidates": 2.0}),
])
def test_every_sampler_trains_the_tiny_model(tmp_path, tiny_llama, tiny_tokenizer, sampler, options):
    from test_trainer import DATA, read_lines, tiny_config

    from grposcope import GRPOTrainer

    args = tiny_config(tmp_path, sampler=sampler, max_steps=3, save_steps=2, **options)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=even_length,
                          train_dataset=DATA, args=args)
    trainer.train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert [line["step"] for line in lines] == [1, 2, 3]
    for line in lines:
        kept = line["sampler/samples_kept"]
        assert kept % 4 == 0 and 0 < kept <= line["sampler/samples_generated"]
        assert 0.0 <= line["sampler/informative_frac"] <= 1.0 and "reward/even_length/mean" in line
    if sampler == "reinforce_ada":
        assert all(line["sampler/samples_generated"] >= 2 * 4 for line in lines)  # 2 prompts, a round of 4
    if sampler == "budgeted":
        assert all(line["sampler/samples_generated"] <= 16 for line in lines)
        state = torch.load(tmp_path / "run" / "checkpoint-2" / "trainer_state.pt", weights_only=True)
        assert len(state["sampler"]["keys"]) >= 2 and state["sampler"]["step"] == 2  # beliefs checkpointed


def odd_answers_fail(prompts, completions, answer, **columns):
    """0 for the prompts whose answer is odd (3 of the 6: hopeless), a coin flip for the others: what the
    budgeted sampler learns shows in which prompts it draws."""
    coins = even_length(prompts, completions)
    return [0.0 if int(a) % 2 else coin for a, coin in zip(answer, coins)]


def test_a_resumed_budgeted_run_repeats_the_uninterrupted_one(tmp_path, tiny_tokenizer):
    from conftest import make_tiny_llama
    from test_trainer import DATA, read_lines, tiny_config

    from grposcope import GRPOTrainer

    def trainer(**options):
        args = tiny_config(tmp_path, sampler="budgeted", sample_budget=8, budget_candidates=3.0, max_steps=6,
                           save_steps=3, **options)
        return GRPOTrainer(model=make_tiny_llama(), processing_class=tiny_tokenizer,
                           reward_funcs=odd_answers_fail, train_dataset=DATA, args=args)

    trainer().train()
    straight = read_lines(tmp_path / "run" / "metrics.jsonl")
    trainer().train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-3"))
    resumed = read_lines(tmp_path / "run" / "metrics.jsonl")
    drop = ("time",)
    same = [{k: v for k, v in line.items() if k not in drop and not k.startswith("perf/")} for line in resumed]
    expected = [{k: v for k, v in line.items() if k not in drop and not k.startswith("perf/")} for line in straight]
    assert same == expected  # steps 4-6 drew the same prompts: the beliefs came back from the checkpoint
