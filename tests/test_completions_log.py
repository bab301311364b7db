"""grposcope.logging: completions.jsonl, and the completions tables in TensorBoard and W&B."""

from __future__ import annotations

import json
import math
import sys
import types
import warnings

import numpy as np
import pytest
import torch

from grposcope.logging import LOGGERS, RunLogger, read_completions
from grposcope.logging.completions import completion_rows, markdown_table


def _strict_json(line: str) -> dict:
    """json.loads that refuses NaN/Infinity tokens, which are not JSON."""

    def refuse(token: str):
        raise ValueError(f"non-JSON token {token}")

    return json.loads(line, parse_constant=refuse)


CHAT_PROMPT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "2+2?"}]


def _chat_row() -> dict:
    """A chat row whose format reward function returned None (NaN), with two extra columns."""
    return {"prompt": CHAT_PROMPT, "completion": [{"role": "assistant", "content": "4"}],
            "rewards": {"accuracy_reward": 1.0, "format_reward": math.nan},
            "reward": 1.0, "advantage": 0.5, "parsed": "4", "tries": None}


def _text_row(completion: str = "5", advantage: float = -0.5) -> dict:
    return {"prompt": "2+2?", "completion": completion,
            "rewards": {"accuracy_reward": 0.0, "format_reward": 1.0}, "reward": 1.0, "advantage": advantage}


def _logger(tmp_path, **kwargs) -> RunLogger:
    return RunLogger(tmp_path, total_steps=10, console=False, **kwargs)


def _steps(tmp_path) -> list[int]:
    return [record["step"] for record in read_completions(tmp_path / "completions.jsonl")]


# ---------------------------------------------------------------- completions.jsonl


def test_rows_are_written_flushed_and_read_back_exactly(tmp_path):
    logger = _logger(tmp_path)
    logger.log_completions(2, [_chat_row()])
    # tensors and numpy values arrive from the trainer; they must land as plain numbers
    row = _text_row()
    row["advantage"], row["rewards"]["format_reward"] = torch.tensor(-0.5), np.float32(1.0)
    logger.log_completions(4, [row])
    # Not closed yet: every line is already in the file, and is strict JSON (NaN written as null).
    lines = (tmp_path / "completions.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first = _strict_json(lines[0])
    assert list(first) == ["step", "prompt", "completion", "rewards", "reward", "advantage", "parsed",
                           "tries"]
    assert read_completions(tmp_path / "completions.jsonl") == [
        {"step": 2, "prompt": CHAT_PROMPT, "completion": [{"role": "assistant", "content": "4"}],
         "rewards": {"accuracy_reward": 1.0, "format_reward": None},
         "reward": 1.0, "advantage": 0.5, "parsed": "4", "tries": None},
        {"step": 4, "prompt": "2+2?", "completion": "5",
         "rewards": {"accuracy_reward": 0.0, "format_reward": 1.0}, "reward": 1.0, "advantage": -0.5},
    ]
    logger.close()


def test_the_file_is_written_without_any_report_to_and_only_once_completions_come(tmp_path):
    logger = _logger(tmp_path, report_to="none")
    logger.log(1, {"reward/mean": 0.5})
    assert not (tmp_path / "completions.jsonl").exists()  # a run that logs no completions leaves no file
    logger.log_completions(1, [])  # an empty sample writes nothing either
    assert not (tmp_path / "completions.jsonl").exists()
    logger.log_completions(1, [_text_row(), _text_row("4", 0.5)])  # two rows of one call: two lines
    logger.close()
    assert [r["completion"] for r in read_completions(tmp_path / "completions.jsonl")] == ["5", "4"]


def test_resume_drops_the_rows_above_the_resume_step_and_keeps_the_others(tmp_path):
    first = _logger(tmp_path)
    for step in (1, 2, 3, 4):
        first.log_completions(step, [_text_row(f"s{step}a"), _text_row(f"s{step}b")])
    first.close()
    before = (tmp_path / "completions.jsonl").read_text().splitlines()  # 8 lines, 2 per step

    resumed = _logger(tmp_path, resume_step=2)
    # Steps 3 and 4 are gone; steps 1 and 2 (4 lines) are kept byte for byte.
    assert (tmp_path / "completions.jsonl").read_text().splitlines() == before[:4]
    resumed.log_completions(3, [_text_row("again")])
    resumed.close()
    assert _steps(tmp_path) == [1, 1, 2, 2, 3]
    assert read_completions(tmp_path / "completions.jsonl")[-1]["completion"] == "again"


def test_resume_step_zero_starts_afresh_and_none_appends(tmp_path):
    with _logger(tmp_path) as old:
        old.log_completions(5, [_text_row("old")])
    with _logger(tmp_path) as appending:  # resume_step=None: the old line stays
        appending.log_completions(1, [_text_row("appended")])
    assert _steps(tmp_path) == [5, 1]
    with _logger(tmp_path, resume_step=0) as fresh:  # a new run into the reused output dir
        fresh.log_completions(1, [_text_row("new")])
    assert [(r["step"], r["completion"]) for r in read_completions(tmp_path / "completions.jsonl")] == [
        (1, "new")]


def test_a_partial_last_line_is_skipped_with_a_warning_and_cut_before_appending(tmp_path):
    path = tmp_path / "completions.jsonl"
    with _logger(tmp_path) as logger:
        logger.log_completions(1, [_text_row("a"), _text_row("b")])
    with open(path, "a") as f:
        f.write('{"step": 2, "prompt": "2+2?", "compl')  # a process killed mid-write
    with pytest.warns(RuntimeWarning, match="partial last line 3"):
        assert [r["completion"] for r in read_completions(path)] == ["a", "b"]
    with pytest.warns(RuntimeWarning, match="partial"):
        logger = _logger(tmp_path)  # appending must not glue the next line onto the partial one
    logger.log_completions(2, [_text_row("c")])
    logger.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file is whole again: no warning
        assert [r["completion"] for r in read_completions(path)] == ["a", "b", "c"]


def test_read_completions_names_the_missing_file_and_a_bad_middle_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="completions.jsonl"):
        read_completions(tmp_path / "completions.jsonl")
    path = tmp_path / "completions.jsonl"
    path.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match="completions.jsonl: line 2 is not a record"):
        read_completions(path)


def test_bad_rows_are_refused_before_anything_is_written(tmp_path):
    logger = _logger(tmp_path)
    no_advantage = _text_row()
    del no_advantage["advantage"]
    with pytest.raises(ValueError, match=r"lacks \['advantage'\]"):
        logger.log_completions(1, [_text_row(), no_advantage])
    clash = _text_row()
    clash["rewards"]["reward"] = 1.0  # a reward function named like the combined-reward column
    with pytest.raises(ValueError, match=r"\['reward'\] are also column names"):
        logger.log_completions(1, [clash])
    with pytest.raises(ValueError, match="'step' is reserved"):
        logger.log_completions(1, [{**_text_row(), "step": 3}])
    with pytest.raises(TypeError, match="column 'meta' holds a object"):
        logger.log_completions(1, [{**_text_row(), "meta": object()}])
    logger.close()
    assert not (tmp_path / "completions.jsonl").exists()  # the good first row was not written either


def test_log_completions_after_close_is_an_error(tmp_path):
    logger = _logger(tmp_path)
    logger.close()
    with pytest.raises(RuntimeError, match="closed"):
        logger.log_completions(1, [_text_row()])


# ---------------------------------------------------------------- backends


def test_backends_without_log_completions_are_skipped(tmp_path, monkeypatch):
    seen = []

    class ScalarsOnly:  # a MetricsBackend that knows nothing of completions
        def __init__(self, run):
            pass

        def log(self, step, metrics):
            seen.append(("log", step))

        def close(self):
            pass

    class WithCompletions(ScalarsOnly):
        def log_completions(self, step, rows):
            seen.append(("completions", step, [row["completion"] for row in rows]))

    monkeypatch.setitem(LOGGERS._entries, "scalars", ScalarsOnly)  # removed again after the test
    monkeypatch.setitem(LOGGERS._entries, "texts", WithCompletions)
    with _logger(tmp_path, report_to=["scalars", "texts"]) as logger:
        logger.log_completions(3, [_text_row("x")])
    assert seen == [("completions", 3, ["x"])]


def test_markdown_table_escapes_cuts_and_shows_messages_as_role_content():
    rows = completion_rows([_chat_row(), _text_row("<b>x</b> | *y* " + "z" * 400)])  # NaN -> None
    assert markdown_table(rows, max_chars=20).splitlines() == [
        r"| prompt | completion | accuracy\_reward | format\_reward | reward | advantage | parsed | tries |",
        "|---|---|---|---|---|---|---|---|",
        # "system: Answer briefly.\nuser: 2+2?" cut to 20 characters: "system: Answer brief", then "…"
        "| system: Answer brief… | assistant: 4 | 1 | None | 1 | 0.5 | 4 | None |",
        # the second row has no extra columns: its cells there are None
        r"| 2+2? | &lt;b&gt;x&lt;/b&gt; \| \*y\* zzzzz… | 0 | 1 | 1 | -0.5 | None | None |",
    ]


def _text_events(log_dir) -> list[tuple[int, str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("completions/text_summary")]


@pytest.mark.filterwarnings("ignore:html5lib:DeprecationWarning")  # inside tensorboard's bleach
def test_tensorboard_gets_one_text_table_per_call(tmp_path):
    from tensorboard.plugin_util import markdown_to_safe_html

    with _logger(tmp_path, report_to="tensorboard") as logger:
        logger.log(2, {"reward/mean": 0.5})
        logger.log_completions(2, [_chat_row(), _text_row()])
        logger.log_completions(4, [_text_row("a" * 1000)])
    events = _text_events(tmp_path / "runs")
    assert [step for step, _ in events] == [2, 4]
    assert events[0][1] == markdown_table(completion_rows([_chat_row(), _text_row()]))
    assert events[0][1].splitlines()[2] == (
        "| system: Answer briefly.<br>user: 2+2? | assistant: 4 | 1 | None | 1 | 0.5 | 4 | None |")
    # the 1000-character completion is cut to 300 characters and an ellipsis
    assert "| " + "a" * 300 + "… |" in events[1][1] and "a" * 301 not in events[1][1]
    # TensorBoard's text tab renders it as an HTML table with the messages on two lines
    html = markdown_to_safe_html(events[0][1])
    assert "<table>" in html and "<td>system: Answer briefly.<br>user: 2+2?</td>" in html


class _FakeTable:
    def __init__(self, columns, data, **kwargs):
        self.columns, self.data, self.kwargs = columns, data, kwargs


class _FakeRun:
    def __init__(self):
        self.logged = []

    def log(self, data, step):
        self.logged.append((step, data))

    def finish(self):
        pass


def _fake_wandb(monkeypatch):
    run = _FakeRun()
    fake = types.SimpleNamespace(run=run, Table=_FakeTable, init=lambda **kwargs: run,
                                 login=lambda prompt=True, verify=True: True)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return fake


def test_wandb_gets_a_table_with_one_column_per_reward_function(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    fake = _fake_wandb(monkeypatch)
    with _logger(tmp_path, report_to="wandb") as logger:
        logger.log(3, {"reward/mean": 0.5})
        logger.log_completions(3, [_chat_row(), _text_row()])
    assert [step for step, _ in fake.run.logged] == [3, 3]
    step, data = fake.run.logged[1]
    assert list(data) == ["completions"]
    table = data["completions"]
    assert table.columns == ["step", "prompt", "completion", "accuracy_reward", "format_reward", "reward",
                             "advantage", "parsed", "tries"]
    assert table.data == [
        [3, "system: Answer briefly.\nuser: 2+2?", "assistant: 4", 1.0, None, 1.0, 0.5, "4", None],
        [3, "2+2?", "5", 0.0, 1.0, 1.0, -0.5, None, None],
    ]
    assert table.kwargs == {"allow_mixed_types": True}  # "tries" holds None here and may hold a number later


def test_a_real_offline_wandb_run_stores_the_table(tmp_path, offline_wandb):
    out = tmp_path / "out"
    with RunLogger(out, report_to="wandb", total_steps=2, console=False) as logger:
        logger.log(1, {"reward/mean": 0.5})
        logger.log_completions(1, [_chat_row(), _text_row()])
    (table_file,) = (out / "wandb").glob("offline-run-*/files/media/table/completions_1_*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"][3:5] == ["accuracy_reward", "format_reward"]
    assert table["data"][0][4] is None and table["data"][1][7] is None  # NaN reward; a missing extra
