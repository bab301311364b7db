"""Writes tests/fixtures/trl_tiny_run/: what a STOCK `trl.GRPOTrainer` run writes to its output folder, for the
tests of the log readers (a TensorBoard folder and a trainer_state.json that TRL itself wrote, not hand-made).

The run: the tiny in-process Llama of conftest.py (nothing downloaded), 6 steps on CPU, G = 4, 8 completions a
step, a reward that is always 0 (every group collapses: TRL logs `frac_reward_zero_std` 1 and `grad_norm` 0),
`logging_steps=1`, `report_to=["tensorboard"]`. It takes about 10 s. Rerun it when TRL changes what it logs
(tests/test_live_diagnosis.py compares a fresh run's keys with the fixture's and says so):

    .venv/bin/python tests/make_trl_fixture.py

What is kept (renamed, and trained in a relative output_dir, so that no host name or temporary path is
committed):
    trainer_state.json                      TRL's `trainer.save_state()`: log_history, max_steps, ...
    runs/tiny/events.out.tfevents.fixture   transformers' TensorBoardCallback (output_dir/runs/<date_host>/...)
The model's weights and TRL's checkpoints are not kept.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "trl_tiny_run"
EVENTS = Path("runs") / "tiny" / "events.out.tfevents.fixture"
STEPS, G, BATCH = 6, 4, 8


def always_zero(prompts: list, completions: list, **columns: Any) -> list[float]:
    """Every completion scores 0: every group has zero reward std."""
    return [0.0] * len(completions)


def stock_run(out: Path, callbacks: list | None = None) -> Any:
    """Trains a stock trl.GRPOTrainer into `out` (save_state() writes out/trainer_state.json); returns it."""
    import trl
    from datasets import Dataset

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from conftest import make_tiny_llama, make_tiny_tokenizer

    config = trl.GRPOConfig(output_dir=str(out), per_device_train_batch_size=BATCH, num_generations=G,
                            max_completion_length=6, max_steps=STEPS, logging_steps=1, save_strategy="no",
                            report_to=["tensorboard"], use_cpu=True, bf16=False, learning_rate=1e-3, seed=0,
                            disable_tqdm=True)
    data = Dataset.from_list([{"prompt": f"What is {i} + {i} ?"} for i in range(12)])
    trainer = trl.GRPOTrainer(model=make_tiny_llama(), reward_funcs=always_zero, args=config, train_dataset=data,
                              processing_class=make_tiny_tokenizer(), callbacks=list(callbacks or []))
    trainer.train()
    trainer.save_state()
    return trainer


def event_file(out: Path) -> Path:
    """The one TensorBoard event file of a run's output folder (transformers: out/runs/<date_host>/)."""
    files = sorted(f for f in (out / "runs").rglob("events.out.tfevents.*") if f.parent.name != "grposcope")
    if len(files) != 1:
        raise RuntimeError(f"expected one TensorBoard event file under {out / 'runs'}, found {len(files)}: {files}")
    return files[0]


def keep(out: Path, dest: Path = FIXTURE) -> None:
    """Copies the run's trainer_state.json and event file into `dest` (replacing what was there)."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / EVENTS.parent).mkdir(parents=True)
    shutil.copyfile(out / "trainer_state.json", dest / "trainer_state.json")
    shutil.copyfile(event_file(out), dest / EVENTS)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trl_tiny_run-") as tmp:
        os.chdir(tmp)  # a relative output_dir: the args the events file records name no temporary folder
        stock_run(Path("trl_tiny_run"))
        keep(Path(tmp) / "trl_tiny_run")
        os.chdir(HERE.parent)
    for path in sorted(p for p in FIXTURE.rglob("*") if p.is_file()):
        print(f"{path.relative_to(HERE.parent)}  {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
