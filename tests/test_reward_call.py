"""Reward functions are called the way TRL 1.16 calls them: by keyword only, with `trainer_state`,
`log_extra` and `log_metric` (`GRPOTrainer._calculate_rewards`). Hand-computed values throughout."""

from __future__ import annotations

import logging
import re
import threading
from types import SimpleNamespace

import pytest
import torch

from grposcope.rewards import RewardFunctionError, RewardScorer
from grposcope.rewards.inputs import reward_inputs

try:  # the `test` extra installs TRL, so this is the usual path: TRL's own functions, unchanged
    from trl.rewards import accuracy_reward, get_soft_overlong_punishment, think_format_reward
except ImportError:  # without TRL: local stand-ins with exactly TRL 1.16's signatures and logging
    from grposcope.rewards.extract import completion_text, last_boxed

    def accuracy_reward(completions, solution, log_extra=None, **kwargs):
        answers = [last_boxed(completion_text(c)) for c in completions]
        if log_extra is not None:
            log_extra("solution", list(solution))
            log_extra("gold_parsed", list(solution))
            log_extra("answer_parsed", [str(a) for a in answers])
        return [1.0 if a == s else 0.0 for a, s in zip(answers, solution)]

    def think_format_reward(completions, **kwargs):
        pattern = r"^<think>(?!.*<think>)(.*?)</think>.*$"
        flags = re.DOTALL | re.MULTILINE
        return [1.0 if re.match(pattern, c[0]["content"], flags) else 0.0 for c in completions]

    def get_soft_overlong_punishment(max_completion_len, soft_punish_cache):
        def soft_overlong_punishment_reward(completion_ids, **kwargs):
            start = max_completion_len - soft_punish_cache
            return [
                0.0 if len(ids) <= start else (start - len(ids)) / soft_punish_cache
                if len(ids) <= max_completion_len else -1.0
                for ids in completion_ids
            ]

        return soft_overlong_punishment_reward


def chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


STATE = SimpleNamespace(global_step=3, max_steps=10, epoch=0.5)  # what the trainer passes (attributes only)


def test_trls_reward_functions_run_unchanged():
    prompts = [[{"role": "user", "content": "What is 1/3?"}]] * 4
    completions = [
        chat(r"<think>a</think>So \boxed{\frac{1}{3}}"),
        chat(r"<think>a</think>So \boxed{\frac{1}{2}}"),
        chat(r"So \boxed{\frac{1}{3}}"),  # no think block
        chat(r"<think>a<think>b</think>\boxed{\frac{1}{3}}"),  # a second <think>: the format fails
    ]
    solutions = [r"\frac{1}{3}"] * 4
    ids = [[7] * 90, [7] * 50, [7] * 100, [7] * 85]
    overlong = get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20)
    scorer = RewardScorer([accuracy_reward, think_format_reward, overlong], reward_weights=[1.0, 0.5, 1.0])
    result = scorer.score(prompts, completions, {"solution": solutions, "completion_ids": ids})
    # accuracy: 1/3 == 1/3 -> 1; 1/2 -> 0; 1; 1.   think format: 1, 1, 0 (no tag), 0 (two opening tags).
    # overlong (L_max 100, cache 20, so free up to 80): 90 -> (80 - 90) / 20 = -0.5; 50 -> 0;
    #   100 -> (80 - 100) / 20 = -1.0; 85 -> (80 - 85) / 20 = -0.25
    expected = torch.tensor([[1.0, 1.0, -0.5], [0.0, 1.0, 0.0], [1.0, 0.0, -1.0], [1.0, 0.0, -0.25]])
    assert torch.equal(result.per_function, expected)
    # weights 1, 0.5, 1: s0 = 1 + 0.5 - 0.5 = 1.0;  s1 = 0 + 0.5 + 0 = 0.5;  s2 = 1 + 0 - 1 = 0;
    #   s3 = 1 + 0 - 0.25 = 0.75
    assert result.rewards.tolist() == [1.0, 0.5, 0.0, 0.75]
    # (-0.5 + 0 - 1 - 0.25) / 4 = -0.4375
    assert result.metrics["reward/soft_overlong_punishment_reward/mean"] == -0.4375
    # TRL's accuracy_reward logs three table columns through log_extra, one value per sample
    assert set(result.extra_columns) == {"solution", "gold_parsed", "answer_parsed"}
    assert result.extra_columns["solution"] == solutions
    assert all(len(values) == 4 for values in result.extra_columns.values())


def test_trl_signature_user_functions_run_unchanged():
    seen = {}

    def acc(completions, solution, **kwargs):  # TRL's common signature: no `prompts`
        return [1.0 if c == s else 0.0 for c, s in zip(completions, solution)]

    def acc2(prompts, completions, answer, **kwargs):
        seen["prompts"] = prompts
        return [1.0 if c == a and p.endswith("?") else 0.0 for p, c, a in zip(prompts, completions, answer)]

    result = RewardScorer([acc, acc2]).score(
        ["1+1?", "2+2?"], ["2", "5"], {"solution": ["2", "5"], "answer": ["2", "4"]}
    )
    # acc: "2" == "2", "5" == "5" -> 1, 1;  acc2: "2" == "2" -> 1, "5" != "4" -> 0;  sums 2, 1
    assert result.per_function.tolist() == [[1.0, 1.0], [1.0, 0.0]]
    assert result.rewards.tolist() == [2.0, 1.0]
    assert seen["prompts"] == ["1+1?", "2+2?"]


def test_trainer_state_reaches_every_function_and_is_none_outside_training():
    seen = []

    def progress(completions, trainer_state, **kwargs):
        seen.append(trainer_state)
        if trainer_state is None:  # evaluation: no training progress, as TRL's own functions allow
            return [None] * len(completions)
        return [trainer_state.global_step / trainer_state.max_steps * trainer_state.epoch] * len(completions)

    scorer = RewardScorer([progress, progress])
    result = scorer.score(["p", "q"], ["a", "b"], trainer_state=STATE)
    # 3 / 10 * 0.5 = 0.15 from each of the two functions: 0.3 a sample
    assert result.per_function.tolist() == [[pytest.approx(0.15)] * 2] * 2
    assert result.rewards.tolist() == [pytest.approx(0.3)] * 2
    assert seen == [STATE, STATE] and seen[0] is STATE  # the caller's object itself, not a copy
    evaluation = scorer.score(["p"], ["a"])
    assert seen[2:] == [None, None]
    assert evaluation.metrics["reward/none_frac"] == 1.0  # both returned None -> skipped


def test_log_metric_and_log_extra_land_in_the_result():
    def judge(completions, log_extra, log_metric, **kwargs):
        log_metric("my/metric", 0.25)
        log_extra("judge", [f"ok:{c}" for c in completions])
        return [1.0] * len(completions)

    def second(completions, log_metric, **kwargs):
        log_metric("my/metric", torch.tensor(0.75))  # a 0-d tensor counts as a number
        log_metric("other", 2)
        return [0.0] * len(completions)

    scorer = RewardScorer([judge, second])
    result = scorer.score(["p"] * 3, ["a", "b", "c"])
    # every value, in call order: judge's 0.25 first, then second's 0.75
    assert result.logged_metrics == {"my/metric": [0.25, 0.75], "other": [2.0]}
    assert result.extra_columns == {"judge": ["ok:a", "ok:b", "ok:c"]}
    again = scorer.score(["p"], ["d"])  # collected per call: nothing carried over from the first
    assert again.logged_metrics == {"my/metric": [0.25, 0.75], "other": [2.0]}
    assert again.extra_columns == {"judge": ["ok:d"]}


@pytest.mark.parametrize("reward_errors", ["raise", "zero"])
@pytest.mark.parametrize("swallowed", [False, True], ids=["propagated", "swallowed"])
def test_log_extra_with_the_wrong_length_raises_a_clear_error(reward_errors, swallowed):
    def judge(completions, log_extra, **kwargs):
        try:
            log_extra("verdict", ["yes", "no"])  # 2 values for 3 samples
        except ValueError:
            if not swallowed:
                raise
        return [1.0] * len(completions)

    expected = "reward function 'judge' logged column 'verdict' with 2 values for a batch of 3 samples"
    with pytest.raises(ValueError, match=re.escape(expected)):  # a bug in the function: raised in every mode
        RewardScorer(judge, reward_errors=reward_errors).score(["p"] * 3, ["a", "b", "c"])


def test_log_metric_of_a_non_number_raises_a_clear_error():
    def judge(completions, log_metric, **kwargs):
        log_metric("judge/score", "high")
        return [1.0] * len(completions)

    expected = "reward function 'judge' logged metric 'judge/score' with str 'high'"
    with pytest.raises(TypeError, match=expected):
        RewardScorer(judge, reward_errors="zero").score(["p"], ["a"])


def test_locate_recalls_do_not_add_to_what_was_logged(caplog):
    calls = []

    def judge(completions, log_extra, log_metric, **kwargs):
        calls.append(sorted(kwargs) + [len(completions)])
        log_metric("judge/batch_size", len(completions))
        log_extra("judge", [f"seen {c}" for c in completions])
        if any("boom" in c for c in completions):
            raise ValueError("cannot judge boom")
        return [1.0] * len(completions)

    scorer = RewardScorer(judge, reward_errors="zero")
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        result = scorer.score(["p"] * 3, ["a", "b", "boom"], {"answer": ["1", "2", "3"]}, trainer_state=STATE)
    # the batch call (3 samples) raised; the scorer re-called samples 0, 1, 2 alone to name the failing one
    assert [call[-1] for call in calls] == [3, 1, 1, 1]
    assert all(call[:-1] == ["answer", "prompts", "trainer_state"] for call in calls)  # one set of keywords
    assert "completion[2]: 'boom'" in caplog.text
    # what the batch call logged before it raised, once; the three re-calls' batch_size 1.0 is not there
    assert result.logged_metrics == {"judge/batch_size": [3.0]}
    assert result.extra_columns == {"judge": ["seen a", "seen b", "seen boom"]}
    assert result.rewards.tolist() == [0.0, 0.0, 0.0]
    assert result.metrics["reward/errors"] == 3.0


def test_a_call_abandoned_on_overrun_logs_nothing_into_the_result():
    release, logged = threading.Event(), threading.Event()

    def slow(completions, log_metric, **kwargs):
        release.wait(10)
        log_metric("late", 1.0)  # after the scorer has given up on this call
        logged.set()
        return [1.0] * len(completions)

    try:
        result = RewardScorer(slow, reward_timeout=0.2, reward_errors="zero").score(["p"], ["a"])
    finally:
        release.set()
    assert logged.wait(10)
    assert result.logged_metrics == {} and result.extra_columns == {}
    assert result.metrics["reward/errors"] == 1.0


@pytest.mark.parametrize("name", ["trainer_state", "log_extra", "log_metric", "prompts", "completions"])
def test_a_column_named_like_a_reserved_keyword_is_refused(name):
    expected = f"column {name!r} clashes with the reward function argument {name!r}, which the scorer passes"
    with pytest.raises(ValueError, match=re.escape(expected)):
        RewardScorer("format_reward").score(["p"], ["a"], {name: ["x"]})


def test_signature_mismatches_get_a_hint():
    def no_kwargs(prompts, completions):
        return [1.0] * len(completions)

    # no column at all, and still a keyword it does not take: trainer_state
    with pytest.raises(RewardFunctionError, match=r"unexpected keyword argument 'trainer_state'") as info:
        RewardScorer(no_kwargs).score(["p"], ["a"])
    assert "trainer_state, log_extra and log_metric: add **kwargs" in str(info.value)
    # TRL's accuracy_reward needs a `solution` column
    missing = "missing 1 required positional argument: 'solution'"
    with pytest.raises(RewardFunctionError, match=missing) as info:
        RewardScorer(accuracy_reward).score(["p"], [chat(r"\boxed{1}")], {"answer": ["1"]})
    assert "add that column to the dataset" in str(info.value)


def test_reward_inputs_with_the_mask_give_the_generated_ids_as_trl_does():
    examples = [{"prompt": [{"role": "user", "content": "q"}], "solution": "1"}]
    ids = torch.tensor([[5, 6, 7, 2, 0, 0], [5, 2, 0, 0, 0, 0]])  # (2, 6): 4 and 2 generated tokens, 0 pads
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]])
    prompts, completions, columns = reward_inputs(examples, ["a", "b"], 2, ids, mask)
    assert columns["completion_ids"] == [[5, 6, 7, 2], [5, 2]]
    overlong = get_soft_overlong_punishment(max_completion_len=5, soft_punish_cache=2)
    result = RewardScorer(overlong).score(prompts, completions, columns)
    # free up to 5 - 2 = 3 tokens: 4 -> (3 - 4) / 2 = -0.5;  2 -> 0.  (The padded rows, 6 long: -1.0 each.)
    assert result.rewards.tolist() == [-0.5, 0.0]
