"""The reward audit: several verifiers score the same (completion, answer) pairs, and where they disagree.

Why it matters: a verifier that marks right answers wrong manufactures all-wrong collapse. A group whose every
completion scores 0 has zero GRPO advantage and teaches nothing, whether the policy failed or the verifier
did; ACR cannot tell the two apart, comparing verifiers can.

Verifiers (`VERIFIERS`; each gives True = right, False = wrong, None = cannot judge, plus what it extracted):
- `math_verify`: math-verify's own extraction (the last LaTeX or plain expression in the whole completion)
  checked for equivalence with the gold answer, in grposcope's bounded worker process (rewards/verifier.py);
- `boxed_exact`: the normalised content of the last `\\boxed{}` equals the normalised answer; no box is wrong;
- `last_number`: the last number in the completion equals the answer numerically; None when the answer is no
  number;
- `grposcope_default`: grposcope's `accuracy_reward` (last box, else "the answer is X", else the last number;
  compared as numbers or normalised strings), the trainer's default rule.
Every verifier gives None for a pair without a reference answer. A completion in which a verifier finds no
answer is wrong, as a reward function would score it.

Inputs (`audit_input.read_audit_pairs`): a grposcope completions.jsonl with its `answer` column, a JSONL of
`{"completion": ..., "answer": ...}` pairs (`solution` accepted as by the reward functions), a stock TRL output
folder (completions/*.parquet; the reference answers in a column the user names, a log_extra column) or a verl
rollout dump folder (`{step}.jsonl`; the reference answers in `gts`). Rows with a prompt form groups by (step,
prompt), so that the all-wrong groups each verifier makes can be counted.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ..core.registry import Registry
from ..rewards.builtin import accuracy_reward
from ..rewards.extract import (
    answers_match,
    extract_answer,
    last_boxed,
    last_number,
    normalize_answer,
    parse_number,
)

DEFAULT_VERIFIERS = ("math_verify", "boxed_exact", "last_number", "grposcope_default")
DEFAULT_THRESHOLD = 0.05
CHUNK = 32  # pairs verified between two progress reports
WHY_IT_MATTERS = ("a verifier that marks right answers wrong manufactures all-wrong collapse: a group whose "
                  "every completion scores 0 gets zero advantage and teaches nothing")


@dataclass(frozen=True)
class AuditPair:
    """One completion and its reference. `answer` as accuracy_reward reads it, `gold` as math-verify parses
    it (None: no reference); `group`: (step, prompt as JSON) when the row has a prompt; `line` in the file."""

    completion: str
    answer: str | None
    gold: str | None
    group: tuple[Any, str] | None = None
    line: int = 0


@dataclass(frozen=True)
class Verdict:
    """One verifier on one pair: right (True), wrong (False) or cannot judge (None), and what it read as the
    completion's answer (None: nothing, or not known)."""

    right: bool | None
    extracted: str | None = None


Verifier = Callable[[Sequence[AuditPair], float], "list[Verdict]"]
VERIFIERS: Registry[list] = Registry("verifier")


# ---------------------------------------------------------------- the verifiers


@VERIFIERS.register("math_verify")
def math_verify(pairs: Sequence[AuditPair], timeout_s: float) -> list[Verdict]:
    """math-verify's parse of the whole completion against the gold answer, `timeout_s` at most per pair.
    The worker reports no extraction (see `math_verify_extractions`); a pair it gives up on is wrong."""
    from ..rewards.verifier import default_verifier  # starts a process: only when used

    verdicts = [Verdict(None) for _ in pairs]
    todo = [(i, pair.gold, pair.completion) for i, pair in enumerate(pairs) if pair.gold is not None]
    if todo:
        matches = default_verifier().verify_many([(gold, completion) for _, gold, completion in todo], timeout_s)
        for (i, _, _), match in zip(todo, matches):
            verdicts[i] = Verdict(bool(match))
    return verdicts


@VERIFIERS.register("boxed_exact")
def boxed_exact(pairs: Sequence[AuditPair], timeout_s: float) -> list[Verdict]:
    """The last `\\boxed{}`'s normalised content equals the normalised answer (no box, or an empty one: wrong)."""
    verdicts = []
    for pair in pairs:
        boxed = last_boxed(pair.completion)
        if pair.answer is None:
            verdicts.append(Verdict(None, boxed))
            continue
        found = normalize_answer(boxed) if boxed is not None else ""
        verdicts.append(Verdict(bool(found) and found == normalize_answer(pair.answer), boxed))
    return verdicts


@VERIFIERS.register("last_number")
def last_number_verifier(pairs: Sequence[AuditPair], timeout_s: float) -> list[Verdict]:
    """The completion's last number equals the answer (relative tolerance 1e-6); no number: wrong; an answer
    that is no number (an expression, a tuple) cannot be judged."""
    verdicts = []
    for pair in pairs:
        found = last_number(pair.completion)
        if pair.answer is None or parse_number(pair.answer) is None:
            verdicts.append(Verdict(None, found))
            continue
        verdicts.append(Verdict(found is not None and answers_match(found, pair.answer), found))
    return verdicts


@VERIFIERS.register("grposcope_default")
def grposcope_default(pairs: Sequence[AuditPair], timeout_s: float) -> list[Verdict]:
    """accuracy_reward itself, so that the audit scores exactly what the trainer's default reward scored."""
    scores = accuracy_reward(prompts=[None] * len(pairs), completions=[p.completion for p in pairs],
                             answer=[p.answer for p in pairs])
    return [Verdict(None if score is None else score == 1.0, extract_answer(pair.completion))
            for pair, score in zip(pairs, scores)]


def verifier_names(text: str) -> list[str]:
    """"a,b" -> ["a", "b"], each once and registered (an unknown one fails with the known ones); two at least."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    for name in names:
        VERIFIERS.get(name)
    if len(names) < 2:
        raise ValueError(f"--verifiers needs two verifiers at least to compare, got {names}; known: "
                         f"{', '.join(VERIFIERS.names())}")
    return names


def run_verifiers(pairs: Sequence[AuditPair], names: Sequence[str], timeout_s: float,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, list[Verdict]]:
    """Every verifier's verdict on every pair, in `CHUNK`s of pairs so that `progress(done, total)` moves."""
    verdicts: dict[str, list[Verdict]] = {name: [] for name in names}
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start:start + CHUNK]
        for name in names:
            verdicts[name].extend(VERIFIERS.get(name)(chunk, timeout_s))
        if progress is not None:
            progress(start + len(chunk), len(pairs))
    return verdicts


_EXTRACT_SCRIPT = """
import json, logging, sys
logging.disable(logging.CRITICAL)
from math_verify import parse
out = []
for text in json.load(sys.stdin):
    try:
        found = parse(text, parsing_timeout=None)
        out.append(str(found[-1]) if found else None)
    except Exception:
        out.append(None)
sys.stdout.write(json.dumps(out))
"""


def math_verify_extractions(texts: list[str], timeout_s: float) -> list[str | None]:
    """What math-verify reads as the answer of each text, for the few examples a report shows.

    The verifier's worker protocol answers match or not only, so this runs math-verify's `parse` once more
    in a throwaway process, bounded as a whole by `timeout_s` per text plus start-up; on any failure the
    extractions are None ("not known")."""
    if not texts:
        return []
    try:
        done = subprocess.run([sys.executable, "-c", _EXTRACT_SCRIPT], input=json.dumps(texts),
                              capture_output=True, text=True, timeout=30.0 + timeout_s * len(texts))
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, OSError, ValueError):
        found = None
    if not isinstance(found, list) or len(found) != len(texts):
        return [None] * len(texts)
    return found


# ---------------------------------------------------------------- comparing the verifiers


def accuracy(verdicts: Sequence[Verdict]) -> tuple[int, int]:
    """(right, judged): the pairs marked right, and the pairs the verifier could judge."""
    judged = [v.right for v in verdicts if v.right is not None]
    return sum(judged), len(judged)


def compare(a: Sequence[Verdict], b: Sequence[Verdict]) -> tuple[int, int, int]:
    """(judged, a_only, b_only) over the pairs both verifiers judge: how many, how many A marks right and B
    wrong, and how many A marks wrong and B right."""
    both = [(x.right, y.right) for x, y in zip(a, b) if x.right is not None and y.right is not None]
    return len(both), sum(x and not y for x, y in both), sum(y and not x for x, y in both)


def groups_of(pairs: Sequence[AuditPair]) -> tuple[list[list[int]], int]:
    """(the pair indices of each whole group, the number of partial groups).

    A group is the rows sharing (step, prompt). completions.jsonl keeps the first num_completions_to_print
    completions of a step, group after group, so its last group may be cut short; a group smaller than the
    most common size is such a cut one and is left out, since its missing completions might be right. Groups
    of one completion are no groups (GRPO needs two)."""
    by_key: dict[Any, list[int]] = {}
    for i, pair in enumerate(pairs):
        if pair.group is not None:
            by_key.setdefault(pair.group, []).append(i)
    sizes = Counter(len(members) for members in by_key.values())
    if not sizes:
        return [], 0
    size = max(sizes, key=lambda s: (sizes[s], s))  # the most common size; on a tie, the larger
    if size < 2:
        return [], 0
    whole = [members for members in by_key.values() if len(members) >= size]
    return whole, len(by_key) - len(whole)


def group_outcome(verdicts: Sequence[Verdict], members: Sequence[int]) -> str:
    """"all_wrong", "all_right", "mixed", or "unjudged" (no member judged) for one group under one verifier."""
    judged = {verdicts[i].right for i in members if verdicts[i].right is not None}
    if not judged:
        return "unjudged"
    if judged == {False}:
        return "all_wrong"
    return "all_right" if judged == {True} else "mixed"


def collapse_made(a: Sequence[Verdict], b: Sequence[Verdict], groups: Sequence[Sequence[int]]) -> int:
    """The groups all-wrong under A but mixed or all-right under B: the all-wrong collapse A made, if B is right."""
    return sum(group_outcome(a, g) == "all_wrong" and group_outcome(b, g) in ("mixed", "all_right")
               for g in groups)


@dataclass
class Comparison:
    """Two verifiers on the pairs both judge; examples are pair indices in file order."""

    a: str
    b: str
    judged: int
    a_only: int  # A right, B wrong
    b_only: int  # A wrong, B right
    collapse_by_a: int  # groups all-wrong under A only
    collapse_by_b: int  # groups all-wrong under B only
    examples_a: list[int] = field(default_factory=list)
    examples_b: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """The share of the pairs both judge on which they disagree (nan when they judge none together)."""
        return (self.a_only + self.b_only) / self.judged if self.judged else math.nan


def _distinct(indices: list[int], pairs: Sequence[AuditPair], n: int) -> list[int]:
    """The first `n` of `indices` whose (completion, answer) has not come yet: a group often repeats a reply."""
    seen: set[tuple[str, str | None]] = set()
    kept: list[int] = []
    for i in indices:
        key = (pairs[i].completion, pairs[i].answer)
        if key not in seen and len(kept) < n:
            seen.add(key)
            kept.append(i)
    return kept


def _comparison(a: str, b: str, pairs: Sequence[AuditPair], verdicts: dict[str, list[Verdict]],
                groups: list[list[int]], examples: int) -> Comparison:
    va, vb = verdicts[a], verdicts[b]
    judged, a_only, b_only = compare(va, vb)
    only_a = [i for i, (x, y) in enumerate(zip(va, vb)) if x.right is True and y.right is False]
    only_b = [i for i, (x, y) in enumerate(zip(va, vb)) if x.right is False and y.right is True]
    return Comparison(a, b, judged, a_only, b_only, collapse_made(va, vb, groups), collapse_made(vb, va, groups),
                      _distinct(only_a, pairs, examples), _distinct(only_b, pairs, examples))


def shorten(text: str, limit: int = 200) -> str:
    """The text on one line (whitespace runs -> one space), cut in the middle to `limit` characters: answers
    sit at the end of a completion, so the end is kept longer than the start."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = limit // 3
    return flat[:head] + " … " + flat[len(flat) - (limit - head - 3):]


@dataclass
class AuditReport:
    """What `audit` found; `verdicts` and `pairs` are kept to show the examples."""

    pairs: list[AuditPair]
    verdicts: dict[str, list[Verdict]]
    threshold: float
    comparisons: list[Comparison]
    groups: list[list[int]]
    partial_groups: int

    @property
    def names(self) -> list[str]:
        return list(self.verdicts)

    @property
    def flagged(self) -> list[Comparison]:
        """The comparisons whose disagreement rate is above the threshold."""
        return [c for c in self.comparisons if c.judged and c.rate > self.threshold]

    def all_wrong_groups(self, name: str) -> int:
        return sum(group_outcome(self.verdicts[name], g) == "all_wrong" for g in self.groups)

    def flag_sentence(self, c: Comparison) -> str:
        """What a flagged pair of verifiers disagrees on, in one sentence (`WHY_IT_MATTERS` says why it matters)."""
        parts = [f"{loser} marks wrong {n} answer(s) that {winner} marks right"
                 for n, winner, loser in ((c.a_only, c.a, c.b), (c.b_only, c.b, c.a)) if n]
        if self.groups and (c.collapse_by_a or c.collapse_by_b):
            parts.append(f"{c.collapse_by_a} group(s) are all-wrong under {c.a} but not under {c.b}, and "
                         f"{c.collapse_by_b} the other way round")
        return (f"{c.a} and {c.b} disagree on {c.rate:.1%} of the {c.judged} pairs both judge (threshold "
                f"{self.threshold:.1%}): " + "; ".join(parts) + ".")

    def example(self, i: int) -> dict[str, Any]:
        """Pair `i` as shown: where it is, the answer, the shortened completion, and each verifier's view."""
        pair = self.pairs[i]
        return {"line": pair.line, "answer": pair.answer, "completion": shorten(pair.completion),
                "verifiers": {name: {"right": v[i].right, "extracted": v[i].extracted}
                              for name, v in self.verdicts.items()}}

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON values (the CLI's --json)."""
        verifiers = {}
        for name, verdicts in self.verdicts.items():
            right, judged = accuracy(verdicts)
            verifiers[name] = {"right": right, "judged": judged, "accuracy": right / judged if judged else None,
                               "all_wrong_groups": self.all_wrong_groups(name)}
        flagged = self.flagged
        return {
            "pairs": len(self.pairs), "threshold": self.threshold, "flagged": bool(flagged),
            "groups": {"whole": len(self.groups), "partial": self.partial_groups},
            "verifiers": verifiers,
            "disagreements": [{
                "a": c.a, "b": c.b, "judged": c.judged, "rate": None if math.isnan(c.rate) else c.rate,
                "a_right_b_wrong": c.a_only, "a_wrong_b_right": c.b_only,
                "groups_all_wrong_under_a_only": c.collapse_by_a, "groups_all_wrong_under_b_only": c.collapse_by_b,
                "flagged": c in flagged,
                "examples": {"a_right_b_wrong": [self.example(i) for i in c.examples_a],
                             "a_wrong_b_right": [self.example(i) for i in c.examples_b]},
            } for c in self.comparisons],
            "flags": [self.flag_sentence(c) for c in flagged],
            "why_it_matters": WHY_IT_MATTERS,
        }


def audit(pairs: Sequence[AuditPair], verdicts: dict[str, list[Verdict]], threshold: float = DEFAULT_THRESHOLD,
          examples: int = 3) -> AuditReport:
    """Compares every two verifiers of `verdicts` (in their order) on `pairs`; keeps up to `examples` distinct
    pairs of each kind of disagreement, in file order."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    groups, partial = groups_of(pairs)
    names = list(verdicts)
    comparisons = [_comparison(a, b, pairs, verdicts, groups, examples)
                   for k, a in enumerate(names) for b in names[k + 1:]]
    return AuditReport(list(pairs), dict(verdicts), threshold, comparisons, groups, partial)


def add_math_verify_extractions(report: AuditReport, timeout_s: float) -> None:
    """Fills in what math-verify extracted for the pairs the report shows as examples (see
    `math_verify_extractions`)."""
    if "math_verify" not in report.verdicts:
        return
    shown = sorted({i for c in report.comparisons for i in (*c.examples_a, *c.examples_b)})
    found = math_verify_extractions([report.pairs[i].completion for i in shown], timeout_s)
    verdicts = report.verdicts["math_verify"]
    for i, extracted in zip(shown, found):
        verdicts[i] = replace(verdicts[i], extracted=extracted)
