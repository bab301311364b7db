"""Reward functions, answer extraction and the scorer: hand-computed cases."""

from __future__ import annotations

import logging
import math
import signal
import threading

import pytest
import torch

from grposcope.rewards import (
    REWARDS,
    RewardFunctionError,
    RewardScorer,
    accuracy_reward,
    box_accuracy_reward,
    format_reward,
    get_reward,
    make_box_accuracy_reward,
)
from grposcope.rewards.extract import (
    answers_match,
    completion_text,
    extract_answer,
    last_boxed,
    normalize_answer,
    parse_number,
)

POW_TOWER = r"The result is \boxed{9^{9^{9^{9^{9}}}}}"  # math-verify tries to evaluate it: hangs unbounded
DEEP_BRACES = r"\boxed{" + "{" * 10_000 + "1" + "}" * 10_000 + "}"  # math-verify's parser hangs on it


def chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so \boxed{42}.", "42"),
        (r"first \boxed{1}, then \boxed{2}", "2"),  # the last box wins
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # nested braces
        (r"\boxed{a{b{c}}d}", "a{b{c}}d"),  # deeper nesting
        (r"\boxed {x+1}", "x+1"),  # space before the brace
        (r"\fbox{7}", "7"),
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),  # escaped braces do not count
        (r"\boxed{3} and a cut-off \boxed{4", "3"),  # an unclosed box is ignored
        (r"\boxed{\boxed{5}}", r"\boxed{5}"),  # nested boxes: the outer one closes last
        (r"\boxed{}", ""),
        ("no box here", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_last_boxed_is_linear_on_deep_nesting():
    # 10,000 nested braces inside the box: the content is everything between the outer braces.
    assert last_boxed(DEEP_BRACES) == "{" * 10_000 + "1" + "}" * 10_000
    # 20,000 unclosed boxes: a quadratic scan would take 2e8+ steps; none closes, so no answer.
    assert last_boxed(r"\boxed{" * 20_000) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"Thus \boxed{\frac{1}{2}}.", r"\frac{1}{2}"),
        ("The answer is 1,234.", "1,234"),  # trailing period stripped, separator kept for parse_number
        ("the FINAL ANSWER IS $17$.", "17"),  # any case, `$` stripped
        ("Final answer: **42**", "42"),  # markdown bold stripped
        ("The answer is 12 apples. Then 5 more.", "12"),  # phrase starts with a number: that number
        ("The answer is 3.5. Done", "3.5"),  # a decimal point is not a sentence end
        ("It drops to -3.75 degrees", "-3.75"),  # negative decimal, last number
        ("from 1,000 to 2,500,000 people", "2,500,000"),  # thousands separators
        ("x = 3-5", "5"),  # a minus after a digit is subtraction, not a sign
        ("1, 2, 3", "3"),  # a comma followed by a space is not a separator
        (r"\boxed{} but 9", "9"),  # an empty box counts as no box
        ("no number at all", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1,234", 1234.0),
        ("-1,234.5", -1234.5),
        ("$3.50$.", 3.5),
        ("-0.25", -0.25),
        ("1e-6", 1e-6),
        (r"\frac{1}{2}", 0.5),
        (r"-\dfrac{3}{4}", -0.75),
        ("1/4", 0.25),
        (r"50\%", 50.0),  # MATH writes 50\% for the answer 50
        ("1,2", None),  # a tuple, not a number: a separator needs three digits after it
        ("x+1", None),
        ("1/0", None),
        ("", None),
    ],
)
def test_parse_number(text, expected):
    assert parse_number(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"$\text{ 1, 2 }$.", "1,2"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"\dfrac{1}{2}", r"\frac{1}{2}"),
        (r"\textbf{\text{Yes}}", "Yes"),
        ("X", "X"),  # case is kept
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_answers_match_numeric_and_string():
    assert answers_match("1,234", "1234")
    assert answers_match("0.5", r"\frac{1}{2}")
    assert answers_match("1000000.5", "1000000")  # |0.5| <= 1e-6 * 1000000.5 = 1.0000005
    assert not answers_match("1000002", "1000000")  # |2| > 1e-6 * 1000002 = 1.000002
    assert answers_match(r"\text{(A)}", "(A)")
    assert not answers_match("(A)", "(B)")
    assert not answers_match("", "")  # an empty answer never matches


def test_completion_text_for_chat_messages():
    assert completion_text(chat("hi")) == "hi"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert completion_text(parts) == "ab"


# ---------------------------------------------------------------- built-in rewards


def test_accuracy_reward_string_and_chat():
    completions = [r"so \boxed{2}", "The answer is 2.", "I think 3", "nothing", r"\boxed{0.50}"]
    answers = ["2", "2", "2", "2", r"\frac{1}{2}"]
    # box 2 == 2; phrase 2 == 2; last number 3 != 2; no answer; 0.50 == 1/2 numerically
    expected = [1.0, 1.0, 0.0, 0.0, 1.0]
    assert accuracy_reward(["p"] * 5, completions, answer=answers, level=[1] * 5) == expected
    prompts = [[{"role": "user", "content": "p"}]] * 5
    chats = [chat(c) for c in completions]
    assert accuracy_reward(prompts, chats, answer=answers, completion_ids=[[1]] * 5) == expected


def test_accuracy_reward_reference_from_solution_or_none():
    completions = ["= 7", "= 7", "= 7", "= 7"]
    solutions = [r"so \boxed{7}", r"\boxed{8}", "no box in this solution", None]
    answers = [None, None, None, None]
    # the solution's last box is the reference; without one the sample has no reference -> None
    assert accuracy_reward(None, completions, answer=answers, solution=solutions) == [1.0, 0.0, None, None]
    assert accuracy_reward(None, ["= 7"], answer=[7]) == [1.0]  # a non-string answer column
    assert accuracy_reward(None, ["= 7"]) == [None]  # no reference column at all


def test_format_reward():
    completions = [r"\boxed{5}", r"\boxed{}", r"\boxed{ }", r"\boxed{5", "5", r"\fbox{x}"]
    assert format_reward(None, completions, answer=["5"] * 6) == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert format_reward(None, [chat(r"\boxed{1}"), chat("1")]) == [1.0, 0.0]


def test_box_accuracy_reward_math_verify_equivalences():
    completions = [
        r"half: \boxed{\frac{1}{2}}",  # 1/2 == 0.5
        r"\boxed{2}",  # == "2"
        "The answer is 2",  # strict: no box -> 0.0
        r"\boxed{3}",  # wrong
        r"\boxed{2} oops, no: \boxed{4}",  # only the last box counts
        r"\boxed{0.5}",  # gold from the solution's last box
        r"\boxed{1}",  # no gold -> None
    ]
    answers = ["0.5", "2", "2", "2", "2", None, None]
    solutions = [None, None, None, None, None, r"We get \boxed{\frac{1}{2}}.", None]
    expected = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, None]
    rewards = box_accuracy_reward(None, completions, answer=answers, solution=solutions, level=[1] * 7)
    assert rewards == expected
    chats = [chat(c) for c in completions]
    assert box_accuracy_reward(None, chats, answer=answers, solution=solutions) == expected


def test_box_accuracy_reward_bounds_pathological_latex_in_any_thread():
    reward = make_box_accuracy_reward(timeout_s=0.5)
    completions = [POW_TOWER, DEEP_BRACES, r"\boxed{2}"]
    # both pathological samples exceed 0.5 s, are killed and score 0.0; the worker is restarted for the third
    assert reward(None, completions, answer=["2", "2", "2"]) == [0.0, 0.0, 1.0]
    out = {}
    run = lambda: out.update(r=reward(None, [POW_TOWER, r"\boxed{2}"], answer=[2, 2]))  # noqa: E731
    worker = threading.Thread(target=run)
    worker.start()
    worker.join(30)
    assert out["r"] == [0.0, 1.0]


def test_registry():
    assert REWARDS.names() == ["accuracy_reward", "box_accuracy_reward", "format_reward"]
    assert get_reward("format_reward") is format_reward
    with pytest.raises(ValueError, match="unknown reward function 'nope'; known: accuracy_reward"):
        get_reward("nope")
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        make_box_accuracy_reward(0)


# ---------------------------------------------------------------- scorer


def const(values, name):
    def f(prompts, completions, **kwargs):
        return list(values)

    f.__name__ = name
    return f


def test_scorer_weights_and_none_hand_computed():
    f1 = const([1.0, 0.0, None, 1.0], "f1")
    f2 = const([0.5, None, None, 1.0], "f2")
    scorer = RewardScorer([f1, f2], reward_weights=[2.0, 1.0])
    result = scorer.score(["p"] * 4, ["c"] * 4, {"answer": ["1"] * 4})
    # s0: 2*1 + 1*0.5 = 2.5;  s1: 2*0 + (None skipped) = 0;  s2: all None -> 0;  s3: 2*1 + 1*1 = 3
    assert result.rewards.dtype == torch.float32
    assert result.rewards.tolist() == [2.5, 0.0, 0.0, 3.0]
    nan = float("nan")
    expected = torch.tensor([[1.0, 0.5], [0.0, nan], [nan, nan], [1.0, 1.0]])
    assert torch.equal(torch.isnan(result.per_function), torch.isnan(expected))
    assert torch.allclose(result.per_function.nan_to_num(-1), expected.nan_to_num(-1))
    assert result.metrics["reward/f1/mean"] == pytest.approx(2 / 3, abs=1e-12)  # (1 + 0 + 1) / 3
    assert result.metrics["reward/f2/mean"] == 0.75  # (0.5 + 1) / 2
    assert result.metrics["reward/none_frac"] == 0.25  # sample 2 only: 1 / 4
    assert result.metrics["reward/errors"] == 0.0


def test_scorer_default_weights_names_and_columns():
    seen = {}

    def spy(prompts, completions, answer, completion_ids, **kwargs):
        seen.update(answer=answer, ids=completion_ids, extra=sorted(kwargs))
        return [0.25] * len(completions)

    scorer = RewardScorer(["accuracy_reward", spy, accuracy_reward])
    assert scorer.names == ["accuracy_reward", "spy", "accuracy_reward_2"]
    columns = {"answer": ["2", "3"], "completion_ids": [[5], [6, 7]], "level": [1, 2]}
    result = scorer.score(["p", "p"], [r"\boxed{2}", r"\boxed{2}"], columns)
    # weights 1: s0 = 1 + 0.25 + 1 = 2.25;  s1 = 0 + 0.25 + 0 = 0.25
    assert result.rewards.tolist() == [2.25, 0.25]
    # the other column, and the three keywords every function gets (TRL 1.16's convention)
    extra = ["level", "log_extra", "log_metric", "trainer_state"]
    assert seen == {"answer": ["2", "3"], "ids": [[5], [6, 7]], "extra": extra}
    assert set(result.metrics) == {
        "reward/accuracy_reward/mean", "reward/spy/mean", "reward/accuracy_reward_2/mean",
        "reward/errors", "reward/none_frac",
    }
    assert result.metrics["reward/accuracy_reward/mean"] == 0.5  # (1 + 0) / 2


def test_scorer_all_none_function_mean_is_nan():
    result = RewardScorer(accuracy_reward).score(["p"], ["= 1"], {})
    assert result.rewards.tolist() == [0.0]
    assert math.isnan(result.metrics["reward/accuracy_reward/mean"])
    assert result.metrics["reward/none_frac"] == 1.0


def test_scorer_configuration_errors():
    with pytest.raises(ValueError, match="reward_weights has 1 entries but there are 2 reward functions"):
        RewardScorer([accuracy_reward, format_reward], reward_weights=[1.0])
    with pytest.raises(ValueError, match="unknown reward function 'acc'"):
        RewardScorer("acc")
    with pytest.raises(ValueError, match="reward_errors must be 'raise' or 'zero'"):
        RewardScorer(format_reward, reward_errors="ignore")
    with pytest.raises(ValueError, match="reward_timeout must be > 0"):
        RewardScorer(format_reward, reward_timeout=0)
    with pytest.raises(ValueError, match="column 'answer' has 1 entries for 2 completions"):
        RewardScorer(format_reward).score(["p", "q"], ["a", "b"], {"answer": ["1"]})


def raises_on_boom(prompts, completions, **kwargs):
    if any("boom" in c for c in completions):
        raise ValueError("cannot score boom")
    return [1.0] * len(completions)


def wrong_length(prompts, completions, **kwargs):
    return [1.0]


def not_a_list(prompts, completions, **kwargs):
    return 1.0


def nan_at_1(prompts, completions, **kwargs):
    return [1.0, float("nan"), 1.0]


def inf_at_2(prompts, completions, **kwargs):
    return [1.0, 1.0, float("inf")]


def string_at_0(prompts, completions, **kwargs):
    return ["1.0", 1.0, 1.0]


def huge_int_at_1(prompts, completions, **kwargs):
    return [1, 10**400, 1]  # a Python int no float holds: float() raises OverflowError


def beyond_float32_at_0(prompts, completions, **kwargs):
    return [1e308, 1.0, 1.0]  # a finite float64 that the float32 rewards turn into inf


PROMPTS = ["prompt zero", "prompt one", "prompt two"]
COMPLETIONS = ["completion zero", "completion one", "completion boom two"]

# function, problem in the message, sample shown, samples zero-scored in "zero" mode
ERROR_CASES = [
    (raises_on_boom, "raised ValueError: cannot score boom", 2, [0, 1, 2]),
    (wrong_length, "returned 1 values for 3 completions", 0, [0, 1, 2]),
    (not_a_list, "returned a float, not a list of 3 values", 0, [0, 1, 2]),
    (nan_at_1, "returned nan", 1, [1]),
    (inf_at_2, "returned inf", 2, [2]),
    (string_at_0, "returned a non-number (str '1.0')", 0, [0]),
    (huge_int_at_1, "returned a number too large for a float (about 10^400)", 1, [1]),
    (beyond_float32_at_0, "returned 1e+308, beyond the float32 range rewards are trained in (|r| <= 3.4e+38)", 0,
     [0]),
]


@pytest.mark.parametrize("func, problem, shown, _", ERROR_CASES, ids=lambda x: getattr(x, "__name__", ""))
def test_scorer_errors_raise_with_function_problem_and_sample(func, problem, shown, _):
    scorer = RewardScorer([format_reward, func])
    with pytest.raises(RewardFunctionError) as info:
        scorer.score(PROMPTS, COMPLETIONS, {"answer": ["1", "2", "3"]})
    message = str(info.value)
    assert f"reward function {func.__name__!r} {problem}" in message
    assert f"prompt[{shown}]: {PROMPTS[shown]!r}" in message
    assert f"completion[{shown}]: {COMPLETIONS[shown]!r}" in message
    assert "reward_errors='zero'" in message
    assert info.value.function == func.__name__


@pytest.mark.parametrize("func, _, shown, zeroed", ERROR_CASES, ids=lambda x: getattr(x, "__name__", ""))
def test_scorer_errors_zero_mode_scores_zero_counts_and_warns_once(func, _, shown, zeroed, caplog):
    scorer = RewardScorer([const([0.5, 0.5, 0.5], "half"), func], reward_errors="zero")
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        first = scorer.score(PROMPTS, COMPLETIONS, {})
        second = scorer.score(PROMPTS, COMPLETIONS, {})
    # zero-scored samples: 0.5 + 0 = 0.5; the others: 0.5 + 1 = 1.5
    expected = [0.5 if i in zeroed else 1.5 for i in range(3)]
    assert first.rewards.tolist() == expected
    assert second.rewards.tolist() == expected
    assert first.metrics["reward/errors"] == len(zeroed) == second.metrics["reward/errors"]
    warnings = [r for r in caplog.records if func.__name__ in r.getMessage()]
    assert len(warnings) == 1  # once per function, not once per call
    assert COMPLETIONS[shown] in warnings[0].getMessage()


def test_scorer_timeout_raise_and_zero():
    release = threading.Event()

    def slow(prompts, completions, **kwargs):
        release.wait(10)  # ends as soon as the test is done with it
        return [1.0] * len(completions)

    try:
        expected = r"'slow' did not return within reward_timeout=0.3 s"
        with pytest.raises(RewardFunctionError, match=expected) as info:
            RewardScorer(slow, reward_timeout=0.3).score(PROMPTS, COMPLETIONS, {})
        assert "completion[0]: 'completion zero'" in str(info.value)
        assert "raise reward_timeout" in str(info.value)
        result = RewardScorer([slow, format_reward], reward_timeout=0.3, reward_errors="zero").score(
            PROMPTS, COMPLETIONS, {}
        )
        assert result.rewards.tolist() == [0.0, 0.0, 0.0]  # slow -> 0, format_reward -> 0 (no box)
        assert result.metrics["reward/errors"] == 3.0
    finally:
        release.set()


def test_scorer_signal_alarm_function_gets_a_hint_and_runs_without_timeout():
    def uses_alarm(prompts, completions, **kwargs):
        previous = signal.signal(signal.SIGALRM, signal.SIG_DFL)  # raises outside the main thread
        signal.signal(signal.SIGALRM, previous)
        return [1.0] * len(completions)

    with pytest.raises(RewardFunctionError, match="pass reward_timeout=None"):
        RewardScorer(uses_alarm).score(["p"], ["c"], {})
    # reward_timeout=None calls it in this (main) thread, where signals work
    assert RewardScorer(uses_alarm, reward_timeout=None).score(["p"], ["c"], {}).rewards.tolist() == [1.0]


def test_scorer_missing_kwargs_gets_a_hint():
    def no_kwargs(prompts, completions):
        return [1.0] * len(completions)

    with pytest.raises(RewardFunctionError, match=r"add \*\*kwargs"):
        RewardScorer(no_kwargs).score(["p"], ["c"], {"answer": ["1"]})


def test_scorer_runs_box_accuracy_with_its_own_bound_inside_the_call_bound():
    # The scorer's call runs in a worker thread; the per-sample bound (a killed process) still works there.
    box = make_box_accuracy_reward(timeout_s=0.5)
    scorer = RewardScorer([box, "format_reward"], reward_weights=[1.0, 0.1])
    result = scorer.score(["p"] * 3, [POW_TOWER, r"\boxed{2}", "2"], {"answer": ["2", "2", "2"]})
    # s0: 0 + 0.1*1 = 0.1;  s1: 1 + 0.1 = 1.1;  s2: 0 + 0 = 0
    assert torch.allclose(result.rewards, torch.tensor([0.1, 1.1, 0.0]))
    assert result.metrics["reward/errors"] == 0.0


def test_math_verifier_pool_warm_up_and_close():
    from grposcope.rewards.verifier import MathVerifier

    verifier = MathVerifier()
    verifier.warm_up()
    pairs = [
        (r"\boxed{2}", r"\boxed{2}"),
        (r"\boxed{\frac{1}{3}}", r"\boxed{0.333333}"),
        (r"\boxed{2}", r"\boxed{x}"),
    ]
    # 1/3 vs 0.333333: math-verify rounds floats to 6 places -> equal; 2 vs x -> not equal
    assert verifier.verify_many(pairs, timeout_s=5.0) == [True, True, False]
    verifier.close()
    assert verifier.verify_many(pairs[:1], timeout_s=5.0) == [True]  # a closed pool starts a new worker
    verifier.close()
