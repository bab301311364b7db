"""The tuning half of the corpus of real runs (tests/fixtures/real_runs/, split once at random: SPLIT.json): each
run is read as published, and diagnosed as its callout says, the callout written from the numbers before any
tool ran. The held-out half is not checked here: bench/diagnose_real_runs.py prints its table as it comes out
(docs/diagnose.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grposcope.diagnose import diagnose
from grposcope.runs import load_runs
from grposcope.runs.record import parts

CORPUS = Path(__file__).parent / "fixtures" / "real_runs"
SPLIT = json.loads((CORPUS / "SPLIT.json").read_text())
# the tuning half, and the held-out runs that were reported and then read to change the code (SPLIT.json: seen)
TUNING = (SPLIT["tuning"] + [r for part in SPLIT.get("added", []) for r in part["tuning"]]
          + [r for part in SPLIT.get("seen", []) for r in part["runs"]])
CALL = re.compile(r"^\s*-\s*`?(\w+)`?\s*:\s*\**(fire|warn|quiet|cannot tell)", re.I)  # warn: scored as fire
# where grposcope and the callout disagree on purpose, and why
DISAGREE = {
    ("csd-qwen35-steplogs", "plateau"): "the stall is explained by saturation (78% of groups collapsed, most of them "
                                        "all-correct): advantage_collapse names that cause, plateau stays quiet",
    ("t-gsm8k-grpo-llama8b-unsloth", "gradient_pathology"): "a borderline call (three isolated spikes of 6-12x); one "
                                                            "is 6 robust SDs out on the log scale: info, not a warning",
    ("t-tsc-grpo-qwen05b-console", "reward_composition"): "the log's one reward function sums both terms; the dead "
                                                          "term shows only in printed reward blocks, not in metrics",
    ("countdown-grpo-trl", "gradient_pathology"): "its evidence is the exact zeros (no_signal_steps, which fires) and "
                                                  "small norms; no spike, no NaN",
    ("physics-slm-grpo5", "gradient_pathology"): "its evidence is the exact zeros (no_signal_steps, which fires "
                                                 "critical); no spike, no NaN",
    ("physics-slm-grpo5", "plateau"): "the callout's own words: flat from the start, no gain to level off from (its "
                                      "`warn` marks compute spent for nothing, which advantage_collapse names)",
    # round 3 (seen after its table: bench/results/diagnose_real_runs_held_out_round3.txt): the callout and the rule
    # part on purpose
    ("r3-axiomforge-grpo-selfplay-csv", "advantage_collapse"): "26% of groups skipped on average, 12% at the end: "
                                                               "under the 0.50 a warning needs (info from 0.30)",
    ("r3-axiomforge-grpo-selfplay-csv", "pinned_reward"): "the held-out score takes two values (0.7933, 0.8000) in "
                                                          "six evaluations, never one of them four times in a row",
    ("r3-cs336-grpo-gsm8k-qonly-collapse", "plateau"): "the callout's own words: no rise-then-level, a flat run that "
                                                       "crashed (no_learning and held_out_regression name it)",
    ("r3-deepretrieval-grpo-0p5b-negkl", "kl_drift"): "a KL estimate negative throughout grows in size: negative_kl "
                                                      "names it (critical); a negative estimate is no distance",
    ("r3-deepretrieval-grpo-0p8b-30step", "no_signal_steps"): "8 of 30 steps are KL-only updates (a policy loss of "
                                                              "exactly 0): info where advantage_collapse names the "
                                                              "cause, a warning from 50%",
    ("r3-gemma2-grpo-console", "no_signal_steps"): "63 of 160 steps (39%) are KL-only updates: info where "
                                                   "advantage_collapse names the cause, a warning from 50%",
    ("r3-gemma2-grpo-console", "truncation"): "6% over the run, 0% over the last quarter: a spell of 25% in steps "
                                              "61-80 that passed is info",
    ("r3-gemma2-grpo-resume-degenerate", "advantage_collapse"): "34% of the steps have a policy loss of exactly 0: "
                                                                "under the 0.50 a warning needs",
    ("r3-gemma2-grpo-resume-degenerate", "gradient_pathology"): "no gradient norm; the loss doubles (to 4.0): no "
                                                                "spike of 100x, no NaN",
    ("r3-monarch-grpo-qwen15b-gsm8k", "plateau"): "the callout's own words: still creeping up at the end",
    ("r3-price-grpo-qwen35-alllayers", "advantage_collapse"): "0.38 over the run, 0.44 over the last quarter: info",
    ("r3-price-grpo-qwen35-alllayers", "plateau"): "14 flat steps after the rise: under the 20 the rule asks",
    ("r3-price-grpo-qwen35-lr1e-4", "advantage_collapse"): "0.31 over the run, 0.34 over the last quarter: info",
    ("r3-price-grpo-qwen35-lr1e-4", "kl_drift"): "KL 0 -> 0.086 in 20 steps: under the 0.1 a runaway needs",
    ("r3-rl4vlm-points24-a3c-pinned", "reward_hacking"): "no held-out score; the task success rate is a statistic of "
                                                         "the training episodes",
    ("r3-rl4vlm-points24-ppo-14iter", "no_learning"): "the reward rises -13.8 -> -12.2 (significantly) over 13 "
                                                      "steps, under the 20 the rule asks",
    ("r3-rookworld-grpo-1000step-tmux", "kl_drift"): "a KL term flat at 0.056 for 980 steps: under the bound",
    ("r3-rookworld-grpo-appended-lossblowup", "gradient_pathology"): "no gradient norm: loss_explosion, the loss's own "
                                                                     "detector, names the 1.3e8 (critical)",
    ("r3-rookworld-grpo-kl-dominated", "kl_drift"): "the callout's own words: constant and negative, not a drift "
                                                    "(negative_kl names it)",
    ("r3-tinker-arith-llama1b", "plateau"): "explained by saturation (the reward at 1.0, most groups all-correct): "
                                            "advantage_collapse names that cause, plateau stays quiet",
    ("r3-tinker-arith-llama1b", "negative_kl"): "optim/kl_sample_train_v1 is the sampler-vs-learner log-ratio, not a "
                                                "KL to the reference (kept under its own name)",
    ("r3-tinker-code-rl-100", "gradient_pathology"): "no gradient norm: loss_explosion names the 6.1e11",
    ("r3-tinker-code-rl-100", "plateau"): "the callout's own words: no rise to level off (no_learning names it)",
    ("r3-tinker-code-rl-frac50", "gradient_pathology"): "no gradient norm: loss_explosion names the -5.7e9",
    ("r3-tinker-code-rl-frac50", "no_learning"): "held-out pass@1 0.28 -> 0.33: the +0.05 the rule takes as learnt; "
                                                 "the callout: too short and noisy to call",
    ("r3-tinker-distill-on", "reward_hacking"): "no held-out score",
    ("r3-tinker-distill-on", "plateau"): "the objective is the teacher KL, not the reward, which never moves",
    ("r3-verifier-reinforce-naive-collapse", "no_learning"): "the held-out accuracy rose 0.475 -> 0.61: the rule takes "
                                                             "it as learnt",
    ("r3-verifier-reinforce-warmstart-regress", "no_learning"): "the reward fell 0.32 -> 0.04 ('has not improved, it "
                                                                "fell'); the callout calls a fall a regression only",
    ("r3-verifier-reinforce-warmstart-regress", "pinned_reward"): "the held-out accuracy is exactly 0.60 on 17 "
                                                                  "evaluations, as the callout itself says: a "
                                                                  "pinned score, which this detector names",
    ("r3-verl-intercode-grpo-kl-length-drift", "reward_hacking"): "a training gain of +0.03 within its noise: under "
                                                                  "the 0.20 a divergence needs",
    ("r3-verl-intercode-grpo-kl-length-drift", "plateau"): "a rise of 0.03: under the 0.05 the rule asks",
    ("r3-verl-intercode-grpo-kl-length-drift", "held_out_regression"): "0.707 -> 0.64 is -0.067, under 10% of the "
                                                                       "best (0.071)",
    ("r3-widget2code-grpo-glm4v-console", "advantage_collapse"): "44% of the recent steps all at the reward's floor: "
                                                                 "under the 0.50 a warning needs",
}

# the held-out runs of the first split, read after their table was reported (SPLIT.json: seen): what grposcope still
# misses there, and why. The callout is right; a change that finds one fails here, so that its entry goes
KNOWN_MISSES = {
    ("cas-threestage-stage2", "gradient_pathology"): "three spikes of 5-6x on a norm that is volatile throughout "
                                                     "(26 of 160 rows above 3): under 6 robust SDs on the log scale",
    ("dapo-vl3b-terminal-md", "gradient_pathology"): "12 of its 18 norms are exactly 0 (no_signal_steps): the 6 left "
                                                     "are under the 8 the spike test needs",
    ("dapo-vl3b-terminal-md", "reward_composition"): "the per-function rewards are in emoji summary lines, which the "
                                                     "console reader does not read",
    ("memredteam-stage1", "reward_composition"): "its terms are plain columns (retrieval_reward, noop_penalty, ...): "
                                                 "no name says they are the reward's parts",
    ("memredteam-stage1", "plateau"): "a gain of 0.42 against a per-step scatter of 0.23 (the rule needs 2x); binning "
                                      "the steps before the fit found it, but made two quiet runs fire (cas-wordle, "
                                      "verilog), so it was not kept",
    ("recsys-grpo-lambda1", "reward_hacking"): "its held-out columns (ndcg@10, recall@10) are not named as a score: "
                                               "--map ndcg@10=eval/accuracy reads them",
    ("recsys-grpo-lambda1", "reward_composition"): "its terms (ndcg_mean, cold_bonus_mean) are plain columns",
    ("v-retool-grpo-3b-inreward-kl005-collapse", "kl_drift"): "verl's in-reward KL (actor/reward_kl_penalty) is not "
                                                              "read as kl/mean: read so, v-retool-grpo-3b-kl0001-"
                                                              "stdfilter (0.55 -> 0.69, quiet by its callout) fires",
    ("v-retool-grpo-3b-inreward-kl005-collapse", "reward_hacking"): "the task score falls with the held-out score; "
                                                                    "the rising reward is the KL-penalised one",
    ("v-retool-grpo-3b-inreward-kl005-collapse", "reward_composition"): "one score and one penalty, not reward "
                                                                        "functions",
    # round 2 (seen after its table: bench/results/diagnose_real_runs_held_out_round2.txt)
    ("countdown-grpo-trl", "plateau"): "a gain of 0.118 against a scatter of 0.144 (the rule needs 2x) and a rise "
                                       "that is not significant (p = 0.39)",
    ("hotpotqa-grpo", "gradient_pathology"): "a norm volatile throughout (robust SD 1.7 on the log scale): its largest "
                                             "spike, 60x its local median, is 2.4 robust SDs out (the rule needs 6)",
    ("hotpotqa-grpo", "plateau"): "a gain of 0.042, under the rule's 0.05",
    ("hotpotqa-grpo-v2", "plateau"): "a gain of 0.031, under the rule's 0.05",
    ("incident-ops-grpo", "advantage_collapse"): "no zero-std share or reward std: the callout reads a batch "
                                                 "diversity penalty as the proxy",
    ("minimind-grpo-r1", "reward_composition"): "its parts (Fmt, Correct) are printed under names that do not say "
                                                "they are reward terms",
    ("unlearning-grpo-run3", "advantage_collapse"): "29.5% of its steps had all rewards equal: under the 50% a "
                                                    "warning needs (info from 30%)",
    ("unlearning-grpo-run3", "length_growth"): "+25% (66 -> 83 tokens): under the 1.5x the rule needs",
    # round 3
    ("r3-bitnet-grpo-g2-skipped", "reward_composition"): "its partial-credit terms are summed into one logged reward",
    ("r3-cs336-grpo-gsm8k-qonly-collapse", "reward_composition"): "its parts are printed as a histogram of outcome "
                                                                  "buckets, not read as reward functions",
    ("r3-cs336-grpo-gsm8k-r1zero-console", "reward_composition"): "its parts are printed as a histogram of outcome "
                                                                  "buckets, not read as reward functions",
    ("r3-deepretrieval-grpo-0p5b-negkl", "reward_composition"): "its terms (mrr_mean, penalty_mean, overlap_mean) are "
                                                                "plain columns: no name says they are the reward's",
    ("r3-deepretrieval-grpo-0p8b-30step", "reward_composition"): "format_penalty_mean is a plain column",
    ("r3-gemma2-grpo-resume-degenerate", "plateau"): "the callout's score is the summary lines' acc (17 points); the "
                                                     "per-sample reward (45 prints) is read as the reward",
    ("r3-gemma2-grpo-resume-degenerate", "pinned_reward"): "three printed steps at -1.2 at the end: under the 8 "
                                                           "points the rule asks",
    ("r3-rl4vlm-points24-a3c-pinned", "reward_composition"): "one total return, no reward functions logged",
    ("r3-rlsage-ppo-interleaved", "reward_composition"): "train/success_rate is a statistic, not a reward function",
    ("r3-rookworld-grpo-1000step-tmux", "gradient_pathology"): "a norm of 10-43 at every step against a clip of 1.0 "
                                                               "that the log does not give: no rule reads a steady "
                                                               "norm against the clip",
    ("r3-rookworld-grpo-1000step-tmux", "plateau"): "its reward is the printed table's Post column (not read)",
    ("r3-rookworld-grpo-1000step-tmux", "no_learning"): "its reward is the printed table's Post column (not read)",
    ("r3-rookworld-grpo-kl-dominated", "advantage_collapse"): "the per-group rewards are in per-sample Reward= lines "
                                                              "(not read)",
    ("r3-rookworld-grpo-kl-dominated", "gradient_pathology"): "a norm of 15-70 at every step against a clip the log "
                                                              "does not give",
    ("r3-rookworld-grpo-kl-dominated", "no_learning"): "its reward is in per-sample Reward= lines (not read)",
    ("r3-rookworld-grpo-kl-dominated", "pinned_reward"): "the pinned group is in per-sample Reward= lines (not read)",
    ("r3-tinker-distill-on", "truncation"): "every completion is exactly 4096 tokens; no truncation key, and the cap "
                                            "is not in the log",
    ("r3-widget2code-grpo-glm4v-console", "reward_composition"): "one score, no reward functions logged",
}


def calls(run: Path) -> dict[str, str]:
    section = (run / "CALLOUT.md").read_text(encoding="utf-8").split("Expected findings", 1)[-1]
    return {m.group(1): {"warn": "fire"}.get(m.group(2).lower(), m.group(2).lower())
            for line in section.splitlines() if (m := CALL.match(line))}


def given(run: Path) -> Path:
    files = sorted(p for p in run.rglob("*") if p.is_file() and p.name not in ("CALLOUT.md", "SOURCE.md"))
    return files[0] if len(files) == 1 and files[0].parent == run else run


@pytest.mark.parametrize("name", TUNING)
def test_a_tuning_run_reads_as_published_and_fires_what_its_callout_says(name):
    run = CORPUS / name
    expected = calls(run)
    assert expected, f"{name}: CALLOUT.md has no Expected findings"
    fired = set()
    for one in [part for read in load_runs(given(run), name) for part in parts(read)]:  # as the CLI reads them
        assert one.steps, name
        fired |= {f.detector for f in diagnose(one).findings if f.severity in ("warning", "critical")}
    for detector, call in expected.items():
        if (name, detector) in DISAGREE:
            continue
        if (name, detector) in KNOWN_MISSES:
            assert detector not in fired, f"{name}: {detector} is found now: remove it from KNOWN_MISSES"
            continue
        if call == "fire":
            assert detector in fired, f"{name}: {detector} did not fire (fired: {sorted(fired)})"
        elif call == "quiet":
            assert detector not in fired, f"{name}: {detector} fired, its callout says quiet"


def test_the_split_is_half_and_half_and_names_every_run_once():
    runs = sorted(p.name for p in CORPUS.iterdir() if (p / "CALLOUT.md").is_file())
    parts = [SPLIT, *SPLIT.get("added", [])]
    named = [r for part in parts for r in part["tuning"] + part["held_out"]]
    # a random half each, or (a batch added after the first held-out half was seen) every run held out
    assert all(abs(len(part["tuning"]) - len(part["held_out"])) <= 1 or (part["seed"] is None and not part["tuning"])
               for part in parts)
    assert {r for part in SPLIT["seen"] for r in part["runs"]} <= set(named)
    assert sorted(named) == runs and len(set(named)) == len(named)
