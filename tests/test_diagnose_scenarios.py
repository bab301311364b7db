"""grposcope diagnose on the independent scenario runs of tests/scenario_runs.py, in five log formats: each
labelled detector fires (warning or critical), no other detector does, healthy runs get nothing above info.

The generator and writers are checked on their own first (the evidence each label rests on is in the series;
every format reads back to the same numbers), so a failure of the detector test is the detectors' (or a
reader's), not the generator's. Seed 7 (GRPOSCOPE_SCENARIO_SEED overrides it); seeds 0-4 are for development.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from scenario_runs import FORMATS, HEALTHY, SCENARIOS, expected_for, frac, make, write

from grposcope.diagnose import diagnose
from grposcope.runs import load_run

SEED = int(os.environ.get("GRPOSCOPE_SCENARIO_SEED", "7"))
TESTED_FORMATS = ("trainer_state", "tensorboard", "verl", "wandb-export", "csv")
FIRES = ("warning", "critical")


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """(scenario, format) -> (the run, what load_run read, its diagnosis), each written, read and diagnosed once
    for the module (reading TensorBoard events is the slow part)."""
    cache: dict[tuple[str, str], tuple] = {}

    def get(name: str, fmt: str):
        if (name, fmt) not in cache:
            run = make(name, SEED)
            got = load_run(write(run, tmp_path_factory.mktemp(f"{name}-{fmt}"), fmt))
            cache[name, fmt] = run, got, diagnose(got)
        return cache[name, fmt]

    return get


# ------------------------------------------------------------------------------ the generator's own evidence


def _mean(a) -> float:
    return float(np.nanmean(a))


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, SEED])
def test_each_scenario_holds_the_evidence_of_its_label(seed):
    r = {name: make(name, seed) for name in SCENARIOS}
    n = 300
    last, first = slice(-n // 4, None), slice(0, n // 10)

    too_hard = r["too_hard"]
    assert _mean(too_hard["reward"]) < 0.08 and _mean(too_hard["frac_reward_zero_std"]) > 0.75
    zero = too_hard["grad_norm"] == 0
    assert zero.sum() >= 5 and np.all(too_hard["loss"][zero] == 0)
    assert np.all(too_hard["frac_reward_zero_std"][zero] == 1)

    sat = r["saturated"]
    assert _mean(sat["reward"][last]) > 0.94 and _mean(sat["frac_reward_zero_std"][last]) > 0.7
    assert np.all(sat["grad_norm"] > 0)  # beta > 0: the KL term keeps a gradient

    ent = r["entropy_collapse"]
    assert _mean(ent["entropy"][-20:]) < 0.1 and _mean(ent["entropy"][:10]) > 0.5
    assert abs(_mean(ent["reward"][-100:]) - _mean(ent["reward"][100:200])) < 0.04

    kl = r["kl_blowup"]["kl"]
    assert _mean(kl[-10:]) > 1 and _mean(kl[-10:]) > 5 * _mean(kl[140:160])  # super-linear: x10+ over the 2nd half

    trunc = r["truncation"]["completions/clipped_ratio"]
    assert 0.3 <= _mean(trunc) <= 0.5 and np.all(r["truncation"]["completions/max_length"] == 1024)

    grow = r["length_growth"]
    assert _mean(grow["completions/mean_length"][-20:]) >= 2 * _mean(grow["completions/mean_length"][:20])
    assert _mean(grow["completions/clipped_ratio"]) < 0.01
    assert abs(_mean(grow["eval_reward"][-100:]) - _mean(grow["eval_reward"][:100])) < 0.05

    clip = r["clip_saturation"]["clip_ratio/region_mean"]
    assert 0.2 <= np.median(clip) <= 0.4 and r["clip_saturation"].config["num_iterations"] > 1
    assert all(np.all(r[h]["clip_ratio/region_mean"] < 0.05) for h in HEALTHY)

    for name in ("gradient_spikes", "gradient_nonfinite"):
        g = r[name]["grad_norm"]
        ratio = g[np.isfinite(g)] / np.median(g[np.isfinite(g)])
        assert (ratio >= 9).sum() >= 6 and ratio.max() <= 55
    assert (~np.isfinite(r["gradient_nonfinite"]["grad_norm"])).sum() == 3
    assert np.all(np.isfinite(r["gradient_spikes"]["grad_norm"]))

    hack = r["reward_hacking"]
    ev = hack["eval_reward"][np.isfinite(hack["eval_reward"])]
    assert _mean(hack["reward"][last]) > _mean(hack["reward"][first]) + 0.3
    assert ev[6:14].mean() - ev[-5:].mean() > 0.12

    comp = r["reward_composition"]
    assert np.all(comp["rewards/accuracy/mean"] == 0) and np.all(comp["rewards/accuracy/std"] == 0)
    assert np.all(comp["rewards/format/std"] > 0)

    plat = r["plateau"]
    assert _mean(plat["reward"][150:160]) - _mean(plat["reward"][:10]) > 0.2
    assert abs(_mean(plat["reward"][-75:]) - _mean(plat["reward"][150:225])) < 0.05

    ns = r["no_signal"]
    zero = ns["grad_norm"] == 0
    assert 6 <= zero.sum() <= 12 and np.all(ns["loss"][zero] == 0) and np.all(ns["reward"][zero] == 0)
    assert _mean(ns["frac_reward_zero_std"]) < 0.35

    for name in HEALTHY:
        h = r[name]
        assert np.all(h["grad_norm"] > 0) and np.all(np.isfinite(h["grad_norm"]))
        ev = h["eval_reward"][np.isfinite(h["eval_reward"])]
        assert ev[-len(ev) // 3:].mean() > ev[: len(ev) // 3].mean()
    assert r["healthy_short"].steps == 40
    fast = r["healthy_fast_long"]["completions/mean_length"]
    assert _mean(fast[-20:]) >= 1.8 * _mean(fast[:20])  # ~2.2x by its curve


def test_runs_are_reproducible_and_seeds_differ():
    a, b, c = make("plateau", 3), make("plateau", 3), make("plateau", 4)
    assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    assert not np.array_equal(a["reward"], c["reward"])
    assert len(make("plateau", 0, steps=57)["reward"]) == 57 and len(frac(57)) == 57


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_back_to_the_same_numbers(diagnosed, tmp_path, fmt):
    if fmt in TESTED_FORMATS:
        run, got, _ = diagnosed("gradient_nonfinite", fmt)
    else:
        run = make("gradient_nonfinite", SEED)
        got = load_run(write(run, tmp_path, fmt))
    assert got.steps == list(range(1, run.steps + 1))
    assert np.allclose(got.values("reward/mean"), run["reward"])
    assert np.allclose(got.values("entropy/mean"), run["entropy"])
    assert np.allclose(got.values("completion/truncated_frac"), run["completions/clipped_ratio"])
    g = np.asarray(got.values("grad_norm"))
    finite = np.isfinite(run["grad_norm"])
    assert np.allclose(g[finite], run["grad_norm"][finite])
    # a W&B CSV export loses NaN (pandas writes it as an empty cell); every format keeps inf
    assert len(got.nonfinite.get("grad_norm", [])) == (2 if fmt == "wandb-export" else 3)
    steps, values = got.points("eval/accuracy")
    assert steps == run.eval_steps() and np.allclose(values, run["eval_reward"][np.isfinite(run["eval_reward"])])
    if fmt != "verl":
        assert np.allclose(got.values("collapse/acr"), run["frac_reward_zero_std"])
        assert np.allclose(got.values("reward/accuracy/mean"), run["rewards/accuracy/mean"])


@pytest.mark.parametrize("fmt", TESTED_FORMATS)
def test_kl_and_two_reward_functions_read_back(diagnosed, fmt):
    kl, got, _ = diagnosed("kl_blowup", fmt)
    assert np.allclose(got.values("kl/mean"), kl["kl"])
    comp, got, _ = diagnosed("reward_composition", fmt)
    if fmt != "verl":
        assert np.allclose(got.values("reward/format/mean"), comp["rewards/format/mean"])
        assert np.allclose(got.values("reward/accuracy/std"), 0)


# ----------------------------------------------------------------------------------------- the detectors


@pytest.mark.parametrize("fmt", TESTED_FORMATS)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_labelled_detectors_fire_and_no_other(diagnosed, name, fmt):
    run, _, d = diagnosed(name, fmt)
    seen = [(f.detector, f.severity, f.step) for f in d.findings]
    fired = {f.detector for f in d.findings if f.severity in FIRES}
    expected = expected_for(run, fmt)
    missed = sorted(expected - fired)
    assert not missed, f"{name} ({fmt}): {missed} did not fire ({run.why}); findings {seen}; unchecked {d.unchecked}"
    extra = sorted(fired - expected)
    assert not extra, f"{name} ({fmt}): false alarm from {extra}; expected only {sorted(expected)}; findings {seen}"


@pytest.mark.parametrize("fmt", TESTED_FORMATS)
@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_runs_get_nothing_above_info(diagnosed, name, fmt):
    run, _, d = diagnosed(name, fmt)
    loud = [(f.detector, f.severity, f.title) for f in d.findings if f.severity != "info"]
    assert not loud, f"{name} ({fmt}) is healthy ({run.why}); got {loud}"
