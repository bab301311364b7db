"""`grposcope report` on runs that never imported grposcope: stock TRL 1.16 output folders written by
`trl.GRPOTrainer` itself (tiny in-process Llama, CPU, log_completions=True), and verl rollout dumps.

verl is not installed in the main environment: the dumps here are written line by line in the format of verl
0.9.1's `RayPPOTrainer._write_generations`; tests/verl/test_verl_dump.py writes them with that function itself.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

trl = pytest.importorskip("trl")
pq = pytest.importorskip("pyarrow.parquet")

from conftest import make_tiny_llama, make_tiny_tokenizer  # noqa: E402

from grposcope.cli import app  # noqa: E402
from grposcope.reports.figures import run_figures  # noqa: E402
from grposcope.reports.render import STEP_COLUMNS  # noqa: E402
from grposcope.runs import ReadOptions, load_run, run_kind  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
G = 4
PROMPTS = [{"prompt": f"What is {i} + {i} ?", "kind": i % 3} for i in range(12)]


def kind_of(prompt: str) -> int:
    """The kind of a prompt, read back from its text: its number mod 3."""
    return int(prompt.split()[2]) % 3


def scripted(prompts, completions, kind, **kwargs):
    """kind 0: all correct, kind 1: all wrong, kind 2: the first half of each group correct (mixed)."""
    return [1.0 if k == 0 else 0.0 if k == 1 else float(i % G < G // 2) for i, k in enumerate(kind)]


def train_stock(out, **overrides):
    """Stock trl.GRPOTrainer (not grposcope's subclass) for a few steps; returns its output folder."""
    from datasets import Dataset

    values = dict(output_dir=str(out), per_device_train_batch_size=8, num_generations=G, max_completion_length=4,
                  max_steps=3, logging_steps=1, save_strategy="steps", save_steps=100, report_to="none",
                  use_cpu=True, bf16=False, learning_rate=1e-3, seed=0, disable_tqdm=True, log_completions=True)
    values.update(overrides)
    torch.manual_seed(0)
    trainer = trl.GRPOTrainer(model=make_tiny_llama(), reward_funcs=scripted, args=trl.GRPOConfig(**values),
                              train_dataset=Dataset.from_list(PROMPTS), processing_class=make_tiny_tokenizer())
    trainer.train()
    trainer.state.save_to_json(str(out / "trainer_state.json"))  # as trainer.save_state() does
    return out


@pytest.fixture(scope="module")
def stock_trl(tmp_path_factory):
    return train_stock(tmp_path_factory.mktemp("trl") / "out")


@pytest.fixture(scope="module")
def stock_trl_every_other(tmp_path_factory):
    """Two optimizer steps per generation: the files of steps 2 and 4 repeat the batches of steps 1 and 3."""
    return train_stock(tmp_path_factory.mktemp("trl2") / "out", max_steps=4, steps_per_generation=2,
                       per_device_train_batch_size=4)


def trl_history(folder):
    state = json.loads((folder / "trainer_state.json").read_text())
    return {r["step"]: r for r in state["log_history"] if "frac_reward_zero_std" in r}


def test_a_stock_trl_run_is_read_from_its_own_files(stock_trl):
    assert run_kind(stock_trl) == "trl"
    run = load_run(stock_trl)
    assert run.source == "trl" and run.found.startswith("a stock TRL output folder (3 completions parquet files")
    assert run.steps == [1, 2, 3] and run.steps_trained is None
    # the independent check: TRL's own frac_reward_zero_std (0/1 rewards, group scaling, one generation a step)
    history = trl_history(stock_trl)
    assert run.values("collapse/acr") == [history[s]["frac_reward_zero_std"] for s in run.steps]
    for step in run.steps:  # the split, against the kinds of the prompts each file holds
        table = pq.read_table(stock_trl / "completions" / f"completions_{step:05d}.parquet").to_pydict()
        kinds = [kind_of(p) for p in table["prompt"][::G]]
        i = run.steps.index(step)
        assert run.values("collapse/acr_all_correct")[i] == kinds.count(0) / len(kinds)
        assert run.values("collapse/acr_all_wrong")[i] == kinds.count(1) / len(kinds)
        assert run.values("groups")[i] == len(kinds) == 2
        # TRL's advantages: the collapsed groups are exactly those whose advantages are all 0
        assert run.values("collapse/acr_post")[i] == run.values("collapse/acr")[i]
    acr = run.values("collapse/acr")
    assert run_figures(run).acr_100 == pytest.approx(sum(acr) / 3)
    assert run.values("entropy/mean") == [history[s]["entropy"] for s in run.steps]  # TRL's, for its alarm


def test_the_cli_reports_a_stock_trl_run_beside_a_verl_dump_with_steps_csv(stock_trl, tmp_path):
    dump = tmp_path / "verl_dump"
    write_verl_dump(dump, {1: VERL_STEP_1, 2: VERL_STEP_2})
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", str(stock_trl), str(dump), str(FIXTURES / "quickstart"), "--output",
                                      str(out)])
    assert result.exit_code == 0, result.output
    assert "quickstart: read a grposcope run (metrics.jsonl)" in result.output
    assert "out: read a stock TRL output folder (3 completions parquet files, steps 1-3" in result.output
    assert "verl_dump: read a verl rollout dump (2 files {step}.jsonl, 26 rollouts in 7 groups" in result.output
    rows = list(csv.DictReader((out / "steps.csv").open()))
    assert list(rows[0]) == ["run", "step", *STEP_COLUMNS]
    assert [(r["run"], r["step"]) for r in rows][:5] == [("out", "1"), ("out", "2"), ("out", "3"),
                                                         ("verl_dump", "1"), ("verl_dump", "2")]
    quickstart = [r for r in rows if r["run"] == "quickstart"]
    assert len(quickstart) == 20 and quickstart[0]["groups"] == "" and quickstart[0]["collapse/acr"] != ""
    verl = {r["step"]: r for r in rows if r["run"] == "verl_dump"}
    first = verl["1"]
    assert (first["collapse/acr"], first["collapse/acr_all_correct"], first["groups"]) == ("0.75", "0.25", "4")
    assert verl["1"]["collapse/acr_post"] == ""  # verl writes no advantages: left empty, not 0
    text = (out / "report.md").read_text()
    assert "read a verl rollout dump" in text and "[steps.csv](steps.csv)" in text
    assert "data:image/png;base64," in (out / "report.html").read_text()


def test_logs_of_part_of_a_run_say_which_steps_they_saw(stock_trl_every_other, tmp_path):
    files = sorted(p.name for p in (stock_trl_every_other / "completions").iterdir())
    assert files == [f"completions_{s:05d}.parquet" for s in (1, 2, 3, 4)]  # TRL logged every step
    run = load_run(stock_trl_every_other)
    assert [s for s, _ in zip(*run.points("collapse/acr"))] == [1, 3]  # 2 and 4 repeat 1 and 3: counted once
    assert run.steps_trained == 4
    assert any("2 files repeat the generation batch of the file before" in n for n in run.notes)
    assert any("computed from the rollouts of 2 steps (1, 3)" in n and "acr_100 is the mean ACR of the 2 seen "
               "steps among steps 1-100" in n for n in run.notes)
    result = CliRunner().invoke(app, ["report", str(stock_trl_every_other), "--output", str(tmp_path / "r")])
    assert result.exit_code == 0 and "│ 2 of 4 " in result.output  # the steps column


# --------------------------------------------------------------------------- verl dumps (verl's line format)

# (prompt, scores) per group; rows are shuffled within a step when written
VERL_STEP_1 = [("A", [1.0] * 4), ("B", [0.0] * 4), ("C", [1.0, 0.0, 1.0]), ("D", [0.3] * 4)]  # uneven C, partial D
VERL_STEP_2 = [("A", [1.0, 1.0, 0.0, 1.0, 1.0]), ("B", [0.0, 0.0]), ("C", [0.7] * 4)]


def write_verl_dump(folder, steps, seed=0):
    """Lines as verl 0.9.1's _write_generations writes them (json.dumps(entry, ensure_ascii=False,
    default=str) per rollout), rows shuffled as balance_batch leaves them."""
    rng = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for step, groups in steps.items():
        rows = [{"input": f"prompt {p}", "output": f"answer {j}", "gts": p, "score": s, "step": step, "acc": s}
                for p, scores in groups for j, s in enumerate(scores)]
        order = torch.randperm(len(rows), generator=rng).tolist()
        with (folder / f"{step}.jsonl").open("w") as f:
            for i in order:
                f.write(json.dumps(rows[i], ensure_ascii=False, default=str) + "\n")


def test_a_verl_dump_gives_the_acr_family_computed_by_hand(tmp_path):
    write_verl_dump(tmp_path / "d", {1: VERL_STEP_1, 2: VERL_STEP_2})
    run = load_run(tmp_path / "d")
    assert run.source == "verl" and run.steps == [1, 2]
    # step 1: A all-correct, B all-wrong, D partial credit 0.3 all-equal (all-wrong), C mixed (uneven)
    # step 2: A mixed (5 rows), B all-wrong (2 rows), C 0.7 all-equal (all-correct)
    assert run.values("collapse/acr") == [0.75, pytest.approx(2 / 3)]
    assert run.values("collapse/acr_all_correct") == [0.25, pytest.approx(1 / 3)]
    assert run.values("collapse/acr_all_wrong") == [0.5, pytest.approx(1 / 3)]
    assert run.values("collapse/acr_ema") == [0.75, pytest.approx(0.9 * 0.75 + 0.1 * 2 / 3)]
    assert run.values("collapse/acr_cumulative") == [0.75, pytest.approx(5 / 7)]
    assert run.values("collapse/acr_100") == [0.75, pytest.approx((0.75 + 2 / 3) / 2)]
    assert run.values("collapse/volatility")[1] == pytest.approx((0.75 - 2 / 3) / 2)
    assert run.values("groups") == [4, 3]
    assert run.values("reward/mean")[0] == pytest.approx((4 + 0 + 2 + 1.2) / 15)  # no logger: the rollouts'
    assert any("group sizes seen: 4 groups of 4, 1 group of 3, 1 group of 5, 1 group of 2" in n for n in run.notes)


def test_the_success_threshold_follows_the_rewards_range_or_the_option(tmp_path):
    write_verl_dump(tmp_path / "d", {1: [("A", [-1.0] * 4), ("B", [1.0] * 4), ("C", [0.5] * 4)]})
    run = load_run(tmp_path / "d")  # rewards in [-1, 1]: the midpoint 0 splits them
    assert run.values("collapse/acr_all_correct") == [pytest.approx(2 / 3)]
    assert any("is >= 0 (the midpoint of the rewards seen" in n for n in run.notes)
    run = load_run(tmp_path / "d", options=ReadOptions(success_threshold=0.75))
    assert run.values("collapse/acr_all_correct") == [pytest.approx(1 / 3)]


def test_a_verl_file_logger_beside_the_dump_gives_entropy_kl_and_their_alarms(tmp_path):
    dump = tmp_path / "run" / "rollouts"
    write_verl_dump(dump, {s: VERL_STEP_2 for s in range(1, 13)})
    with (tmp_path / "run" / "exp.jsonl").open("w") as f:  # verl's FileLogger: {"step": s, "data": {...}}
        for s in range(1, 13):
            f.write(json.dumps({"step": s, "data": {"actor/entropy": 1.0 if s < 2 else 0.1, "actor/kl_loss": 0.6,
                                                    "critic/score/mean": 0.5}}) + "\n")
    run = load_run(dump)
    assert "with verl's file logger" in run.found
    assert run.values("entropy/mean")[0] == 1.0 and run.values("kl/mean")[0] == 0.6
    assert run.values("alarm/kl_drift") == [1.0] * 12  # 0.6 > kl_bound 0.5
    # entropy below 0.5 from step 2 on; the window is a tenth of the 12 seen steps, at least 5: more than 5 low
    # steps from step 7, and the reward (the same every step) shows no gain once two windows are known: step 10
    assert run.values("alarm/entropy_collapse") == [0.0] * 9 + [1.0] * 3
    assert run.values("alarm/stagnation") == [0.0] * 4 + [1.0] * 8  # ACR 2/3 > 0.35 for 5 steps


# --------------------------------------------------------------------------- bad files


def test_bad_verl_files_give_one_note_each_and_the_rest_is_read(tmp_path):
    dump = tmp_path / "d"
    write_verl_dump(dump, {1: VERL_STEP_1, 2: VERL_STEP_1, 3: VERL_STEP_1})
    text = (dump / "3.jsonl").read_text()
    (dump / "3.jsonl").write_text(text[:-25])  # a run still writing its last line
    lines = (dump / "2.jsonl").read_text().splitlines(keepends=True)
    (dump / "2.jsonl").write_text("".join(lines[:3] + ["not json\n"] + lines[3:]))
    with (dump / "1.jsonl").open("a") as f:
        f.write(json.dumps({"input": "prompt alone", "output": "x", "gts": "1", "score": 1.0, "step": 1}) + "\n")
        f.write(json.dumps({"input": "prompt E", "output": "x", "step": 1}) + "\n")
    (dump / "4.jsonl").write_text("")
    run = load_run(dump)
    assert run.steps == [1, 2, 3]
    notes = "\n".join(run.notes)
    assert f"{dump / '1.jsonl'}: 1 prompt with a single rollout (a group of size 1 has no advantage" in notes
    assert f"{dump / '1.jsonl'}: 1 line without 'score': skipped" in notes
    assert f"{dump / '2.jsonl'}: 1 line not a JSON object (line 4): skipped" in notes
    assert f"{dump / '3.jsonl'}: the last line is cut short (a run still writing it?); read the 14 lines" in notes
    assert f"{dump / '4.jsonl'}: empty" in notes
    assert run.values("collapse/acr")[:2] == [0.75, 0.75]  # steps 1 and 2 whole


def test_bad_trl_files_give_one_note_each_and_the_rest_is_read(stock_trl, tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(stock_trl, folder)
    files = folder / "completions"
    # another TRL version's files: no prompt column in one, no advantage column in another; one cut short
    table = pq.read_table(files / "completions_00001.parquet")
    pq.write_table(table.drop(["prompt"]), files / "completions_00001.parquet")
    table = pq.read_table(files / "completions_00002.parquet")
    pq.write_table(table.drop(["advantage"]), files / "completions_00002.parquet")
    data = (files / "completions_00003.parquet").read_bytes()
    (files / "completions_00004.parquet").write_bytes(data[: len(data) // 2])
    run = load_run(folder)
    notes = "\n".join(run.notes)
    assert f"{files / 'completions_00001.parquet'}: no 'prompt' column (columns: step, completion, scripted, " \
           "advantage), so its rows cannot be grouped: skipped" in notes
    assert f"{files / 'completions_00002.parquet'}: no 'advantage' column" in notes
    assert f"{files / 'completions_00004.parquet'}: not a readable parquet file (" in notes
    assert [s for s, _ in zip(*run.points("collapse/acr"))] == [2, 3]
    assert math.isnan(run.values("collapse/acr_post")[1]) and math.isfinite(run.values("collapse/acr_post")[2])


def test_an_infinite_advantage_cell_reads_as_not_logged_and_the_rest_of_the_file_is_read(stock_trl, tmp_path):
    # a non-finite cell was once kept as None in the advantages, and summing a group's advantages then failed
    folder = tmp_path / "t"
    shutil.copytree(stock_trl, folder)
    path = folder / "completions" / "completions_00002.parquet"
    table = pq.read_table(path)
    advantages = table.column("advantage").to_pylist()
    advantages[0] = math.inf
    pq.write_table(table.set_column(table.schema.get_field_index("advantage"), "advantage",
                                    pq_array(advantages)), path)
    run = load_run(folder)
    steps, acr_post = run.points("collapse/acr_post")
    assert steps == [1, 2, 3] and all(0.0 <= v <= 1.0 for v in acr_post)


def pq_array(values):
    import pyarrow

    return pyarrow.array(values, type=pyarrow.float64())


def test_an_empty_folder_among_runs_is_one_line_and_the_others_are_reported(stock_trl, tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(app, ["report", str(tmp_path / "empty"), str(stock_trl), "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert f"skipped {tmp_path / 'empty'}: {tmp_path / 'empty'} is not a run" in result.output
    assert "not read:" in (tmp_path / "r" / "report.md").read_text()
    alone = CliRunner().invoke(app, ["report", str(tmp_path / "empty"), "--output", str(tmp_path / "r2")])
    assert alone.exit_code == 2 and "is not a run" in alone.output


def parity(prompts, completions, **kwargs):
    return [float(len(c.split()) % 2) for c in completions]


def test_reward_weights_the_files_do_not_hold_are_caught_by_trls_advantages(tmp_path):
    from datasets import Dataset

    values = dict(output_dir=str(tmp_path / "w"), per_device_train_batch_size=8, num_generations=G,
                  max_completion_length=4, max_steps=2, logging_steps=1, save_strategy="no", report_to="none",
                  use_cpu=True, bf16=False, seed=0, disable_tqdm=True, log_completions=True, reward_weights=[1.0, 0.0])
    torch.manual_seed(0)
    trainer = trl.GRPOTrainer(model=make_tiny_llama(), reward_funcs=[scripted, parity], args=trl.GRPOConfig(**values),
                              train_dataset=Dataset.from_list(PROMPTS), processing_class=make_tiny_tokenizer())
    trainer.train()
    run = load_run(tmp_path / "w")  # no trainer_state.json: every numeric column is read as a reward
    assert any("no trainer_state.json yet" in n for n in run.notes)
    assert any("the engine's advantages disagree with the rewards summed here" in n for n in run.notes), run.notes
