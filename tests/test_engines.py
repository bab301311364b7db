"""Every engine's entry (src/grposcope/runs/engines/) against its fixtures (tests/fixtures/engines/<name>/): a
healthy and a collapsed run written by the engine's `make.py` in its own keys, scales and file format from one
pair of runs (tests/fixtures/engines/trajectory.py). Each is read by content, the engine is recognised from its
keys, the reward, the collapse share and the held-out score come back on the trajectory's scale (a percentage,
a count or a x10 score undone), and the diagnosis names the collapse in the collapsed run and no collapse in the
healthy one."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from grposcope.diagnose import diagnose
from grposcope.runs import load_run
from grposcope.runs.catalogue import ACR, EVAL, REWARD
from grposcope.runs.engines import engines, recognise

FIXTURES = Path(__file__).parent / "fixtures" / "engines"
sys.path.insert(0, str(FIXTURES))
import trajectory  # noqa: E402  (the fixtures' runs, for the figures each file must give back)

WARNED = ("warning", "critical")
FAILURES = ("no_learning", "pinned_reward", "loss_explosion", "held_out_regression", "negative_kl", "clip_near_one",
            "length_collapse")  # none of them belongs in a healthy run


def _cases() -> list[tuple[str, str, dict]]:
    out = []
    for engine in engines():
        expect = FIXTURES / engine.name / "EXPECT.json"
        if expect.is_file():
            out += [(engine.name, given, e) for given, e in json.loads(expect.read_text()).items()]
    return out


CASES = _cases()


def _mean(values) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite)


@pytest.mark.parametrize("engine", [e.name for e in engines()])
def test_every_engine_has_a_healthy_and_a_collapsed_fixture_and_a_pinned_source(engine):
    entry = next(e for e in engines() if e.name == engine)
    expect = FIXTURES / engine / "EXPECT.json"
    assert expect.is_file(), f"{engine}: no tests/fixtures/engines/{engine}/EXPECT.json"
    kinds = {e["kind"] for e in json.loads(expect.read_text()).values()}
    assert {"healthy", "collapsed"} <= kinds
    assert entry.sources and entry.step_keys and entry.formats and entry.markers


@pytest.mark.parametrize("engine,given,expect", CASES, ids=[f"{e}:{g}" for e, g, _ in CASES])
def test_an_engine_fixture_is_read_in_its_own_keys_and_scales(engine, given, expect):
    run = load_run(FIXTURES / engine / given)
    assert run.engine == engine, f"{given}: read as {run.engine or 'no engine'} ({run.found})"
    truth = trajectory.steps(expect["kind"])
    assert expect["reward_key"] not in run.unknown
    assert run.has(REWARD)
    if expect.get("reward_check", True):  # false where the engine logs its reward over the groups it kept
        assert _mean(run.values(REWARD)) == pytest.approx(_mean([r["reward_mean"] for r in truth]), abs=0.02)
    if expect.get("collapse_key"):
        assert run.has(ACR), f"{given}: {expect['collapse_key']} not read as {ACR} ({run.notes})"
        assert _mean(run.values(ACR)) == pytest.approx(_mean([r["frac_zero_std"] for r in truth]), abs=0.03)
    if expect.get("eval_key"):
        assert run.has(EVAL)
        logged = [r["eval_accuracy"] for r in truth if "eval_accuracy" in r]
        low, high = min(logged[0], 0.22 if expect["kind"] == "healthy" else 0.02), max(logged)  # 0.22: step 0
        assert all(low - 0.05 <= v <= high + 0.05 for v in run.points(EVAL)[1]), run.points(EVAL)


@pytest.mark.parametrize("engine,given,expect", CASES, ids=[f"{e}:{g}" for e, g, _ in CASES])
def test_an_engine_fixture_is_diagnosed_as_its_run_went(engine, given, expect):
    findings = diagnose(load_run(FIXTURES / engine / given)).findings
    warned = {f.detector for f in findings if f.severity in WARNED}
    if expect["kind"] == "collapsed":  # too hard: collapsed groups and a reward that never rises
        assert warned & {"advantage_collapse", "no_signal_steps"}, f"{given}: {sorted(warned)}"
        assert "no_learning" in warned, f"{given}: {sorted(warned)}"
    else:
        assert not warned & {"advantage_collapse", "no_signal_steps", "reward_hacking", "kl_drift", *FAILURES}, \
            f"{given}: {[(f.detector, f.title) for f in findings if f.severity in WARNED]}"


def test_each_engine_is_recognised_by_its_own_markers_alone():
    for engine in engines():
        found = recognise(engine.markers)
        assert found is not None and found.engine.name == engine.name, (engine.name, found)


def test_of_two_keys_of_one_metric_an_engine_reads_the_one_its_entry_lists_first():
    run = load_run(FIXTURES / "tinker_cookbook" / "healthy")  # held-out accuracy and held-out reward, both EVAL
    assert run.keys["test/env/all/correct"] == EVAL and run.keys["test/env/all/reward/total"] != EVAL
    assert any("the engine's entry lists it first" in n for n in run.notes)
