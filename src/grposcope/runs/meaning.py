"""Every key of a read log resolved to a metric at once, when the whole log has been read: the user's `--map`
first, then the entry of the engine the keys name (engines/), then the catalogue's TRL / verl / Hugging Face and
plain spellings, and last the key's words, checked against its values. Each reading that is not an engine's own
name is said in the output with its reason, and `--map KEY=METRIC` overrides it.

Reading by meaning (`infer`): a key is split into words (`env/all/by_group/frac_all_good` -> env, all, by,
group, frac, all, good); the words say what it is (reward, score, return; eval, val, test; acc, pass, success;
entropy; kl; clip with frac or ratio; grad with norm; loss; length, len, tokens; std; a share, a percentage or a
count of zero-std, all-good, all-bad or mixed groups), and the values say on which scale: a share lies in [0, 1],
a percentage in [0, 100], a count is a whole number (divided by the log's number of groups when a key gives it).

When two keys land on one metric, one rule decides (`RANKS`): the user's map, then an engine's own key, then a
catalogue spelling (its own order), then a plain spelling, then a reading by meaning; among equals the key that
logged more steps, then the one met first. The chosen key is read; the others fill only the steps it did not
log, and the output says which key was read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from . import catalogue as c
from .engines import Recognised, named_or_recognised

MAPPED, ENGINE, MEANING, UNKNOWN = -1, 0, 100, 199  # catalogue spellings rank 1-93 (catalogue.resolve)
HELD_OUT_WORDS = {"eval", "evaluation", "val", "valid", "validation", "test", "heldout", "holdout", "held"}
SCORE_WORDS = {"acc", "accuracy", "pass", "pass@1", "pass_at_1", "success", "solve", "solved", "correct",
               "win", "winrate"}
REWARD_WORDS = {"reward", "rewards", "score", "scores", "return", "returns"}
GOOD = {"all_good", "all_correct", "solved_all", "solve_all", "all_solved", "all_right", "all_pass", "all_success",
        "all_1", "all_ones"}
BAD = {"all_bad", "all_wrong", "solved_none", "solve_none", "none_solved", "all_fail", "all_failed", "all_zero",
       "all_0", "all_zeros", "all_incorrect"}
SAME = {"zero_std", "zero_var", "zero_variance", "all_same", "all_equal", "same_reward", "zero_adv",
        "zero_advantage", "uniform", "degenerate", "constant"}
MIXED = {"mixed"}
# the reason of a plain success share read as the training reward (collector.py may read it as held-out instead)
SUCCESS_SHARE = "its words (a training success share), values in [0, 1]"
SHARE_WORDS = {"frac", "fraction", "share", "ratio", "rate", "prop", "proportion"}
PCT_WORDS = {"pct", "percent", "percentage"}
COUNT_WORDS = {"count", "num", "n", "number", "cnt"}
GROUP_COUNTS = ("num_groups", "n_groups", "groups", "num_prompts", "n_prompts", "prompts", "batch_size",
                "num_problems", "num_questions", "groups_total", "total_groups", "prompts_total", "total_prompts")
NOT_MEAN = {"std", "min", "max", "median", "var", "sum", "count", "p10", "p50", "p90", "p25", "p75", "first", "last"}


@dataclass(frozen=True)
class Reading:
    """How one key is read: as `metric` (or kept under its own name when `metric` is the key itself), ranked
    `rank` among keys of the same metric, its values divided by `divide_by` (a number, or a key holding the
    denominator at each step), and why (said in the output unless it is an engine's own name)."""

    metric: str
    rank: int
    divide_by: float | str = 1.0
    why: str = ""
    known: bool = True
    place: int = 0  # among an engine's own keys of one metric, where its entry lists the key (first wins)


NOT_A_MEASURE = {"timing", "time", "timer", "ms", "sec", "secs", "seconds", "throughput", "mfu", "memory", "gb",
                 "mb", "per", "latency", "speed", "prompt", "prompts", "best", "worst", "maj", "majority",
                 "old", "advantage", "advantages", "slowest", "fastest", "lr", "weight", "weights", "coef"}
# PPO's KL between the old (rollout-time) and the new policy (`ppo_kl`, `ppo/policy/approxkl`) is no KL to the
# reference; a `ppo/` key is otherwise read as any other (TRL's classic PPOTrainer: `ppo/policy/clipfrac`)
NOT_REFERENCE_KL = {"coeff", "coef", "beta", "target", "approx", "ctl", "penalty", "reward", "ppo", "old"}


def words(key: str) -> list[str]:
    """A key's words, lower case, a `@N` of a statistic dropped: `Train/Policy-Entropy_Mean` -> train, policy,
    entropy, mean; `val/reward/std@32` -> val, reward, std; `pass@1` stays."""
    out = [w for w in re.split(r"[^a-z0-9@]+", key.lower()) if w]
    return [w if w.startswith("pass@") else w.split("@", 1)[0] for w in out if w.split("@", 1)[0]]


def _joined(ws: list[str]) -> str:
    return "_" + "_".join(ws) + "_"


def _score(ws: list[str]) -> bool:
    """Whether the words name a success share: acc, accuracy, pass, pass@1, pass1, success, solved, ..."""
    return _has(ws, SCORE_WORDS) or any(w.startswith(("pass@", "acc")) or re.fullmatch(r"pass_?[0-9k]+", w)
                                        for w in ws)


def _has(ws: list[str], phrases: set[str]) -> bool:
    text = _joined(ws)
    return any(f"_{p}_" in text for p in phrases)


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if isinstance(v, float) and math.isfinite(v) or isinstance(v, int)]


def _scale(ws: list[str], values: Sequence[float], groups: str | None) -> tuple[float | str, str] | None:
    """How a share-like key's values become a share in [0, 1]: (divide_by, said), or None when they cannot."""
    seen = _finite(values)
    if not seen:
        return None
    low, high = min(seen), max(seen)
    whole = all(float(v).is_integer() for v in seen)
    if low < 0:
        return None
    if _has(ws, COUNT_WORDS) or (high > 1 and whole and not _has(ws, PCT_WORDS)):
        if groups is not None:
            return groups, f"a count of groups (whole numbers up to {high:g}), divided by {groups}"
        return None
    if _has(ws, PCT_WORDS) or high > 1:
        return (100.0, "a percentage (values up to 100)") if high <= 100 else None
    return 1.0, "a share (values in [0, 1])"


def _group_key(keys: Sequence[str]) -> str | None:
    """The key that gives the number of groups a step held, if the log has one."""
    for key in keys:
        ws = words(key)
        if ws and "_".join(ws[-2:]) in GROUP_COUNTS or (ws and ws[-1] in ("groups", "prompts") and len(ws) <= 3
                                                         and _has(ws, COUNT_WORDS | {"total"})):
            return key
    return None


def infer(key: str, values: Sequence[float], keys: Sequence[str] = (), group: str | None = None) -> Reading | None:
    """The metric `key` is by its words, checked against its values; None when its words say nothing known."""
    ws = words(key)
    if not ws:
        return None
    if NOT_A_MEASURE & set(ws):  # a timer, a prompt's length, a best-of-n figure, PPO's old-vs-new KL
        return None
    held = any(w in HELD_OUT_WORDS for w in ws)
    seen = _finite(values)
    in_unit = bool(seen) and 0 <= min(seen) and max(seen) <= 1
    # the group split: a share, a percentage or a count of groups that are all one outcome
    skipped = {"skipped", "filtered", "dropped"} & set(ws) and {"groups", "group", "prompts"} & set(ws)
    for phrases, metric in ((GOOD, c.ACR_ALL_CORRECT), (BAD, c.ACR_ALL_WRONG), (SAME, c.ACR), (MIXED, c.MIXED)):
        if (_has(ws, phrases) or metric == c.ACR and skipped) and not held:
            scale = _scale(ws, values, group if group is not None else _group_key(keys))
            if scale is None:
                return Reading(key, UNKNOWN, why=f"its words say {metric}, but its values are no share, percentage "
                               "or count of groups the log gives a total for: kept as logged", known=True)
            return Reading(metric, MEANING, scale[0], f"its words ({'/'.join(ws)}): {scale[1]}")
    statistic = next((w for w in reversed(ws) if w in NOT_MEAN), "")
    if "entropy" in ws and not statistic:
        return Reading(c.ENTROPY, MEANING, why="its words (entropy)")
    if "kl" in ws and not statistic and not NOT_REFERENCE_KL & set(ws):
        return Reading(c.KL, MEANING, why="its words (kl)")
    if "clip" in ws or "clipped" in ws or "clipfrac" in ws:
        if {"length", "len", "response", "completion", "completions", "truncated", "truncation"} & set(ws):
            return Reading(c.TRUNCATED, MEANING, why="its words (clipped completions)") if in_unit else None
        side = c.CLIP_LOW if {"low", "lower"} & set(ws) else c.CLIP_HIGH if {"high", "upper"} & set(ws) else c.CLIP
        if (SHARE_WORDS & set(ws) or "clipfrac" in ws) and in_unit:
            return Reading(side, MEANING, why="its words (clip, frac/ratio), values in [0, 1]")
        if _has(ws, PCT_WORDS) and seen and 0 <= min(seen) and max(seen) <= 100:
            return Reading(side, MEANING, 100.0, "its words (clip, percent): a percentage")
        return None
    if ("truncated" in ws or "truncation" in ws) and in_unit:
        return Reading(c.TRUNCATED, MEANING, why="its words (truncated), values in [0, 1]")
    if ("grad" in ws and "norm" in ws or {"gradn", "gnorm", "gradnorm"} & set(ws)) and not statistic:
        return Reading(c.GRAD_NORM, MEANING, why="its words (grad, norm)")
    if {"length", "len", "tokens"} & set(ws) and {"response", "completion", "completions", "gen", "generation",
                                                  "output", "answer", "sample"} & set(ws):
        if statistic == "max":
            return Reading(c.LENGTH_MAX, MEANING, why="its words (length, max)")
        if not statistic and "total" not in ws and "sum" not in ws:
            return Reading(c.LENGTH, MEANING, why="its words (length)")
        return None
    if "loss" in ws and ({"policy", "pg", "actor", "total", "grpo", "rl", "reinforce", "pi"} & set(ws)
                         or [w for w in ws if w not in ("sum", "mean", "avg")] == ["loss"]):
        # a total (policy plus value, KL or entropy terms) is read after a key that says policy
        policy = bool({"policy", "pg", "actor", "pi"} & set(ws))
        return Reading(c.LOSS, MEANING + (0 if policy else 1), why="its words (policy loss)" if policy else
                       "its words (a total loss: read where no policy loss is logged)")
    if held and (_score(ws) or REWARD_WORDS & set(ws)) and not statistic:
        why = "its words (held-out " + next(w for w in ws if w in HELD_OUT_WORDS) + ")"
        return Reading(c.EVAL, MEANING + (0 if _score(ws) else 2), why=why)
    if REWARD_WORDS & set(ws) and not {"advantage", "advantages", "normalized", "normalised", "norm", "shaped",
                                        "penalty", "bonus", "nonzero", "positive", "negative", *SHARE_WORDS} & set(ws):
        if statistic == "std":
            return Reading(c.REWARD_STD, MEANING, why="its words (reward, std)")
        if statistic in ("min", "max"):
            return Reading(c.REWARD_MIN if statistic == "min" else c.REWARD_MAX, MEANING, why="its words")
        if not statistic and len(ws) <= 4:
            return Reading(c.REWARD, MEANING + 1, why="its words (" + next(w for w in ws if w in REWARD_WORDS) + ")")
    if _score(ws) and not statistic and in_unit and not held:
        return Reading(c.REWARD, MEANING + 3, why=SUCCESS_SHARE)
    return None


@dataclass
class Resolution:
    """Every key's reading, the engine recognised (if any), and what the output says about them."""

    readings: dict[str, Reading]
    engine: Recognised | None
    said: dict[str, str]  # key -> why, for each key not read by an engine's or the catalogue's own name


def resolve_keys(keys: Sequence[str], values: Mapping[str, Sequence[float]], mapping: Mapping[str, str],
                 held_out: bool = False, engine_name: str | None = None) -> Resolution:
    """Each of `keys` (a log's, in the order first met) read as a metric, with `values[key]` its column (asked
    only of the keys read by their words: a mapping that reads a column when asked keeps a long log's memory)."""
    engine = named_or_recognised(keys, engine_name)
    readings: dict[str, Reading] = {}
    said: dict[str, str] = {}
    group = _group_key(keys)  # once: a log of free text may hold thousands of keys
    present = set(keys)
    for key in keys:
        reading = _reading(key, values, keys, mapping, held_out, engine, group, present)
        readings[key] = reading
        if reading.why and reading.rank not in (MAPPED, ENGINE) and reading.known and reading.metric != key:
            said[key] = reading.why
    return Resolution(readings, engine, said)


def _reading(key: str, values: Mapping[str, Sequence[float]], keys: Sequence[str], mapping: Mapping[str, str],
             held_out: bool,
             engine: Recognised | None, group: str | None, present: set[str]) -> Reading:
    if key in mapping:
        return Reading(mapping[key], MAPPED, why="--map")
    spelled = f"eval_{key}" if held_out and not key.startswith(("eval", "val", "test")) else key
    if engine is not None:
        entry = engine.engine.entry(key)
        if entry is not None:
            metric = entry.metric or key
            return Reading(metric, ENGINE, _divisor(entry.divide_by, present),
                           why=f"{engine.engine.title}: {entry.meaning}" if entry.metric else "",
                           place=engine.engine.place(key))
    found = c.resolve(spelled)
    if found is not None:
        name, rank = found
        plain = name != key and not c.by_engine_name(key)
        return Reading(name, rank, why=f"its plain spelling ({key})" if plain else "")
    inferred = infer(spelled, values.get(key, ()), keys, group)  # the values are looked at only here
    if inferred is not None:
        return inferred
    if key == group:
        return Reading(c.GROUPS, MEANING, why="its words (the number of groups a step held)")
    return Reading(key, UNKNOWN, known=False)


def _divisor(divide_by: float | str | tuple[str, ...], keys: set[str]) -> float | str:
    if isinstance(divide_by, tuple):
        return next((k for k in divide_by if k in keys), divide_by[0] if divide_by else 1.0)
    return divide_by
