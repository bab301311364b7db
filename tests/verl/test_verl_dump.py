"""`grposcope report`'s reader on rollout dumps written by verl 0.9.1 itself: `RayPPOTrainer._write_generations`
(what `trainer.rollout_data_dir=DIR` calls every step) and its file logger (`trainer.logger=[...,'file']`).

Runs in .venv-verl (scripts/test_verl.sh); the main suite, without verl, skips it. The ACR family is checked
against values worked out by hand below, on shuffled rows, uneven groups and all-equal partial credit.
"""

from __future__ import annotations

import random

import pytest

ray_trainer = pytest.importorskip("verl.trainer.ppo.ray_trainer", reason="needs verl 0.9.1: bash scripts/test_verl.sh")
tracking = pytest.importorskip("verl.utils.tracking")

from grposcope.runs import load_run, run_kind  # noqa: E402

# (prompt, scores) per group. Step 1: A all-correct, B all-wrong, C mixed with 3 rows (uneven), D partial
# credit 0.3 on every row (collapsed, all-wrong under the threshold 0.5). Step 2: A mixed with 5 rows, B
# all-wrong with 2, C partial credit 0.7 on every row (all-correct), E a single rollout (no group).
STEPS = {
    1: [("A", [1.0] * 4), ("B", [0.0] * 4), ("C", [1.0, 0.0, 1.0]), ("D", [0.3] * 4)],
    2: [("A", [1.0, 1.0, 0.0, 1.0, 1.0]), ("B", [0.0, 0.0]), ("C", [0.7] * 4), ("E", [1.0])],
}


def write_with_verl(folder, seed=0):
    rng = random.Random(seed)
    for step, groups in STEPS.items():
        rows = [(f"Question {p}?", f"reply {j}", p, score) for p, scores in groups for j, score in enumerate(scores)]
        rng.shuffle(rows)  # verl's balance_batch reorders rows; the dump has no uid
        inputs, outputs, gts, scores = map(list, zip(*rows))
        ray_trainer.RayPPOTrainer._write_generations(inputs, outputs, gts, scores, {"acc": list(scores)},
                                                     str(folder), step)


def test_the_acr_family_of_verls_own_dump_matches_the_hand_values(tmp_path):
    dump = tmp_path / "rollouts"
    write_with_verl(dump)
    assert sorted(p.name for p in dump.iterdir()) == ["1.jsonl", "2.jsonl"] and run_kind(dump) == "verl"
    run = load_run(dump)
    assert run.source == "verl" and run.steps == [1, 2]
    # step 1: 3 of 4 collapsed (A correct; B, D wrong); step 2: 2 of 3 (C correct, B wrong), E left out
    assert run.values("collapse/acr") == [0.75, pytest.approx(2 / 3)]
    assert run.values("collapse/acr_all_correct") == [0.25, pytest.approx(1 / 3)]
    assert run.values("collapse/acr_all_wrong") == [0.5, pytest.approx(1 / 3)]
    assert run.values("collapse/acr_ema") == [0.75, pytest.approx(0.9 * 0.75 + 0.1 * 2 / 3)]
    assert run.values("collapse/acr_cumulative") == [0.75, pytest.approx(5 / 7)]
    assert run.values("collapse/acr_100") == [0.75, pytest.approx((0.75 + 2 / 3) / 2)]
    assert run.values("collapse/volatility") == [0.0, pytest.approx((0.75 - 2 / 3) / 2)]
    assert run.values("groups") == [4, 3]
    assert any("2.jsonl: 1 prompt with a single rollout" in note for note in run.notes)


def test_verls_file_logger_beside_the_dump_is_read_with_its_names_mapped(tmp_path, monkeypatch):
    write_with_verl(tmp_path / "rollouts")
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    logger = tracking.FileLogger("project", "experiment")
    for step in STEPS:
        logger.log({"actor/entropy": 0.9, "actor/kl_loss": 0.7, "critic/score/mean": 0.4}, step)
    logger.finish()
    run = load_run(tmp_path / "rollouts")
    assert "with verl's file logger" in run.found
    assert run.values("entropy/mean") == [0.9, 0.9] and run.values("kl/mean") == [0.7, 0.7]
    assert run.values("reward/mean") == [0.4, 0.4]  # verl's own, not the rollouts' mean
    assert run.values("alarm/kl_drift") == [1.0, 1.0]  # 0.7 > the default kl_bound 0.5
