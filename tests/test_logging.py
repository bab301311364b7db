"""grposcope.logging: metrics.jsonl, TensorBoard, W&B (offline), report_to, the console and the summary."""

from __future__ import annotations

import json
import math
import re
import sys
import types

import pytest
import torch

from grposcope.logging import (
    LOGGERS,
    JsonlBackend,
    RunLogger,
    RunStats,
    TensorBoardBackend,
    edge_means,
    prefixed,
    read_metrics,
    resolve_report_to,
    truncate_after,
)
from grposcope.logging import backends as backends_module
from grposcope.logging.console import eta_seconds, format_eta, plain_line
from grposcope.logging.run_logger import as_float_metrics


def _strict_json(line: str) -> dict:
    """json.loads that refuses NaN/Infinity tokens, which are not JSON."""

    def refuse(token: str):
        raise ValueError(f"non-JSON token {token}")

    return json.loads(line, parse_constant=refuse)


def _steps(path) -> list[int]:
    return [record["step"] for record in read_metrics(path)]


@pytest.fixture
def no_terminal(monkeypatch):
    """stdout under capsys is not a terminal; make sure the environment does not claim otherwise."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)


# ---------------------------------------------------------------- metrics.jsonl


def test_jsonl_lines_are_readable_while_the_backend_is_still_open(tmp_path):
    path = tmp_path / "metrics.jsonl"
    backend = JsonlBackend(path)
    backend.log(1, {"collapse/acr": 0.5, "reward/mean": 0.25})
    backend.log(2, {"collapse/acr": 0.75})
    # Not closed yet: every line must already be in the file (flushed per line).
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = _strict_json(lines[0])
    assert list(first)[:2] == ["step", "time"]
    assert first["step"] == 1 and first["collapse/acr"] == 0.5 and first["reward/mean"] == 0.25
    assert isinstance(first["time"], float) and first["time"] > 1.6e9  # a Unix time, not a duration
    assert read_metrics(path)[1] == {"step": 2, "time": _strict_json(lines[1])["time"], "collapse/acr": 0.75}
    backend.close()


def test_non_finite_values_are_written_as_null_and_read_back_as_nan(tmp_path):
    path = tmp_path / "metrics.jsonl"
    backend = JsonlBackend(path)
    backend.log(1, {"a": math.nan, "b": math.inf, "c": -math.inf, "d": 1.5})
    backend.close()
    record = _strict_json(path.read_text())  # valid JSON: no NaN / Infinity tokens
    assert record["a"] is None and record["b"] is None and record["c"] is None and record["d"] == 1.5
    back = read_metrics(path)[0]
    assert math.isnan(back["a"]) and math.isnan(back["b"]) and math.isnan(back["c"]) and back["d"] == 1.5


def test_reserved_names_are_refused(tmp_path):
    backend = JsonlBackend(tmp_path / "metrics.jsonl")
    with pytest.raises(ValueError, match="reserved"):
        backend.log(1, {"time": 3.0})
    backend.close()


def test_resume_drops_the_steps_after_the_checkpoint_and_keeps_everything_else(tmp_path):
    path = tmp_path / "metrics.jsonl"
    backend = JsonlBackend(path)
    for step in range(1, 6):
        backend.log(step, {"reward/mean": step / 10})
        if step == 3:
            backend.log(3, {"eval/accuracy": 0.5})  # a second line for the same step
    backend.close()
    before = path.read_text().splitlines()  # 6 lines: steps 1, 2, 3, 3 (eval), 4, 5

    resumed = JsonlBackend(path, resume_step=3)
    # Steps 4 and 5 are gone; the first four lines are kept byte for byte.
    assert path.read_text().splitlines() == before[:4]
    resumed.log(4, {"reward/mean": 0.9})
    resumed.close()
    assert _steps(path) == [1, 2, 3, 3, 4]
    assert read_metrics(path)[-1]["reward/mean"] == 0.9


def test_truncate_after_counts_the_dropped_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s, "time": 0.0}) + "\n" for s in (1, 2, 3, 4)))
    assert truncate_after(path, 4) == 0
    assert truncate_after(path, 2) == 2
    assert _steps(path) == [1, 2]
    assert truncate_after(tmp_path / "absent.jsonl", 2) == 0


def test_a_partial_last_line_is_skipped_with_a_warning_and_cut_before_appending(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "time": 0.0, "x": 1.0}\n{"step": 2, "time": 0.0, "x": 2.0}\n{"step": 3, "ti')
    with pytest.warns(RuntimeWarning, match="partial last line 3"):
        assert _steps(path) == [1, 2]
    with pytest.warns(RuntimeWarning, match="partial"):
        backend = JsonlBackend(path)  # appending must not glue the next line onto the partial one
    backend.log(3, {"x": 3.0})
    backend.close()
    assert [r["x"] for r in read_metrics(path)] == [1.0, 2.0, 3.0]


def test_a_bad_line_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "time": 0.0}\nnot json\n{"step": 3, "time": 0.0}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_metrics(path)


def test_read_metrics_names_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        read_metrics(tmp_path / "nope.jsonl")


# ---------------------------------------------------------------- report_to


@pytest.mark.parametrize(
    ("report_to", "expected"),
    [
        (None, ["jsonl"]),
        ("none", ["jsonl"]),
        (["none"], ["jsonl"]),
        ("tensorboard", ["jsonl", "tensorboard"]),
        ("wandb,tensorboard", ["jsonl", "wandb", "tensorboard"]),
        (["wandb", "tensorboard", "wandb", "jsonl"], ["jsonl", "wandb", "tensorboard"]),
        ("all", ["jsonl", "tensorboard", "wandb"]),  # both libraries are installed here
    ],
)
def test_report_to_is_resolved_like_transformers(report_to, expected):
    assert resolve_report_to(report_to) == expected


def test_report_to_all_skips_backends_whose_library_is_missing(monkeypatch):
    real = backends_module.importlib.util.find_spec
    monkeypatch.setattr(backends_module.importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    assert resolve_report_to("all") == ["jsonl", "tensorboard"]


def test_unknown_report_to_lists_the_known_names():
    with pytest.raises(ValueError, match="'mlflow'.*known: all, none, jsonl, tensorboard, wandb"):
        resolve_report_to(["tensorboard", "mlflow"])
    with pytest.raises(ValueError, match="'none' cannot be combined"):
        resolve_report_to(["none", "wandb"])
    with pytest.raises(ValueError, match="'all'.*alone"):
        resolve_report_to(["all", "wandb"])


def test_run_logger_fails_on_a_bad_name_before_creating_files(tmp_path):
    with pytest.raises(ValueError, match="known"):
        RunLogger(tmp_path / "out", report_to="tensorbord", total_steps=3, console=False)
    assert not (tmp_path / "out").exists()


def test_prefixes_keep_eval_names():
    assert prefixed({"collapse/acr": 0.5, "eval/accuracy": 0.25}) == {
        "train/collapse/acr": 0.5, "eval/accuracy": 0.25}


def test_a_registered_backend_gets_the_run_and_is_closed(tmp_path, monkeypatch):
    seen = {}

    class Memory:
        def __init__(self, run):
            seen["run"] = run
            seen["logged"] = []

        def log(self, step, metrics):
            seen["logged"].append((step, metrics))

        def close(self):
            seen["closed"] = True

    monkeypatch.setitem(LOGGERS._entries, "memory", Memory)  # removed again after the test
    with RunLogger(tmp_path, report_to=["memory"], total_steps=2, run_name="r", console=False) as logger:
        logger.log(1, {"reward/mean": torch.tensor(0.5)})  # a 0-d tensor is accepted as a float
    assert seen["run"].output_dir == tmp_path and seen["run"].run_name == "r"
    assert seen["logged"] == [(1, {"reward/mean": 0.5})] and seen["closed"]


def test_non_numeric_metrics_are_refused_with_the_name():
    with pytest.raises(TypeError, match="'completion/text'.*log a number"):
        as_float_metrics({"completion/text": "hello"})


# ---------------------------------------------------------------- TensorBoard


def _scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_writes_train_and_eval_tags(tmp_path):
    with RunLogger(tmp_path, report_to="tensorboard", total_steps=2, console=False) as logger:
        logger.log(1, {"collapse/acr": 0.5, "reward/mean": 0.25})
        logger.log(2, {"collapse/acr": 0.75, "reward/mean": 0.5})
        logger.log(2, {"eval/accuracy": 0.4})
    scalars = _scalars(tmp_path / "runs")
    assert set(scalars) == {"train/collapse/acr", "train/reward/mean", "eval/accuracy"}
    assert scalars["train/collapse/acr"] == [(1, 0.5), (2, 0.75)]
    assert scalars["eval/accuracy"] == [(2, pytest.approx(0.4))]


def test_tensorboard_resume_hides_the_steps_after_the_checkpoint(tmp_path):
    first = TensorBoardBackend(tmp_path)
    for step in range(1, 5):
        first.log(step, {"x": float(step)})
    first.close()
    resumed = TensorBoardBackend(tmp_path, resume_step=2)
    resumed.log(3, {"x": 30.0})
    resumed.close()
    assert _scalars(tmp_path)["train/x"] == [(1, 1.0), (2, 2.0), (3, 30.0)]


# ---------------------------------------------------------------- Weights & Biases


class _FakeRun:
    def __init__(self):
        self.logged, self.finished = [], False

    def log(self, data, step):
        self.logged.append((step, data))

    def finish(self):
        self.finished = True


def _fake_wandb(monkeypatch, logged_in: bool):
    fake = types.SimpleNamespace(inits=[], run=_FakeRun())

    def init(**kwargs):
        fake.inits.append(kwargs)
        return fake.run

    fake.init = init
    fake.login = lambda prompt=True, verify=True: logged_in and not prompt and not verify
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return fake


def test_wandb_init_arguments_prefixes_and_finish(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    fake = _fake_wandb(monkeypatch, logged_in=True)
    with RunLogger(tmp_path, report_to="wandb", total_steps=1, run_name="r1", config={"lr": 1e-6},
                   console=False) as logger:
        logger.log(1, {"collapse/acr": 0.5, "eval/accuracy": 0.25})
    init = fake.inits[0]
    assert (init["project"], init["name"], init["dir"], init["config"]) == ("grposcope", "r1", str(tmp_path),
                                                                            {"lr": 1e-6})
    assert init["mode"] is None  # credentials found: online, as wandb decides
    assert fake.run.logged == [(1, {"train/collapse/acr": 0.5, "eval/accuracy": 0.25})]
    assert fake.run.finished


def test_wandb_without_credentials_goes_offline_and_a_resume_keeps_the_run_id(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    fake = _fake_wandb(monkeypatch, logged_in=False)
    RunLogger(tmp_path, report_to="wandb", total_steps=1, console=False).close()
    assert fake.inits[0]["mode"] == "offline"
    first_id = fake.inits[0]["id"]
    # A resumed run continues the same W&B run; a new run gets a new id.
    RunLogger(tmp_path, report_to="wandb", total_steps=1, resume_step=0, console=False).close()
    RunLogger(tmp_path, report_to="wandb", total_steps=1, console=False).close()
    assert fake.inits[1]["id"] == first_id and fake.inits[2]["id"] != first_id


def test_wandb_offline_message_is_printed_once(tmp_path, monkeypatch, capsys, no_terminal):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    _fake_wandb(monkeypatch, logged_in=False)
    with RunLogger(tmp_path, report_to="wandb", total_steps=1) as logger:
        message = capsys.readouterr().out
        logger.note(message.strip())
    assert message.count("no API key found") == 1
    assert "no API key found" not in capsys.readouterr().out


def test_wandb_mode_from_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    fake = _fake_wandb(monkeypatch, logged_in=False)
    RunLogger(tmp_path, report_to="wandb", total_steps=1, console=False).close()
    assert fake.inits[0]["mode"] == "disabled"


def test_missing_wandb_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` raise ImportError
    with pytest.raises(ImportError, match=r"pip install .grposcope\[wandb\]."):
        RunLogger(tmp_path, report_to="wandb", total_steps=1, console=False)


def test_wandb_offline_run_is_created_under_output_dir(tmp_path, offline_wandb):
    out = tmp_path / "out"
    with RunLogger(out, report_to="wandb", total_steps=2, run_name="offline-test", console=False) as logger:
        logger.log(1, {"collapse/acr": 0.5})
        logger.log(2, {"collapse/acr": 0.25})
    run_id = (out / "wandb_run_id").read_text().strip()
    runs = list((out / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(runs) == 1 and (runs[0] / f"run-{run_id}.wandb").stat().st_size > 0


# ---------------------------------------------------------------- summary


def test_edge_means_round_ten_percent_up():
    assert edge_means([1.0, 2.0, 3.0, 4.0, 5.0]) == (1.0, 5.0)  # 5 values: ceil(0.5) = 1 each end
    # 30 values: 3 each end
    values = [float(i) for i in range(30)]
    assert edge_means(values) == ((0 + 1 + 2) / 3, (27 + 28 + 29) / 3)
    # 11 values: ceil(1.1) = 2 each end, not round(1.1) = 1
    assert edge_means([float(i) for i in range(11)]) == (0.5, 9.5)  # (0+1)/2, (9+10)/2
    # 25 values: ceil(2.5) = 3 each end
    assert edge_means([float(i) for i in range(25)]) == (1.0, 23.0)  # (0+1+2)/3, (22+23+24)/3


def _twenty_steps(logger):
    for s in range(1, 21):
        metrics = {
            "reward/mean": 0.05 * s,
            "collapse/acr": 1.0 if s <= 10 else (0.5 if s <= 18 else 0.25),
            "entropy/mean": 3.0 - 0.1 * s,
            "alarm/stagnation": 1.0 if 15 <= s <= 17 else 0.0,
            "alarm/entropy_collapse": 0.0,
            "alarm/kl_drift": 1.0 if s == 20 else 0.0,
        }
        if s % 2 == 0:
            metrics["collapse/acr_post"] = 0.1 if s <= 10 else 0.3
        logger.log(s, metrics)
    logger.log(20, {"eval/accuracy": 0.4})  # an evaluation call at the last step is not a 21st step


def test_summary_figures_on_a_hand_computed_run(tmp_path):
    logger = RunLogger(tmp_path, total_steps=20, console=False)
    _twenty_steps(logger)
    figures = logger.summary({"eval/accuracy before": 0.12, "eval/accuracy after": 0.31, "model": "tiny"})
    logger.close()
    assert (figures["steps"], figures["first_step"], figures["last_step"]) == (20, 1, 20)
    # 20 steps -> 2 steps at each end. reward = 0.05 * s:
    assert figures["reward_mean_first_10pct"] == pytest.approx((0.05 + 0.10) / 2, abs=1e-12)  # 0.075
    assert figures["reward_mean_last_10pct"] == pytest.approx((0.95 + 1.00) / 2, abs=1e-12)  # 0.975
    assert figures["reward_mean"] == pytest.approx(0.05 * 210 / 20, abs=1e-12)  # 0.05 * (1 + ... + 20) / 20
    # ACR: 1.0 for steps 1-10, 0.5 for 11-18, 0.25 for 19-20
    assert figures["acr_mean_first_10pct"] == 1.0 and figures["acr_mean_last_10pct"] == 0.25
    assert figures["acr_mean"] == pytest.approx((10 * 1.0 + 8 * 0.5 + 2 * 0.25) / 20, abs=1e-12)  # 0.725
    # acr_post on even steps only: five 0.1 and five 0.3
    assert figures["acr_post_mean"] == pytest.approx((5 * 0.1 + 5 * 0.3) / 10, abs=1e-12)  # 0.2
    assert figures["entropy_final"] == pytest.approx(3.0 - 0.1 * 20, abs=1e-12)  # 1.0
    assert figures["alarms"] == {"alarm/stagnation": {"first_step": 15, "steps_on": 3},
                                 "alarm/kl_drift": {"first_step": 20, "steps_on": 1}}
    assert figures["eval/accuracy after"] == 0.31 and figures["model"] == "tiny"
    assert figures["wall_time_s"] >= 0.0
    assert json.loads((tmp_path / "summary.json").read_text()) == figures


def test_summary_leaves_out_what_was_never_logged_and_skips_non_finite_values(tmp_path):
    stats = RunStats()
    stats.add(1, {"reward/mean": 1.0})
    stats.add(2, {"reward/mean": math.nan})
    stats.add(3, {"reward/mean": 3.0})
    figures = stats.figures(wall_time_s=1.0)
    assert figures["reward_mean"] == 2.0 and figures["steps"] == 3  # (1 + 3) / 2; the NaN step still counts
    assert "acr_mean" not in figures and "acr_post_mean" not in figures and "entropy_final" not in figures
    assert figures["alarms"] == {}


def test_summary_extra_rows_may_not_shadow_figures(tmp_path):
    logger = RunLogger(tmp_path, total_steps=1, console=False)
    logger.log(1, {"reward/mean": 0.5})
    with pytest.raises(ValueError, match="'steps'.*rename"):
        logger.summary({"steps": 3.0})
    logger.close()


def test_summary_table_is_printed(tmp_path, capsys, no_terminal):
    logger = RunLogger(tmp_path, total_steps=20, logging_steps=100)
    _twenty_steps(logger)
    capsys.readouterr()
    logger.summary({"eval/accuracy after": 0.31})
    logger.close()
    out = capsys.readouterr().out
    assert "grposcope run summary" in out
    assert "0.075 -> 0.975" in out and "1 -> 0.25" in out  # reward and ACR, first vs last 10%
    assert re.search(r"alarm/stagnation +│ fired at step 15, on for 3 steps", out)
    assert re.search(r"alarm/kl_drift +│ fired at step 20, on for 1 step ", out)
    assert re.search(r"eval/accuracy after +│ 0\.31 ", out)


def test_resumed_run_logs_each_step_once_and_sums_up_the_whole_run(tmp_path):
    first = RunLogger(tmp_path, total_steps=6, console=False)
    for s in range(1, 7):
        first.log(s, {"reward/mean": float(s)})
    first.close()  # the checkpoint was taken at step 4; steps 5 and 6 are logged again below
    resumed = RunLogger(tmp_path, total_steps=6, resume_step=4, console=False)
    for s in (5, 6):
        resumed.log(s, {"reward/mean": 10.0 * s})
    figures = resumed.summary()
    resumed.close()
    assert _steps(tmp_path / "metrics.jsonl") == [1, 2, 3, 4, 5, 6]
    assert figures["steps"] == 6
    assert figures["reward_mean"] == pytest.approx((1 + 2 + 3 + 4 + 50 + 60) / 6)  # 20.0


# ---------------------------------------------------------------- console


def test_eta_and_line_formatting():
    assert eta_seconds(10.0, 2, 3) == 15.0  # 5 s per step, 3 steps left
    assert eta_seconds(10.0, 0, 3) is None
    assert format_eta(3725.0) == "1:02:05" and format_eta(None) == "-:--:--"
    line = plain_line(3, 10, {"reward/mean": 0.25, "collapse/acr": 0.5, "collapse/acr_post": 0.125,
                              "entropy/mean": 1.5, "perf/step_s": 2.1}, 15.0)
    assert line == ("step 3/10 | reward 0.250 | acr 0.500 | acr_post 0.125 | entropy 1.500 | 2.10 s/step"
                    " | eta 0:00:15")


def test_without_a_terminal_one_plain_line_per_logging_steps(tmp_path, capsys, no_terminal):
    logger = RunLogger(tmp_path, total_steps=5, logging_steps=2)
    logger.note("accumulating 8 micro-batches so that a step holds whole groups")
    for s in range(1, 6):
        logger.log(s, {"eval/accuracy": 0.3})  # no key figure: no line of its own, even when it comes first
        logger.log(s, {"reward/mean": s / 10, "collapse/acr": 0.5, "perf/step_s": 1.0})
    logger.note("accumulating 8 micro-batches so that a step holds whole groups")  # a repeat: dropped
    logger.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "accumulating 8 micro-batches so that a step holds whole groups"
    assert len(lines) == 4  # the note, then steps 2, 4 and the last step 5
    pattern = r"step {} /5 \| reward {} \| acr 0\.500 \| 1\.00 s/step \| eta \d+:\d\d:\d\d".replace(" /", "/")
    for line, (step, reward) in zip(lines[1:], [(2, "0.200"), (4, "0.400"), (5, "0.500")]):
        assert re.fullmatch(pattern.format(step, reward), line), line
    assert lines[-1].endswith("eta 0:00:00")  # nothing left after the last step


def test_console_false_prints_nothing(tmp_path, capsys):
    logger = RunLogger(tmp_path, total_steps=2, console=False)
    logger.note("hello")
    logger.log(1, {"reward/mean": 0.5})
    logger.summary()
    logger.close()
    assert capsys.readouterr().out == ""


def test_live_bar_shows_notes_and_figures(tmp_path, capsys, no_terminal):
    logger = RunLogger(tmp_path, total_steps=2, live=True)
    logger.note("a one-time message")
    logger.log(1, {"reward/mean": 0.25, "collapse/acr": 0.5, "collapse/acr_post": 0.125})
    logger.log(1, {"eval/accuracy": 0.3})  # must not blank the figures
    logger.close()
    out = capsys.readouterr().out
    assert "a one-time message" in out
    assert "reward 0.250 | acr 0.500 | acr_post 0.125" in out and "1/2" in out


def test_bad_counts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="total_steps"):
        RunLogger(tmp_path, total_steps=0, console=False)
    with pytest.raises(ValueError, match="logging_steps"):
        RunLogger(tmp_path, total_steps=3, logging_steps=0, console=False)
    with pytest.raises(ValueError, match="resume_step"):
        RunLogger(tmp_path, total_steps=3, resume_step=-1, console=False)
