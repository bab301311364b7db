"""`grposcope forecast --from_run` and `grposcope audit-rewards` on a stock TRL output folder and a verl rollout
dump: the (k, successes) counts of the last N steps worked out by hand from the files, the notes and the
measured ACR, and the verifiers' verdicts on the completions those runs wrote.

The TRL folder is written by stock `trl.GRPOTrainer` itself (a tiny model, 4 steps, once per module). The verl
dump is written here with plain json, line for line as verl 0.9.1's `RayPPOTrainer._write_generations` writes
it (verl is not installed for this suite); tests/verl checks the reader against verl's own writer.
"""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

import grposcope.cli.audit  # noqa: F401  registers audit-rewards on the app
import grposcope.cli.forecast  # noqa: F401  registers forecast on the app
from grposcope.cli.app import app
from grposcope.reports.run_counts import counts_from_run

G = 4  # num_generations of the TRL run, rollout.n of the verl dump
STEPS = 4
VERIFIERS = ["--verifiers", "boxed_exact,last_number,grposcope_default"]  # no math-verify worker needed


def _cli(*args):
    return CliRunner().invoke(app, [*map(str, args)])


def _text(result) -> str:
    return " ".join(result.output.split())


# ---------------------------------------------------------------- a verl dump


# step -> groups (input, gts, [(output, score), ...]); the score is the run's own reward (a strict boxed check)
A = ("What is 1 + 2 ?", "3")
B = ("What is 2 + 3 ?", "5")
C = ("What is 3 + 4 ?", "7")
D = ("What is 9 + 9 ?", None)  # a data row without reward_model.ground_truth: verl writes gts null
A_MIXED = [("\\boxed{3}", 1.0), ("\\boxed{3}", 1.0), ("3", 0.0), ("the answer is 4", 0.0)]
B_RIGHT = [("\\boxed{5}", 1.0)] * 4
C_WRONG = [("7", 0.0), ("seven", 0.0), ("\\boxed{6}", 0.0), ("7 or 8", 0.0)]
VERL = {
    1: [(*A, A_MIXED), (*B, B_RIGHT), (*C, C_WRONG)],
    2: [(*A, A_MIXED), (*B, B_RIGHT), (*C, C_WRONG)],
    3: [(*A, [("\\boxed{3}", 1.0)] * 4), (*B, B_RIGHT), (*C, C_WRONG)],
    # A lost a rollout (a group of 3); D has no reference answer
    4: [(*A, [("\\boxed{3}", 1.0), ("3", 0.0), ("3", 0.0)]), (*B, B_RIGHT), (*C, C_WRONG), (*D, [("18", 0.0)] * 4)],
}


def write_generations(inputs, outputs, gts, scores, reward_extra_infos_dict, dump_path, global_steps):
    """verl 0.9.1's RayPPOTrainer._write_generations, as it writes a file (os.makedirs and print left out)."""
    n = len(inputs)
    base_data = {"input": inputs, "output": outputs, "gts": gts, "score": scores, "step": [global_steps] * n}
    for k, v in reward_extra_infos_dict.items():
        if len(v) == n:
            base_data[k] = v
    with open(dump_path / f"{global_steps}.jsonl", "w") as f:
        for i in range(n):
            entry = {k: v[i] for k, v in base_data.items()}
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")


def write_verl_dump(folder, steps=VERL):
    folder.mkdir()
    for step, groups in steps.items():
        rows = [(prompt, output, gts, score) for prompt, gts, outputs in groups for output, score in outputs]
        random.Random(step).shuffle(rows)  # verl balances batches: a group's rows need not be together
        inputs, outputs, gts, scores = map(list, zip(*rows))
        write_generations(inputs, outputs, gts, scores, {"acc": scores}, folder, step)
    return folder


@pytest.fixture
def verl_dump(tmp_path):
    return write_verl_dump(tmp_path / "dump")


def test_forecast_from_a_verl_dump_takes_the_last_n_steps(verl_dump, tmp_path):
    # steps 3 and 4, successes = score >= 0.5 (the rewards lie in [0, 1]):
    # step 3: A 4 of 4, B 4 of 4, C 0 of 4; step 4: A 1 of 3, B 4 of 4, C 0 of 4, D 0 of 4
    source, counts, notes, measured = counts_from_run(verl_dump, 2, None)
    assert sorted(counts) == sorted([(4, 4), (4, 4), (4, 0), (3, 1), (4, 4), (4, 0), (4, 0)])
    # collapsed groups: step 3 all three (1.0); step 4 B, C and D of four (0.75): mean 0.875, SE |1 - 0.75| / 2
    assert measured["g"] == 4 and measured["steps"] == 2
    assert (measured["acr"], measured["acr_se"]) == (pytest.approx(0.875), pytest.approx(0.125))
    out = tmp_path / "f.json"
    result = _cli("forecast", "--from_run", verl_dump, "--steps", 2, "--group_sizes", "2,4", "--budget", 16,
                  "--mc_groups", 20, "--json", out)
    assert result.exit_code == 0, result.output
    text = _text(result)
    assert "7 prompts from" in text and "(verl)" in text
    assert (f"note: from 7 groups of steps 3-4 (the last 2 steps with rollouts, --steps 2) of a verl rollout dump "
            f"({{step}}.jsonl) {verl_dump}: groups of 4 give an unbiased forecast only for G <= 4") in text
    assert "note: group sizes: 6 groups of 4, 1 group of 3" in text
    assert "a completion succeeds when its reward is >= 0.5 (grposcope's default for rewards in [0, 1]" in text
    assert "measured collapse/acr over the 2 steps (the rollout files, as grposcope report computes it), G = 4: " \
           "0.875 ± 0.125" in text
    data = json.loads(out.read_text())
    assert data["prompts"] == 7 and data["measured"]["acr"] == pytest.approx(0.875)
    # G = 4 from k = 4 is exact: collapsed unless 0 < c < 4, i.e. every group of 4 here; A's 1 of 3 -> the
    # plug-in (1/3)^4 + (2/3)^4 = 17/81
    assert data["group_sizes"][1]["acr"] == pytest.approx((6 + 17 / 81) / 7)
    # more steps asked for than the dump has: all four
    _, counts, notes, measured = counts_from_run(verl_dump, 10, None)
    assert len(counts) == 13 and measured["steps"] == 4
    assert "of steps 1-4 (the last 4 steps with rollouts, --steps 10)" in notes[0]


def test_forecast_from_a_verl_dump_of_other_rewards_uses_their_midpoint(tmp_path):
    # scores 0 and 2: the default threshold is the midpoint, 1; --success_threshold 2.5 makes every one a failure
    dump = write_verl_dump(tmp_path / "dump", {1: [(*A, [("a", 2.0), ("b", 0.0), ("c", 2.0), ("d", 2.0)])]})
    _, counts, notes, _ = counts_from_run(dump, 5, None)
    assert counts == [(4, 3)]
    assert any("is >= 1 (the midpoint of the rewards seen; --success_threshold sets it); rewards seen in [0, 2]"
               in note for note in notes)
    assert counts_from_run(dump, 5, 2.5)[1] == [(4, 0)]


def test_forecast_from_a_folder_that_is_no_run(tmp_path):
    (tmp_path / "empty").mkdir()
    result = _cli("forecast", "--from_run", tmp_path / "empty")
    assert result.exit_code == 2 and "holds none of: completions.jsonl (a grposcope run)" in _text(result)


def test_audit_a_verl_dump_scores_gts_with_every_verifier(verl_dump, tmp_path):
    # per step (boxed_exact, last_number, grposcope_default right): A (2, 3, 3) ("\boxed{3}" twice, "3", and
    # "the answer is 4"), B (4, 4, 4), C (0, 1, 1) (only "7" is right, and not boxed); step 3: A (4, 4, 4);
    # step 4: A (1, 3, 3), D left out (no gts). Totals: boxed 6 + 6 + 8 + 5 = 25, the others 8 + 8 + 9 + 8 = 33
    out = tmp_path / "audit.json"
    with pytest.warns(RuntimeWarning, match="4 rollouts without a reference answer in 'gts'"):
        result = _cli("audit-rewards", verl_dump, *VERIFIERS, "--examples", 1, "--json", out)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["pairs"] == 47 and report["groups"] == {"whole": 11, "partial": 1}  # step 4's A: 3 of 4
    rights = {name: (v["right"], v["judged"], v["all_wrong_groups"]) for name, v in report["verifiers"].items()}
    assert rights == {"boxed_exact": (25, 47, 4), "last_number": (33, 47, 0), "grposcope_default": (33, 47, 0)}
    assert f"{verl_dump}: 47 pairs, 11 groups (and 1 cut short, left out)" in _text(result)
    assert "step " in _text(result) and ", row " in _text(result)  # examples say where they are
    # the last step only: A (1, 3, 3), B (4, 4, 4), C (0, 1, 1)
    with pytest.warns(RuntimeWarning):
        result = _cli("audit-rewards", verl_dump, *VERIFIERS, "--steps", 1, "--json", out, "--overwrite")
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["pairs"] == 11 and report["groups"] == {"whole": 2, "partial": 1}
    assert [report["verifiers"][n]["right"] for n in ("boxed_exact", "last_number", "grposcope_default")] == [5, 8, 8]


def test_audit_a_verl_dump_without_any_gts_is_refused(tmp_path):
    dump = write_verl_dump(tmp_path / "dump", {1: [(*D, [("18", 0.0)] * 4)]})
    result = _cli("audit-rewards", dump, *VERIFIERS)
    assert result.exit_code == 2
    assert "no rollout has a reference answer in 'gts'" in _text(result)
    result = _cli("audit-rewards", dump, "--answer_column", "answer")
    assert result.exit_code == 2 and "--answer_column is for a stock TRL output folder" in _text(result)


def test_audit_steps_keeps_the_last_steps_of_a_completions_log(tmp_path):
    log = tmp_path / "completions.jsonl"
    log.write_text("".join(json.dumps({"step": step, "prompt": "p", "completion": text, "rewards": {"f": 0.0},
                                       "reward": 0.0, "advantage": 0.0, "answer": "3"}) + "\n"
                           for step, text in ((1, "3"), (1, "4"), (2, "3"), (2, "3"))))
    out = tmp_path / "audit.json"
    result = _cli("audit-rewards", log, *VERIFIERS, "--steps", 1, "--json", out)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["pairs"] == 2 and report["verifiers"]["last_number"]["right"] == 2  # step 2's two "3"


@pytest.mark.parametrize("args, message", [
    (["--steps", 0], "--steps must be >= 1"),
    (["--answer_column", "answer"], "--answer_column names the answer column of a stock TRL output folder"),
])
def test_audit_options_for_runs_are_checked(tmp_path, args, message):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"completion": "3", "answer": "3"}) + "\n")
    result = _cli("audit-rewards", pairs, *VERIFIERS, *args)
    assert result.exit_code == 2 and message in _text(result)


# ---------------------------------------------------------------- a stock TRL run


def kinds_and_parity(prompts, completions, kind, answer, log_extra, **kwargs):
    """1 for kind 0, 0 for kind 1, the parity of the word count for kind 2 (mixed groups). Logs two extra
    columns through TRL's own log_extra: `kind` (a number, so a reader that took every numeric column for a
    reward would add it in) and `answer` (none for kind 2)."""
    log_extra("kind", list(kind))
    log_extra("answer", [a if k != 2 else None for a, k in zip(answer, kind)])
    return [1.0 if k == 0 else 0.0 if k == 1 else float(len(c.split()) % 2) for c, k in zip(completions, kind)]


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory):
    """A stock TRL 1.16 output folder: 4 steps of 2 prompts x 4 completions, completions/*.parquet at every
    step and checkpoint-4/trainer_state.json (about 15 s on a CPU)."""
    trl = pytest.importorskip("trl")
    pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    import torch
    from conftest import make_tiny_llama, make_tiny_tokenizer

    out = tmp_path_factory.mktemp("trl") / "out"
    rows = [{"prompt": f"What is {i} + {i} ?", "kind": i % 3, "answer": str(2 * i)} for i in range(12)]
    config = trl.GRPOConfig(output_dir=str(out), per_device_train_batch_size=8, num_generations=G,
                            max_completion_length=6, max_steps=STEPS, logging_steps=1, save_strategy="steps",
                            save_steps=STEPS, report_to="none", use_cpu=True, bf16=False, learning_rate=1e-3,
                            seed=0, disable_tqdm=True, log_completions=True)
    torch.manual_seed(0)
    trl.GRPOTrainer(model=make_tiny_llama(), reward_funcs=kinds_and_parity, args=config,
                    train_dataset=datasets.Dataset.from_list(rows), processing_class=make_tiny_tokenizer()).train()
    return out


def _trl_tables(folder, steps):
    """{step: the columns of completions_{step:05d}.parquet}, read with pyarrow alone."""
    import pyarrow.parquet as pq

    return {s: pq.read_table(folder / "completions" / f"completions_{s:05d}.parquet").to_pydict() for s in steps}


def test_forecast_from_a_stock_trl_run_takes_the_last_n_steps(trl_run, tmp_path):
    tables = _trl_tables(trl_run, (3, 4))
    assert {"kind", "answer", "kinds_and_parity"} <= set(tables[3])  # the log_extra columns are there
    # by hand: TRL repeats each prompt G times in a row; the reward is the one reward function's column
    # (trainer_state's rewards/kinds_and_parity/mean), not the numeric log_extra column `kind`
    expected, acr = [], []
    for step in (3, 4):
        rewards, prompts = tables[step]["kinds_and_parity"], tables[step]["prompt"]
        blocks = [rewards[i:i + G] for i in range(0, len(rewards), G)]
        assert all(len(set(prompts[i:i + G])) == 1 for i in range(0, len(prompts), G))
        expected += [(G, sum(r >= 0.5 for r in block)) for block in blocks]
        acr.append(sum(len(set(block)) == 1 for block in blocks) / len(blocks))
    source, counts, notes, measured = counts_from_run(trl_run, 2, None)
    assert counts == expected and len(counts) == 4
    assert measured["steps"] == 2 and measured["acr"] == pytest.approx(sum(acr) / 2)
    out = tmp_path / "f.json"
    result = _cli("forecast", "--from_run", trl_run, "--steps", 2, "--group_sizes", "2,4", "--budget", 16,
                  "--mc_groups", 20, "--json", out)
    assert result.exit_code == 0, result.output
    text = _text(result)
    assert (f"note: from 4 groups of steps 3-4 (the last 2 steps with rollouts, --steps 2) of a stock TRL output "
            f"folder (completions/*.parquet) {trl_run}: groups of 4 give an unbiased forecast only for G <= 4") in text
    assert f"measured collapse/acr over the 2 steps (the rollout files, as grposcope report computes it), G = 4: " \
           f"{sum(acr) / 2:.3f}" in text
    data = json.loads(out.read_text())
    assert [round(p * G) for p in data["pass_rates"]] == [c for _, c in expected]


def test_audit_a_stock_trl_run_needs_its_answer_column(trl_run):
    result = _cli("audit-rewards", trl_run, *VERIFIERS)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {trl_run} is a stock TRL output folder: pass "
                                                   "--answer_column NAME")
    assert "(columns of completions_00004.parquet: step, prompt, completion, kinds_and_parity" in lines[0]
    assert "answer" in lines[0] and "log_extra('answer', answer)" in lines[0]
    result = _cli("audit-rewards", trl_run, *VERIFIERS, "--answer_column", "solution")
    assert result.exit_code == 2 and "has no column 'solution'" in _text(result)


def test_audit_a_stock_trl_run_is_the_audit_of_its_rows_as_pairs(trl_run, tmp_path):
    # the same rows written as a pairs JSONL by hand (pyarrow, kind 2's rows have no answer): both audits agree
    tables = _trl_tables(trl_run, (3, 4))
    rows = [{"step": s, "prompt": p, "completion": c, "answer": a}
            for s, t in tables.items() for p, c, a in zip(t["prompt"], t["completion"], t["answer"]) if a is not None]
    assert 0 < len(rows) < 16  # the run drew kind-2 prompts in steps 3-4: some rows are left out
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    by_hand, from_run = tmp_path / "hand.json", tmp_path / "run.json"
    assert _cli("audit-rewards", pairs, *VERIFIERS, "--json", by_hand).exit_code == 0
    with pytest.warns(RuntimeWarning, match=f"{16 - len(rows)} rollouts without a reference answer in the column "
                                            "'answer'"):
        result = _cli("audit-rewards", trl_run, *VERIFIERS, "--answer_column", "answer", "--steps", 2,
                      "--json", from_run)
    assert result.exit_code == 0, result.output
    hand, run = json.loads(by_hand.read_text()), json.loads(from_run.read_text())
    assert run["pairs"] == len(rows) and run["groups"] == hand["groups"] and run["groups"]["whole"] >= 1
    assert run["verifiers"] == hand["verifiers"]
