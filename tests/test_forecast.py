"""The collapse forecast: hand-computed values of the formulas, the samplers' closed forms against the real
samplers run by Monte Carlo, the recommendation rule, and the probe / forecast commands."""

from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.reports import forecast as fc
from grposcope.rewards import REWARDS

# ----------------------------------------------------------------------------------------- one prompt


def test_collapse_probability_hand_computed():
    # p = 0.5, G = 2: 0.5^2 + 0.5^2 = 0.25 + 0.25 = 0.5
    half = fc.collapse_probability(0.5, 2)
    assert (half.all_correct, half.all_wrong, half.total) == pytest.approx((0.25, 0.25, 0.5), abs=1e-12)
    # p = 0.9, G = 4: 0.9^4 + 0.1^4 = 0.6561 + 0.0001 = 0.6562
    high = fc.collapse_probability(0.9, 4)
    assert (high.all_correct, high.all_wrong, high.total) == pytest.approx((0.6561, 0.0001, 0.6562), abs=1e-12)
    # p = 0: every group is all wrong; G = 1: a single sample always "collapses" (0.3 + 0.7 = 1)
    assert fc.collapse_probability(0.0, 3).total == 1.0 and fc.collapse_probability(0.3, 1).total == 1.0
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        fc.collapse_probability(1.5, 2)


def test_hypergeometric_estimate_hand_computed():
    # k = 4, c = 2, G = 2: C(2,2)/C(4,2) = 1/6 all correct, C(2,2)/C(4,2) = 1/6 all wrong, 1/3 in all
    est = fc.estimate_collapse(4, 2, 2)
    assert (est.all_correct, est.all_wrong, est.plug_in) == (pytest.approx(1 / 6), pytest.approx(1 / 6), False)
    # k = 4, c = 1, G = 2: C(1,2) = 0 all correct; C(3,2)/C(4,2) = 3/6 = 0.5 all wrong
    assert (fc.estimate_collapse(4, 1, 2).all_correct, fc.estimate_collapse(4, 1, 2).all_wrong) == (0.0, 0.5)
    # k = 16, c = 1, G = 8: C(15,8)/C(16,8) = 6435/12870 = 0.5, where the plug-in (15/16)^8 = 0.5967 is biased up
    assert fc.estimate_collapse(16, 1, 8).total == pytest.approx(0.5, abs=1e-12)
    # G = k: the only G-subset is all k samples, mixed here, so the estimate is 0
    assert fc.estimate_collapse(4, 1, 4).total == 0.0
    # G > k: the plug-in, flagged. k = 4, c = 2, G = 8: 0.5^8 + 0.5^8 = 2/256 = 0.0078125
    plug = fc.estimate_collapse(4, 2, 8)
    assert plug.total == pytest.approx(0.0078125, abs=1e-12) and plug.plug_in
    for bad in [(0, 0, 2), (4, 5, 2), (4, -1, 2), (4, 2, 0), (4.0, 2, 2)]:
        with pytest.raises(ValueError):
            fc.estimate_collapse(*bad)


def test_expected_draws_hand_computed():
    assert fc.expected_draws(0.5) == 2.0  # 1 / (1 - 0.5)
    assert fc.expected_draws(0.75) == 4.0  # 1 / (1 - 0.75)
    assert fc.expected_draws(0.0) == 1.0
    assert fc.expected_draws(1.0) == math.inf  # p = 0 or 1: never a mixed group


def test_expected_acr_over_two_prompts_with_its_standard_error():
    # G = 2. Prompt A: k = 4, c = 2 -> P = 1/6 + 1/6 = 1/3. Prompt B: k = 4, c = 0 -> P = 0 + C(4,2)/C(4,2) = 1.
    # mean = (1/3 + 1) / 2 = 2/3; deviations -1/3, +1/3: std_unb^2 = (1/9 + 1/9) / 1 = 2/9;
    # SE = sqrt(2/9) / sqrt(2) = 1/3. Split: all correct (1/6 + 0) / 2 = 1/12; all wrong (1/6 + 1) / 2 = 7/12.
    # Draws: A 1 / (1 - 1/3) = 1.5; B never mixes.
    out = fc.forecast_acr([(4, 2), (4, 0)], 2)
    assert (out.acr, out.acr_se) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert (out.all_correct, out.all_wrong) == (pytest.approx(1 / 12), pytest.approx(7 / 12))
    assert (out.draws_mean, out.never_mixed, out.plug_in_prompts, out.prompts) == (pytest.approx(1.5), 1, 0, 2)


def test_plug_in_prompts_are_counted_and_one_prompt_has_no_se():
    # G = 3: prompt (2, 1) has k < G: plug-in 0.5^3 + 0.5^3 = 0.25; prompt (4, 2): C(2,3) = 0 -> 0. Mean 0.125.
    out = fc.forecast_acr([(2, 1), (4, 2)], 3)
    assert out.acr == pytest.approx(0.125) and out.plug_in_prompts == 1
    assert math.isnan(fc.forecast_acr([(4, 2)], 2).acr_se)


# ----------------------------------------------------------------------------------------- sampler cost


def test_binomial_pmf():
    assert fc.binomial_pmf(2, 0.5) == pytest.approx([0.25, 0.5, 0.25])  # 1/4, 2/4, 1/4
    assert fc.binomial_pmf(3, 0.0) == [1.0, 0.0, 0.0, 0.0] and fc.binomial_pmf(2, 1.0) == [0.0, 0.0, 1.0]


def test_fixed_closed_form():
    # ACR 0.5, G = 4, B = 8: 32 samples, 8 * 0.5 = 4 informative groups -> 4 / (1 - 0.5) = 8 samples each,
    # 1000 * 4 / 32 = 125 informative groups per 1,000 samples
    cost = fc.fixed_cost(0.5, 4, 8)
    assert (cost.samples_per_step, cost.informative_per_step) == (32.0, 4.0)
    assert (cost.samples_per_informative, cost.informative_per_1k) == (8.0, 125.0)
    assert fc.fixed_cost(1.0, 4, 8).samples_per_informative == math.inf


def test_dynamic_closed_form_hand_computed():
    # q = 1 - ACR = 0.5, G = 4, M = 2 batches at most.
    # B = 1: E[batches] = 1 + P(Bin(1, .5) < 1) = 1.5; E[kept] = E[min(1, Bin(2, .5))] = 1 - 1/4 = 0.75;
    # samples per step 4 * 1 * 1.5 = 6; per informative group 6 / 0.75 = 8
    one = fc.dynamic_cost(0.5, 4, 1, max_gen_batches=2)
    assert (one.samples_per_step, one.informative_per_step, one.samples_per_informative) == \
        pytest.approx((6.0, 0.75, 8.0))
    # B = 2: E[batches] = 1 + P(Bin(2, .5) < 2) = 1 + 3/4 = 1.75; Bin(4, .5) pmf 1,4,6,4,1 / 16:
    # E[min(2, X)] = (0*1 + 1*4 + 2*(6+4+1)) / 16 = 26/16 = 1.625; samples 4 * 2 * 1.75 = 14
    two = fc.dynamic_cost(0.5, 4, 2, max_gen_batches=2)
    assert (two.samples_per_step, two.informative_per_step) == pytest.approx((14.0, 1.625))
    # M = 1 is plain fixed: one batch, E[Bin(2, .5)] = 1 informative group
    assert fc.dynamic_cost(0.5, 4, 2, max_gen_batches=1).informative_per_step == pytest.approx(1.0)
    # the default M is the registered sampler's (3): 1 + P(Bin(1,.5)<1) + P(Bin(2,.5)<1) = 1 + 0.5 + 0.25
    assert fc.dynamic_cost(0.5, 4, 1).samples_per_step == pytest.approx(4 * 1.75)


def test_measured_draw_replays_the_probe():
    draw = fc.MeasuredDraw([(4, 2), (3, 0), (2, 2)], torch.Generator().manual_seed(0))
    # n = k: all 4 outcomes of prompt 0 without replacement -> exactly 2 successes, every time
    assert draw([0, 0, 0], 4).rewards.sum(dim=1).tolist() == [2.0, 2.0, 2.0]
    # prompt 4 is prompt 4 mod 3 = 1 (never solved); prompt 2 always solved, also beyond its k (Bernoulli(1))
    assert draw([4, 1], 3).rewards.sum().item() == 0.0 and draw([2], 5).rewards.sum().item() == 5.0
    # groups of 2 of prompt 0 collapse with the hypergeometric 1/3
    collapsed = (draw([0] * 30000, 2).rewards.std(dim=1) == 0).float().mean().item()
    assert collapsed == pytest.approx(1 / 3, abs=0.015)  # binomial SE sqrt(2/9 / 30000) = 0.0027


COUNTS = [(8, 0), (8, 1), (8, 4), (8, 6), (8, 8), (8, 3)]


@pytest.mark.parametrize("g, b", [(4, 3), (2, 8), (12, 2)], ids=["G4", "G2", "G12-plug-in"])
def test_fixed_and_dynamic_closed_forms_agree_with_the_real_samplers(g, b):
    acr = fc.forecast_acr(COUNTS, g).acr  # G = 12 > k = 8: the plug-in, which MeasuredDraw then uses too
    for closed, sampler in ((fc.fixed_cost(acr, g, b), "fixed"), (fc.dynamic_cost(acr, g, b), "dynamic")):
        mc = fc.monte_carlo_cost(sampler, COUNTS, g, b, groups=3000, seed=1)
        assert mc.method == "Monte Carlo" and mc.se > 0
        assert abs(mc.samples_per_informative - closed.samples_per_informative) < 4 * mc.se, (sampler, mc, closed)
        assert mc.samples_per_step == pytest.approx(closed.samples_per_step, rel=0.05)


def test_monte_carlo_of_the_other_samplers():
    ada = fc.monte_carlo_cost("reinforce_ada", COUNTS, 4, 4, groups=400)
    budgeted = fc.monte_carlo_cost("budgeted", COUNTS, 4, 4, groups=400)
    # reinforce_ada draws rounds of 8 until balanced: at least 8 samples per prompt
    assert ada.samples_per_step >= 8 * 4 and ada.informative_per_step > 0
    assert budgeted.samples_per_step <= 4 * 4  # budgeted spends at most its budget, B x G
    # budgeted skips the prompts it learned never mix: fewer samples per informative group than fixed
    fixed = fc.fixed_cost(fc.forecast_acr(COUNTS, 4).acr, 4, 4)
    assert budgeted.samples_per_informative < fixed.samples_per_informative
    # reinforce_ada cannot fill G = 64 from round_size 8 x max_rounds 4 = 32 samples: a note, no numbers
    too_big = fc.monte_carlo_cost("reinforce_ada", COUNTS, 64, 1, groups=10)
    assert "round_size" in too_big.note and math.isnan(too_big.samples_per_informative)


# ----------------------------------------------------------------------------------------- recommendation


def test_fit_budget_shrinks_the_batch_of_samplers_that_overspend():
    # reinforce_ada at B = 16: 128 samples per step = 8 per prompt, 12 informative groups; budget 64 ->
    # 64 // 8 = 8 prompts, 64 samples, 6 informative groups (each prompt on its own: it scales)
    ada = fc.SamplerCost("reinforce_ada", 4, 16, 128.0, 12.0, "Monte Carlo")
    fit = fc.fit_budget(ada, 64, acr=0.5)
    assert (fit.prompts_per_step, fit.samples_per_step, fit.informative_per_step) == (8, 64.0, 6.0)
    assert fc.fit_budget(ada, 7, acr=0.5) is None  # not even one prompt (8 samples) fits 7
    # dynamic at B = 2, G = 4, q = 0.5: 4 * 2 * 1.875 = 15 samples > 8; at B = 1: 4 * 1.75 = 7 <= 8
    dyn = fc.fit_budget(fc.dynamic_cost(0.5, 4, 2), 8, acr=0.5)
    assert (dyn.prompts_per_step, dyn.samples_per_step) == (1, pytest.approx(7.0))


def test_a_sampler_registered_from_outside_is_in_the_forecasts_lists(monkeypatch):
    from grposcope.sampling import SAMPLERS
    from grposcope.sampling.base import READS
    from grposcope.sampling.fixed import Fixed

    assert (fc.CLOSED_FORM, fc.PER_PROMPT) == (("fixed", "dynamic"), ("fixed", "reinforce_ada"))
    SAMPLERS.names()  # the package's samplers, registered before the copies below are taken
    for private in ("_entries", "_docs", "_ranges", "_reads", "_hosts"):  # copies, restored after the test
        monkeypatch.setattr(SAMPLERS, private, dict(getattr(SAMPLERS, private)))

    @SAMPLERS.register("one_each", reads=READS)
    class OneEach(Fixed):  # fixed's draw, declared per prompt and not closed form
        closed_form = False
        per_prompt = True

    assert fc.per_prompt_samplers() == fc.PER_PROMPT == ("fixed", "reinforce_ada", "one_each")
    assert fc.closed_form_samplers() == ("fixed", "dynamic")
    # per prompt: an overspending batch is cut as reinforce_ada's is, 128 samples for 16 prompts -> 8 for 64
    fit = fc.fit_budget(fc.SamplerCost("one_each", 4, 16, 128.0, 12.0, "Monte Carlo"), 64, acr=0.5)
    assert (fit.prompts_per_step, fit.samples_per_step, fit.informative_per_step) == (8, 64.0, 6.0)
    # not closed form: run by Monte Carlo (on MC_BATCH prompts, scaled back to B = 16 // 4 = 4: 4 x 4 samples)
    result = fc.forecast(COUNTS, [4], budget=16, samplers=["fixed", "one_each"], mc_groups=100)
    cost = result.costs["one_each"][4]
    assert (cost.method, cost.samples_per_step) == ("Monte Carlo", 16.0)
    assert any(note.startswith("one_each: Monte Carlo") for note in result.notes)

    @SAMPLERS.register("closed_nowhere", reads=READS)
    class ClosedNowhere(Fixed):  # declares a closed form the forecast has no formula for
        closed_form = True

    assert fc.CLOSED_FORM == ("fixed", "dynamic", "closed_nowhere")
    with pytest.raises(ValueError, match="no formula for it: add one to grposcope.reports.forecast.FORMULAS"):
        fc.forecast(COUNTS, [4], budget=16, samplers=["closed_nowhere"])


def test_recommend_follows_the_rule():
    acr = {2: fc.forecast_acr([(4, 2), (4, 0)], 2), 4: fc.forecast_acr([(4, 2), (4, 1)], 4)}
    # ACR at G = 2 is 2/3 (above), at G = 4: C(2,4) = C(1,4) = C(3,4) = 0 -> 0 (below 0.35): G = 4
    costs = {"fixed": {g: fc.fixed_cost(a.acr, g, 16 // g) for g, a in acr.items()},
             "reinforce_ada": {4: fc.SamplerCost("reinforce_ada", 4, 4, 64.0, 2.0, "Monte Carlo"),
                               2: fc.SamplerCost("reinforce_ada", 2, 8, 64.0, 2.0, "Monte Carlo")}}
    rec = fc.recommend(acr, costs, budget=16)
    # fixed: 4 prompts x 4 = 16 samples, 4 informative -> 250 per 1,000; reinforce_ada overspends (16 per
    # prompt): 1 prompt, 16 samples, 0.5 informative -> 31.25 per 1,000
    assert (rec.g, rec.cost.sampler, rec.met_target) == (4, "fixed", True)
    assert rec.fits["reinforce_ada"].prompts_per_step == 1
    assert rec.fits["reinforce_ada"].informative_per_1k == pytest.approx(31.25)
    assert "G = 4, sampler fixed with 4 prompts per step" in rec.text
    # a target no G reaches: the lowest ACR is taken, and said so
    high = {2: acr[2], 4: fc.forecast_acr([(4, 4), (4, 0)], 4)}  # 2/3 and 1
    rec = fc.recommend(high, costs, budget=16, target_acr=0.1)
    assert (rec.g, rec.met_target) == (2, False) and "no group size reaches" in rec.text
    assert fc.recommend(acr, costs, budget=1) is None  # no G fits a budget of 1 sample


def test_forecast_puts_it_together():
    result = fc.forecast(COUNTS, [4, 2, 4], budget=16, mc_groups=100)
    assert list(result.acr) == [2, 4] and list(result.costs) == fc.all_samplers()
    in_order = ["fixed", "dynamic", "reinforce_ada", "greso", "knapsack", "budgeted"]
    assert fc.all_samplers() == in_order  # in the order registered
    assert result.costs["fixed"][4].prompts_per_step == 4 and result.costs["budgeted"][2].method == "Monte Carlo"
    data = json.loads(json.dumps(result.to_dict()))  # JSON-ready
    assert data["recommendation"]["sampler"] in fc.all_samplers() and data["rule"] == fc.RULE
    assert data["pass_rates"][2] == 0.5  # 4 / 8


# ----------------------------------------------------------------------------------------- the commands


def write_probe(path, counts, header=True):
    lines = [json.dumps({"probe": {"model": "m", "dataset": "d", "k": 4}})] if header else []
    lines += [json.dumps({"index": i, "prompt": f"q{i}", "k": k, "successes": c, "pass_rate": c / k})
              for i, (k, c) in enumerate(counts)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_forecast_prints_the_tables_and_writes_json(tmp_path):
    probe = write_probe(tmp_path / "probe.jsonl", [(4, 2), (4, 0)])
    out = tmp_path / "forecast.json"
    result = CliRunner().invoke(app, ["forecast", str(probe), "--group_sizes", "2,4", "--budget", "16",
                                      "--json", str(out), "--mc_groups", "50"])
    assert result.exit_code == 0, result.output
    for text in ("expected ACR", "all-correct", "never mix", "reinforce_ada", "recommended:", "rule:"):
        assert text in result.output
    assert "0.667 ± 0.333" in result.output  # G = 2, as worked out above
    data = json.loads(out.read_text())
    g2 = data["group_sizes"][0]
    assert (g2["g"], g2["acr"], g2["never_mixed"]) == (2, pytest.approx(2 / 3), 1)
    assert data["source"].startswith(str(probe)) and data["budget"] == 16
    result = CliRunner().invoke(app, ["forecast", str(probe), "--json", str(out), "--mc_groups", "10"])
    assert result.exit_code == 2 and "already exists; pass --overwrite" in result.output


def test_cli_forecast_plot(tmp_path):
    pytest.importorskip("matplotlib")
    probe = write_probe(tmp_path / "probe.jsonl", [(4, 2), (4, 0), (4, 1), (4, 4)])
    png = tmp_path / "f.png"
    result = CliRunner().invoke(app, ["forecast", str(probe), "--group_sizes", "2,8", "--budget", "16",
                                      "--plot", str(png), "--mc_groups", "20"])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("lines, args, message", [
    (None, [], "missing.jsonl does not exist"),
    (['{"probe": {}}', '{"k": 4, "successes": 1}', '{"k": 4, "succ'], ["--group_sizes", "2"], None),  # partial
    (['{"k": 4, "successes": 1}', "not json", '{"k": 4, "successes": 1}'], [], "line 2 is not JSON"),
    (['{"k": 0, "successes": 0}'], [], "line 1: k must be >= 1"),
    (['{"k": 4, "successes": 5}'], [], "line 1: successes must be in [0, k=4]"),
    (['{"probe": {}}', '{"prompt": "q", "pass": 0.5}'], [], "line 2: no pass rate"),
    (['{"k": 4, "successes": 1}'], ["--group_sizes", "0,2"], "group sizes >= 1"),
    (['{"k": 4, "successes": 1}'], ["--group_sizes", "2,x"], "'x' is not an integer"),
    (['{"k": 4, "successes": 1}'], ["--samplers", "fixed,nope"], "unknown sampler 'nope'; known: budgeted, "),
    (['{"k": 4, "successes": 1}'], ["--budget", "1"], "smaller than every group size"),
    (['{"k": 4, "successes": 1}'], ["--target_acr", "2"], "--target_acr is an ACR"),
], ids=["missing", "partial-last-line", "bad-json", "k0", "c>k", "no-pass-rate", "G0", "G-not-int",
        "sampler", "budget", "target"])
def test_cli_forecast_bad_input(tmp_path, lines, args, message):
    path = tmp_path / "missing.jsonl"
    if lines is not None:
        path = tmp_path / "p.jsonl"
        path.write_text("\n".join(lines))  # no newline at the end: the last line may be cut short
    result = CliRunner().invoke(app, ["forecast", str(path), "--mc_groups", "10", *args])
    if message is None:  # a partial last line is what a killed probe leaves: skipped
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2 and "error:" in result.output, result.output
    assert message in result.output.replace("\n", "")


def test_cli_forecast_from_a_runs_history(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = [(1, "A", r) for r in (1.0, 0.0, 1.0, 1.0)] + [(1, "B", 0.0)] * 4 + [(1, "C", 1.0)] + \
        [(2, "A", 1.0)] * 4  # C: a group cut short by num_completions_to_print, left out
    (run / "completions.jsonl").write_text("".join(json.dumps(
        {"step": s, "prompt": p, "completion": "x", "rewards": {"f": r}, "reward": r, "advantage": 0.0}) + "\n"
        for s, p, r in rows))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "time": 0.0, "collapse/acr": a}) + "\n"
                                               for s, a in ((1, 0.5), (2, 1.0))))
    out = tmp_path / "f.json"
    result = CliRunner().invoke(app, ["forecast", "--from_run", str(run), "--steps", "1", "--group_sizes", "2,4",
                                      "--budget", "8", "--json", str(out), "--mc_groups", "20"])
    assert result.exit_code == 0, result.output
    # step 1 only: A (4, 3), B (4, 0). G = 4: A C(3,4) = C(1,4) = 0 -> 0; B 1 -> ACR (0 + 1) / 2 = 0.5
    data = json.loads(out.read_text())
    assert data["group_sizes"][1]["acr"] == pytest.approx(0.5)
    assert data["measured"] == {"g": 4, "steps": 1, "acr": 0.5, "acr_se": None}  # NaN -> null in JSON
    assert "measured collapse/acr over the 1 steps" in result.output
    assert "(1 cut short left out)" in result.output.replace("\n", " ")
    result = CliRunner().invoke(app, ["forecast", "--from_run", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "is not a folder" in result.output
    result = CliRunner().invoke(app, ["forecast"])
    assert result.exit_code == 2 and "give a probe file or --from_run" in result.output


def test_help_shows_an_example_unwrapped():
    for command, example in (("forecast", "grposcope forecast probe.jsonl --group_sizes 2,4,8,16,32 --budget 64"),
                             ("probe", "--dataset arithmetic --k 16 --prompts 64 --output probe.jsonl")):
        result = CliRunner().invoke(app, [command, "--help"], terminal_width=100)
        assert result.exit_code == 0 and example in result.output, result.output


def level_1_only(prompts, completions, level, **columns):
    """Deterministic outcomes: every sample of a level-1 prompt succeeds, none of another's."""
    return [1.0 if lv == "1" else 0.0 for lv in level]


def coin(prompts, completions, **columns):
    """An outcome that follows the sampled text (the parity of its length): it shows which samples were drawn."""
    return [float(len(c) % 2) for c in completions]


@pytest.fixture
def leveled_file(tmp_path, monkeypatch):
    monkeypatch.setitem(REWARDS._entries, "level_1_only", level_1_only)  # removed again after the test
    monkeypatch.setitem(REWARDS._entries, "coin", coin)
    path = tmp_path / "math.jsonl"
    rows = [{"problem": f"What is {i} + 1 ?", "answer": str(i + 1), "level": 1 + i % 2} for i in range(5)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def probe_args(model_dir, data, out, prompts, *extra):
    return ["probe", "--model", str(model_dir), "--dataset", str(data), "--split", "all", "--k", "3",
            "--prompts", str(prompts), "--max_completion_length", "2", "--batch_prompts", "2",
            "--reward_funcs", "level_1_only,coin", "--output", str(out), *extra]


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cli_probe_writes_pass_rates_and_resumes(tmp_path, tiny_model_dir, leveled_file):
    runner, out = CliRunner(), tmp_path / "probe.jsonl"
    result = runner.invoke(app, probe_args(tiny_model_dir, leveled_file, out, 2))
    assert result.exit_code == 0, result.output
    assert "probe 2/2 prompts" in result.output and "mean pass rate" in result.output
    header, *records = read_lines(out)
    assert header["probe"]["k"] == 3 and header["probe"]["reward_funcs"] == ["level_1_only", "coin"]
    for r in records:  # the reward is the sum: level 1 scores 1 + coin >= 1, a success; level 2 the coin
        assert r["k"] == 3 and r["pass_rate"] == r["successes"] / 3 and (r["successes"] == 3 or r["level"] == "2")
        assert set(r) == {"index", "prompt", "answer", "level", "k", "successes", "pass_rate", "mean_length"}
    with out.open("a") as f:
        f.write('{"index": 2, "pro')  # what a kill mid-write leaves
    with pytest.warns(RuntimeWarning, match="partial last line"):
        result = runner.invoke(app, probe_args(tiny_model_dir, leveled_file, out, 4))
    assert result.exit_code == 0, result.output
    assert "probe 4/4 prompts" in result.output and "probe 2/4" not in result.output  # continued after 2
    resumed = read_lines(out)
    assert resumed[:3] == [header, *records] and [r["index"] for r in resumed[1:]] == [0, 1, 2, 3]
    # the same probe in one go draws the same samples (the same batches, seeded by their first prompt)
    whole = tmp_path / "whole.jsonl"
    assert runner.invoke(app, probe_args(tiny_model_dir, leveled_file, whole, 4)).exit_code == 0
    assert read_lines(whole) == resumed
    # the forecast reads the probe as written
    result = runner.invoke(app, ["forecast", str(out), "--group_sizes", "2", "--budget", "4",
                                 "--mc_groups", "10", "--json", str(tmp_path / "f.json")])
    assert result.exit_code == 0, result.output
    counts = [(r["k"], r["successes"]) for r in resumed[1:]]
    assert json.loads((tmp_path / "f.json").read_text())["group_sizes"][0]["acr"] == \
        pytest.approx(fc.forecast_acr(counts, 2).acr)


def test_cli_probe_errors_come_before_the_model_loads(tmp_path, leveled_file, monkeypatch):
    import grposcope.models

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(grposcope.models, "load_model", no_loading)
    out = tmp_path / "probe.jsonl"
    write_probe(out, [(3, 1)])  # another probe's settings
    runner = CliRunner()
    cases = [
        (["--k", "0"], "--k must be >= 1"),
        (["--reward_funcs", "nope"], "unknown reward function 'nope'; known:"),
        (["--split", "test"], "unknown --split 'test'"),
        (["--temperature", "0"], "--temperature must be > 0"),
        ([], "was probed with other settings"),  # resuming a file made with other settings
    ]
    for extra, message in cases:
        result = runner.invoke(app, [*probe_args(tmp_path / "no-model", leveled_file, out, 2), *extra])
        assert result.exit_code == 2 and message in result.output.replace("\n", " "), (extra, result.output)
    result = runner.invoke(app, [*probe_args(tmp_path / "no-model", tmp_path / "missing.jsonl", out, 2)])
    assert result.exit_code == 2 and "missing.jsonl" in result.output


def test_probe_core_with_an_in_memory_model(tiny_llama, tiny_tokenizer):
    from grposcope.cli.probe import probe_batches
    from grposcope.data.chat import render_prompt
    from grposcope.rewards import RewardScorer
    from grposcope.rollout import ROLLOUTS, SamplingParams

    examples = [{"prompt": f"What is {i} + 1 ?", "level": str(1 + i % 2)} for i in range(3)]
    for e in examples:
        e["prompt_text"] = render_prompt(e["prompt"], tiny_tokenizer)
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer)

    def probe(funcs, seed, start):
        return list(probe_batches(examples, backend, RewardScorer(funcs), SamplingParams(2), k=16, seed=seed,
                                  success_threshold=0.5, batch_prompts=2, start=start))

    batches = probe([level_1_only], seed=0, start=1)
    assert [len(b) for b in batches] == [2]  # from prompt 1 on: one batch of two
    assert [(r["index"], r["successes"], r["level"]) for r in batches[0]] == [(1, 0, "2"), (2, 16, "1")]
    assert all(1 <= r["mean_length"] <= 2 for r in batches[0])
    # the samples follow the seed (and the batch's first prompt), and nothing else
    first, again, other = probe([coin], 0, 2), probe([coin], 0, 2), probe([coin], 1, 2)  # 16 coin flips each
    assert first == again and first[0][0]["successes"] != other[0][0]["successes"]


@pytest.mark.parametrize("args, option", [
    (["--mc_groups", str(10**12)], "--mc_groups"),  # printed nothing for 300 s (issue 40, point 4)
    (["--group_sizes", str(10**9), "--budget", str(10**9)], "--group_sizes"),  # a 4 GB allocation's traceback
    (["--budget", str(10**12)], "--budget"),
], ids=["mc_groups", "group_sizes", "budget"])
def test_cli_forecast_refuses_work_beyond_its_bounds_in_one_line(tmp_path, args, option):
    from grposcope.cli.forecast import WORK_BOUNDS

    probe = write_probe(tmp_path / "probe.jsonl", [(4, 2), (4, 0)])
    result = CliRunner().invoke(app, ["forecast", str(probe), *args])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.startswith("error:") and "\n" not in line, line
    high, example = WORK_BOUNDS[option]
    assert option in line and f"{high:,}" in line and f"e.g. {option} {example}" in line
    at_bound = {"--mc_groups": ["--mc_groups", "10", "--samplers", "fixed"],
                "--group_sizes": ["--group_sizes", str(high), "--budget", str(high), "--samplers", "fixed"],
                "--budget": ["--budget", str(high), "--samplers", "fixed"]}[option]
    assert CliRunner().invoke(app, ["forecast", str(probe), *at_bound]).exit_code == 0


def test_cli_probe_out_naming_a_users_own_file_advises_another_out(tmp_path, leveled_file, monkeypatch):
    # the user's notes are not a probe file: the advice is to choose another --output, not to edit their file
    import grposcope.models

    monkeypatch.setattr(grposcope.models, "load_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nsecond line\n")
    result = CliRunner().invoke(app, probe_args(tmp_path / "no-model", leveled_file, notes, 2))
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "fix or remove that line" not in text
    assert (f"{notes} exists and is not a probe file (line 1 is not JSON: Expecting value); choose another "
            "--output, or pass --overwrite to replace it") in text
    assert notes.read_text() == "my notes\nsecond line\n"
