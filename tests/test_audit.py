"""grposcope.reports.audit and `grposcope audit-rewards`: verifiers on hand-made pairs whose every verdict is
known, the disagreement counts worked by hand, the all-wrong groups one verifier alone makes, and the CLI.

math-verify runs in grposcope's worker process (rewards/verifier.py), one pool per process: every test here
that uses it reuses the same worker.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import grposcope.cli.audit as audit_cli  # registers audit-rewards on the app
from grposcope.cli.app import app
from grposcope.reports import audit as audit_module
from grposcope.reports.audit import (
    DEFAULT_THRESHOLD,
    DEFAULT_VERIFIERS,
    AuditPair,
    Verdict,
    accuracy,
    audit,
    compare,
    groups_of,
    run_verifiers,
    shorten,
)
from grposcope.reports.audit_input import read_audit_pairs

pytest.importorskip("math_verify")

# (completion, answer) -> the verdict of math_verify, boxed_exact, last_number, grposcope_default (1 right,
# 0 wrong, None cannot judge), and why.
CASES = [
    # math-verify: 1/2 == 0.5; boxed_exact: "1/2" != "0.5"; last number 2; accuracy_reward parses 1/2 = 0.5
    ("\\boxed{1/2}", "0.5", (1, 0, 0, 1)),
    # math-verify reads the last expression, 18; no box; last number 18; "the answer is 17" comes first
    ("The answer is 17. Check: 17 + 1 = 18", "17", (0, 0, 0, 1)),
    # the box says 12, the last number is 13
    ("\\boxed{12} apples, i.e. 13 boxes", "12", (1, 1, 0, 1)),
    # no box: only boxed_exact says wrong
    ("11 + 6 = 17", "17", (1, 0, 1, 1)),
    # an answer that is no number: last_number cannot judge
    ("\\boxed{x+1}", "x+1", (1, 1, None, 1)),
    # equivalent, not equal: only math-verify says right
    ("\\boxed{1+x}", "x+1", (1, 0, None, 0)),
    # no answer at all: wrong for everyone (a reward function would score it 0)
    ("no idea", "5", (0, 0, 0, 0)),
    # no reference answer: nobody can judge
    ("\\boxed{5}", None, (None, None, None, None)),
]
NAMES = list(DEFAULT_VERIFIERS)  # math_verify, boxed_exact, last_number, grposcope_default


def _write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _pairs_file(tmp_path) -> str:
    return _write_jsonl(tmp_path / "pairs.jsonl", [{"completion": c, "answer": a} for c, a, _ in CASES])


@pytest.fixture(scope="module")
def case_verdicts(tmp_path_factory):
    """Every verifier on CASES (math-verify's worker starts here once, about 1 s)."""
    pairs = read_audit_pairs(_pairs_file(tmp_path_factory.mktemp("pairs")))
    return pairs, run_verifiers(pairs, NAMES, timeout_s=10.0)


def _rights(verdicts):
    return [None if v.right is None else int(v.right) for v in verdicts]


# ---------------------------------------------------------------- the verifiers


def test_each_verifier_gives_the_verdict_worked_out_by_hand(case_verdicts):
    _, verdicts = case_verdicts
    for k, name in enumerate(NAMES):
        assert _rights(verdicts[name]) == [expected[k] for _, _, expected in CASES], name
    # what the string verifiers read as the answer of the first pairs
    assert [v.extracted for v in verdicts["boxed_exact"][:4]] == ["1/2", None, "12", None]
    assert [v.extracted for v in verdicts["last_number"][:4]] == ["2", "18", "13", "17"]
    assert [v.extracted for v in verdicts["grposcope_default"][:4]] == ["1/2", "17", "12", "17"]


def test_accuracy_and_disagreements_counted_by_hand(case_verdicts):
    _, v = case_verdicts
    # right / judged: math_verify pairs 1,3,4,5,6 of 1-7; boxed_exact 3,5; last_number 4 of 1,2,3,4,7;
    # grposcope_default 1,2,3,4,5
    assert [accuracy(v[name]) for name in NAMES] == [(5, 7), (2, 7), (1, 5), (5, 7)]
    # (judged by both, A right & B wrong, A wrong & B right), pairs numbered from 1:
    # math_verify/boxed_exact on 1-7: 1, 4, 6 one way, none the other
    assert compare(v["math_verify"], v["boxed_exact"]) == (7, 3, 0)
    # math_verify/last_number on 1,2,3,4,7: 1 and 3 one way
    assert compare(v["math_verify"], v["last_number"]) == (5, 2, 0)
    # math_verify/grposcope_default: 6 (1+x) one way, 2 (the check after the answer) the other
    assert compare(v["math_verify"], v["grposcope_default"]) == (7, 1, 1)
    # boxed_exact/last_number on 1,2,3,4,7: 3 (box 12, then 13) one way, 4 (no box) the other
    assert compare(v["boxed_exact"], v["last_number"]) == (5, 1, 1)
    assert compare(v["boxed_exact"], v["grposcope_default"]) == (7, 0, 3)  # 1, 2, 4
    assert compare(v["last_number"], v["grposcope_default"]) == (5, 0, 3)  # 1, 2, 3
    report = audit(*case_verdicts, threshold=0.3, examples=2)
    rates = {(c.a, c.b): c.rate for c in report.comparisons}
    assert rates[("math_verify", "grposcope_default")] == pytest.approx(2 / 7)  # 0.286 <= 0.3: not flagged
    assert [(c.a, c.b) for c in report.flagged] == [  # 3/7 = 0.43, 2/5, 2/5, 3/7, 3/5: all above 0.3
        ("math_verify", "boxed_exact"), ("math_verify", "last_number"), ("boxed_exact", "last_number"),
        ("boxed_exact", "grposcope_default"), ("last_number", "grposcope_default")]
    first = report.comparisons[0]  # math_verify / boxed_exact: the first two of pairs 1, 4, 6 (indices 0, 3)
    assert first.examples_a == [0, 3] and first.examples_b == []


def test_an_audit_without_math_verify_needs_no_worker_and_a_verifier_list_is_checked():
    with pytest.raises(ValueError, match="unknown verifier 'exact'; known: boxed_exact, grposcope_default, "
                                         "last_number, math_verify"):
        audit_module.verifier_names("boxed_exact,exact")
    with pytest.raises(ValueError, match="two verifiers at least"):
        audit_module.verifier_names("last_number, last_number")
    assert audit_module.verifier_names(" last_number,boxed_exact ,") == ["last_number", "boxed_exact"]


def test_shorten_keeps_the_end_longer_than_the_start():
    assert shorten("a  b\n c") == "a b c"
    text = "s" * 100 + "e" * 200
    # limit 30: 10 characters of the start, " … ", and the last 30 - 10 - 3 = 17 characters
    assert shorten(text, limit=30) == "s" * 10 + " … " + "e" * 17


# ---------------------------------------------------------------- groups: the collapse a verifier makes


def _chat(text):
    return [{"role": "assistant", "content": text}]


def _log_rows():
    """A completions.jsonl of G = 3 (chat completions, as the trainer writes them): 4 whole groups and a last
    one cut short by num_completions_to_print."""
    p1, p2, p3 = ([{"role": "user", "content": f"What is {q}?"}] for q in ("2 + 3", "3 + 4", "1 + 0"))
    groups = [
        (1, p1, "5", ["2 + 3 = 5", "2 + 3 = 5", "2 + 3 = 6"]),  # A: no box; last number right twice
        (1, p2, "7", ["\\boxed{7}", "\\boxed{7}", "\\boxed{8}"]),  # B: mixed for all
        (2, p1, "5", ["\\boxed{5.0}", "5", "five"]),  # C: the same prompt as A, another step: another group
        (2, p2, "7", ["6", "8", "\\boxed{9}"]),  # D: all wrong for all
        (2, p3, "1", ["1 + 0 = 1"]),  # E: cut short (1 row of 3)
    ]
    return [{"step": step, "prompt": prompt, "completion": _chat(text), "rewards": {"accuracy_reward": 0.0},
             "reward": 0.0, "advantage": 0.0, "answer": answer}
            for step, prompt, answer, texts in groups for text in texts]


def test_groups_are_step_and_prompt_and_a_cut_group_is_left_out(tmp_path):
    pairs = read_audit_pairs(_write_jsonl(tmp_path / "completions.jsonl", _log_rows()))
    assert len(pairs) == 13 and pairs[0].completion == "2 + 3 = 5" and pairs[0].line == 1
    assert groups_of(pairs) == ([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]], 1)
    # one completion per prompt is no group; pairs without a prompt have none
    assert groups_of([AuditPair("1", "1", None, (1, "p")), AuditPair("1", "1", None, (1, "q"))]) == ([], 0)
    assert groups_of([AuditPair("1", "1", None)]) == ([], 0)


def test_the_all_wrong_groups_one_verifier_alone_makes(tmp_path):
    pairs = read_audit_pairs(_write_jsonl(tmp_path / "completions.jsonl", _log_rows()))
    names = ["boxed_exact", "last_number", "grposcope_default"]
    report = audit(pairs, run_verifiers(pairs, names, timeout_s=1.0), threshold=0.05, examples=2)
    # all-wrong groups: boxed_exact A (no box), C ("5.0" is not "5" as a string; no box; "five"), D;
    # last_number and grposcope_default only D
    assert [report.all_wrong_groups(name) for name in names] == [3, 1, 1]
    by_pair = {(c.a, c.b): c for c in report.comparisons}
    box_last = by_pair[("boxed_exact", "last_number")]
    assert (box_last.collapse_by_a, box_last.collapse_by_b) == (2, 0)  # A and C
    # pair counts over all 13 rows (E included): last_number right, boxed_exact wrong on A's two "= 5",
    # C's "5.0" and "5", and E: 5 of 13; never the other way round
    assert (box_last.judged, box_last.a_only, box_last.b_only) == (13, 0, 5)
    # examples are distinct pairs: row 1 repeats row 0 ("2 + 3 = 5"), so the second example is row 6 (5.0)
    assert box_last.examples_b == [0, 6] and box_last.examples_a == []
    last_default = by_pair[("last_number", "grposcope_default")]
    assert (last_default.a_only, last_default.b_only, last_default.collapse_by_a) == (0, 0, 0)  # they agree here
    assert [(c.a, c.b) for c in report.flagged] == [("boxed_exact", "last_number"),
                                                    ("boxed_exact", "grposcope_default")]
    sentence = report.flag_sentence(box_last)
    assert sentence == ("boxed_exact and last_number disagree on 38.5% of the 13 pairs both judge (threshold "
                        "5.0%): boxed_exact marks wrong 5 answer(s) that last_number marks right; 2 group(s) are "
                        "all-wrong under boxed_exact but not under last_number, and 0 the other way round.")


# ---------------------------------------------------------------- reading the input


def test_solution_is_read_as_the_reward_functions_read_it_and_a_cut_last_line_is_skipped(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"completion": "4", "solution": "2 + 2 = \\boxed{4}"}) + "\n"
                    + json.dumps({"completion": "x", "answer": "3"}) + "\n" + '{"completion": "5", "ans')
    with pytest.warns(RuntimeWarning, match="partial last line 3"):
        pairs = read_audit_pairs(path)
    assert [(p.completion, p.answer, p.gold) for p in pairs] == [("4", "4", "\\boxed{4}"), ("x", "3", "\\boxed{3}")]


# ---------------------------------------------------------------- the command


def _run(*args):
    return CliRunner().invoke(app, ["audit-rewards", *map(str, args)])


def test_the_cli_defaults_are_the_library_defaults():
    from grposcope.rewards.builtin import VERIFY_TIMEOUT_S

    assert audit_cli._DEFAULT_VERIFIERS == ",".join(DEFAULT_VERIFIERS)
    assert audit_cli._DEFAULT_THRESHOLD == DEFAULT_THRESHOLD
    assert audit_cli.VERIFY_TIMEOUT_S == VERIFY_TIMEOUT_S


def test_the_command_on_a_pairs_file_with_math_verify(tmp_path, case_verdicts):
    out = tmp_path / "audit.json"
    result = _run(_pairs_file(tmp_path), "--examples", 1, "--json", out)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["pairs"] == 8 and report["flagged"] is True and report["groups"] == {"whole": 0, "partial": 0}
    assert report["verifiers"]["math_verify"] == {"right": 5, "judged": 7, "accuracy": 5 / 7,
                                                  "all_wrong_groups": 0}
    mv_default = next(d for d in report["disagreements"] if (d["a"], d["b"]) == ("math_verify", "grposcope_default"))
    assert (mv_default["judged"], mv_default["a_right_b_wrong"], mv_default["a_wrong_b_right"]) == (7, 1, 1)
    (example,) = mv_default["examples"]["a_wrong_b_right"]  # pair 2: the check after the answer
    assert example["line"] == 2 and example["answer"] == "17"
    # what math-verify extracted comes from a second math-verify process, for the examples only
    assert example["verifiers"]["math_verify"] == {"right": False, "extracted": "18"}
    assert example["verifiers"]["grposcope_default"] == {"right": True, "extracted": "17"}
    text = " ".join(result.output.split())
    assert "math_verify wrong, grposcope_default right: 1 of 1" in text
    assert "FLAG: math_verify and grposcope_default disagree on 28.6% of the 7 pairs both judge" in text
    assert "Why it matters: a verifier that marks right answers wrong manufactures all-wrong collapse" in text
    again = _run(_pairs_file(tmp_path), "--json", out)  # an existing --json file is kept
    assert again.exit_code == 2 and "already exists; pass --overwrite" in again.output


def test_a_json_path_that_is_a_folder_is_named_as_such_and_overwrite_is_not_offered(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    for extra in ([], ["--overwrite"]):  # --overwrite cannot replace a folder with a file
        result = _run(_pairs_file(tmp_path), "--json", folder, *extra)
        text = " ".join(result.output.split())
        assert result.exit_code == 2 and "--overwrite" not in text
        assert f"--json {folder} is a folder; name a file in it, e.g. --json {folder / 'audit.json'}" in text


def test_the_command_on_a_completions_log_and_fail_on_flag(tmp_path):
    log = _write_jsonl(tmp_path / "completions.jsonl", _log_rows())
    verifiers = ["--verifiers", "boxed_exact,last_number,grposcope_default"]
    result = _run(log, *verifiers, "--examples", 0)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "13 pairs, 4 groups (and 1 cut short, left out)" in text
    assert "FLAG: boxed_exact and last_number disagree on 38.5%" in text
    assert _run(log, *verifiers, "--fail_on_flag").exit_code == audit_cli.FLAGGED_EXIT_CODE == 1
    # 5/13 = 0.385 is the largest disagreement: nothing above 0.5, so nothing to fail on
    calm = _run(log, *verifiers, "--fail_on_flag", "--threshold", 0.5)
    assert calm.exit_code == 0 and "No two verifiers disagree on more than 50.0%" in " ".join(calm.output.split())


def test_many_pairs_show_plain_progress_lines_when_not_a_terminal(tmp_path):
    rows = [{"completion": f"{i} + 0 = {i}", "answer": str(i)} for i in range(audit_cli.PROGRESS_MIN_PAIRS)]
    result = _run(_write_jsonl(tmp_path / "many.jsonl", rows), "--verifiers", "last_number,boxed_exact")
    assert result.exit_code == 0, result.output
    # chunks of 32 pairs; a line at the first chunk, then once 20 (a tenth) more are done, and at the end
    assert "verified 32/200 pairs" in result.stderr and "verified 200/200 pairs" in result.stderr


def test_the_help_shows_the_examples_unwrapped():
    result = CliRunner().invoke(app, ["audit-rewards", "--help"])
    assert result.exit_code == 0
    lines = [line.strip() for line in result.output.splitlines()]
    assert "grposcope audit-rewards output/quickstart/completions.jsonl" in lines
    assert "grposcope audit-rewards pairs.jsonl --fail_on_flag --json audit.json" in lines


def _old_log(tmp_path):
    rows = [{k: v for k, v in row.items() if k != "answer"} for row in _log_rows()]
    return _write_jsonl(tmp_path / "old.jsonl", rows)


@pytest.mark.parametrize("make_args, message", [
    (lambda t: [t / "nowhere.jsonl"], "no file at"),
    (lambda t: [_write_jsonl(t / "empty.jsonl", [])], "empty.jsonl is empty"),
    (lambda t: [(t / "bad.jsonl").write_text('{"completion": "1", "answer": "1"}\nnot json\n{"completion": "2"}\n')
                and t / "bad.jsonl"], "bad.jsonl: line 2 is not JSON"),
    (lambda t: [_old_log(t)], "old.jsonl has no 'answer' column: it was written before grposcope logged"),
    (lambda t: [_write_jsonl(t / "p.jsonl", [{"completion": "1", "answer": "1"}, {"completion": "2"}])],
     "p.jsonl: line 2 has neither 'answer' nor 'solution'"),
    (lambda t: [_write_jsonl(t / "p.jsonl", [{"text": "1", "answer": "1"}])], "line 1 has no 'completion' key"),
    (lambda t: [_write_jsonl(t / "p.jsonl", [{"completion": "1", "answer": None}])], "no line has a reference"),
    (lambda t: [_write_jsonl(t / "p.jsonl", [{"completion": 12, "answer": "12"}])], "line 1: the completion is "
                                                                                    "a int"),
    (lambda t: [_pairs_file(t), "--verifiers", "math_verify,exact"], "unknown verifier 'exact'; known: "
                                                                      "boxed_exact, grposcope_default"),
    (lambda t: [_pairs_file(t), "--threshold", 1.5], "--threshold must be in [0, 1]"),
    (lambda t: [_pairs_file(t), "--threshold", -0.1], "--threshold must be in [0, 1]"),
    (lambda t: [_pairs_file(t), "--examples", -1], "--examples must be >= 0"),
    (lambda t: [_pairs_file(t), "--timeout_s", 0], "--timeout_s must be > 0"),
])
def test_bad_input_is_one_line_before_any_verification(tmp_path, monkeypatch, make_args, message):
    def no_verification(*args, **kwargs):
        raise AssertionError("verification started")

    monkeypatch.setattr(audit_module, "run_verifiers", no_verification)
    result = _run(*make_args(tmp_path))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


def test_the_verdict_of_a_pair_nobody_can_judge_is_none():
    (verdict,) = audit_module.last_number_verifier([AuditPair("the answer is 4", None, None)], 1.0)
    assert verdict == Verdict(None, "4")
