"""What the held-out runs of the real-run corpus taught, once their tables had been reported (issue 54): each case
the smallest log that shows it, each failing before its change. The runs themselves are tuning runs now
(tests/fixtures/real_runs/SPLIT.json, `seen`); their reported tables are kept in bench/results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grposcope.diagnose import diagnose
from grposcope.runs import load_run
from grposcope.runs.catalogue import resolve


def _log(tmp_path, rows: list[dict]):
    path = tmp_path / "training_log.json"  # a JSON list of TRL log dicts, as notebooks save log_history
    path.write_text(json.dumps(rows))
    return diagnose(load_run(path))


def _by(d, detector):
    return next((f for f in d.findings if f.detector == detector), None)


def test_statistics_under_a_reward_name_are_read_and_never_taken_for_a_function():
    assert resolve("critic/score/frac_zero_std")[0] == "collapse/acr"
    assert resolve("critic/score/correctness/mean")[0] == "reward/correctness/mean"
    assert resolve("critic/score/correctness/std")[0] == "reward/correctness/std"
    assert resolve("train/score/max")[0] == "reward/max"
    assert resolve("rewards/frac_zero_std")[0] == "collapse/acr"  # TRL's rewards/<func> would make it a function
    assert resolve("rewards/accuracy_reward/mean")[0] == "reward/accuracy_reward/mean"
    assert resolve("critic/score/a/b/mean") is None and resolve("score/p50") is None


def test_grposcope_own_sampled_evaluation_keys_are_known():
    # a run with eval_num_samples logs eval/avg@k and eval/pass@j: they were listed as keys the catalogue
    # does not know, in the diagnosis of grposcope's own quickstart
    for key in ("eval/avg@4", "eval/pass@2/hard", "eval/avg@8/easy"):
        assert resolve(key) == (key, 50)


def _equal_rewards(n: int, alike: set[int], reward=lambda s: 0.4 + 0.01 * (s % 5),
                   grad=lambda s, a: 0.01 if a else 0.5):
    # the reward moves (one that never moves in the whole run is not what trains it: no_signal_steps says info)
    return [{"step": s, "loss": 0.0, "reward": reward(s), "reward_std": 0.0 if s in alike else 0.3,
             "grad_norm": grad(s, s in alike), "kl": 0.01} for s in range(1, n + 1)]


def test_kl_only_steps_warn_once_unless_the_collapse_already_names_them(tmp_path):
    rng = np.random.default_rng(0)
    # 26% of steps with every reward equal, spread evenly: no collapse warning, so no_signal_steps warns
    some = set(range(2, 101, 4)) | {99}
    d = _log(tmp_path, _equal_rewards(100, some))
    assert _by(d, "no_signal_steps").severity == "warning"
    # 40% of them, clustered late (a rising collapse): advantage_collapse warns and counts them; no second warning
    late = {int(s) for s in rng.choice(np.arange(50, 101), 40, replace=False)}
    d = _log(tmp_path, _equal_rewards(100, late))
    assert _by(d, "advantage_collapse").severity in ("warning", "critical")
    finding = _by(d, "no_signal_steps")
    assert finding.severity == "info" and "advantage_collapse counts them" in " ".join(finding.evidence)
    # most steps: both
    most = set(range(1, 101)) - set(range(1, 101, 3))
    assert _by(_log(tmp_path, _equal_rewards(100, most)), "no_signal_steps").severity == "warning"


def test_a_norm_that_falls_with_the_reward_signal_is_not_a_vanishing_gradient(tmp_path):
    alike = set(range(6, 41)) - {7, 12, 17, 23, 29, 35}  # the policy answers alike; a KL term keeps a tiny norm
    rows = _equal_rewards(40, alike, reward=lambda s: 0.64, grad=lambda s, a: 0.002 if a else 0.6)
    d = _log(tmp_path, rows)
    assert _by(d, "gradient_pathology") is None
    # the same norms falling on steps that did have signal: vanished
    rows = _equal_rewards(40, set(), grad=lambda s, a: 0.6 * 0.85**s)
    assert "vanished" in _by(_log(tmp_path, rows), "gradient_pathology").title


def test_a_held_out_rise_the_training_reward_does_not_share_is_no_plateau(tmp_path):
    rng = np.random.default_rng(1)
    rows = [{"step": s, "loss": 0.0, "reward": float(-0.55 + rng.normal(0, 0.05)), "grad_norm": 1.0}
            for s in range(1, 161)]
    evals = {20: -0.48, 40: -0.40, 60: -0.30, 80: -0.33, 100: -0.28, 120: -0.31, 140: -0.27, 160: -0.30}
    rows += [{"step": s, "eval_reward": v} for s, v in evals.items()]
    assert _by(_log(tmp_path, rows), "plateau") is None
    # the training reward rising then flat with it: a plateau
    rows = [{**r, "reward": min(-0.55 + 0.01 * r["step"], 0.05) + float(rng.normal(0, 0.01))} if "reward" in r
            else r for r in rows]
    assert _by(_log(tmp_path, rows), "plateau") is not None


def test_a_common_reward_neither_0_nor_1_is_not_called_all_correct(tmp_path):
    alike = set(range(6, 41)) - {7, 12, 17}
    d = _log(tmp_path, _equal_rewards(40, alike, reward=lambda s: 0.64))
    collapse = _by(d, "advantage_collapse")
    assert "all-correct: the policy" not in collapse.title
    text = " ".join(collapse.evidence)
    assert "0 scored 0 and 0 scored 1" in text and "neither 0 nor 1" in text and "99%" not in text
    # on a 0/1 reward the equal steps say which side they fell on
    d = _log(tmp_path, _equal_rewards(40, alike, reward=lambda s: 1.0 if s in alike else 0.6))
    assert "all-correct" in _by(d, "advantage_collapse").title


def test_the_cost_line_counts_the_steps_whose_rewards_were_all_equal(tmp_path):
    d = _log(tmp_path, _equal_rewards(40, set(range(1, 41, 2))))
    assert d.cost.steps_without_signal == 20 and "20 of 40 steps without reward signal" in d.cost.line()


# round 2


def test_a_json_object_that_holds_the_list_of_logs_is_read(tmp_path):
    rows = [{"step": 10 * s, "loss": 0.0, "reward": 0.6, "grad_norm": 0.0 if s % 2 else 0.3,
             "frac_reward_zero_std": 0.6} for s in range(1, 31)]
    path = tmp_path / "training_metrics.json"
    path.write_text(json.dumps({"total_steps": 300, "steps": rows}, indent=2))  # pretty-printed: a bare `{` line
    run = load_run(path)
    assert run.steps == [10 * s for s in range(1, 31)] and run.values("collapse/acr")[0] == 0.6


def test_progress_counted_lines_of_a_hand_written_loop_are_read(tmp_path):
    lines = ["nohup: ignoring input", "Model Params: 30.03M"]
    lines += [f"Epoch:[1/1]({s}/500), Reward: {0.3 + 0.001 * s:.4f}, Fmt: 1.00, KL_ref: 0.0004, Avg Len: 129, "
              f"Actor Loss: 0.0001, LR: 0.00000100" for s in range(1, 41)]
    path = tmp_path / "r1_main.log"
    path.write_text("\n".join(lines) + "\n")
    run = load_run(path)
    assert run.steps == list(range(1, 41))
    assert run.read_as["Avg Len"] == "completion/mean_length" and run.read_as["KL_ref"] == "kl/mean"
    assert run.values("reward/mean")[-1] == pytest.approx(0.34)


def test_another_loops_metrics_jsonl_is_read_by_its_own_names(tmp_path):
    rows = [{"step": s, "reward": 1.0, "frac_reward_zero_std": 0.6, "truncated_rate": 0.3, "grad_norm": 0.02}
            for s in range(1, 41)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = load_run(tmp_path)
    assert run.source != "grposcope" and run.values("collapse/acr")[0] == 0.6
    assert run.values("completion/truncated_frac")[0] == 0.3
    assert {"advantage_collapse", "truncation"} <= {f.detector for f in diagnose(run).findings}
