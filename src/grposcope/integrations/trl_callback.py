"""`DiagnoseCallback`: grposcope diagnose's detectors inside a stock TRL `GRPOTrainer` (or any transformers
Trainer), no trainer swap:

    from grposcope.integrations.trl_callback import DiagnoseCallback
    trainer = trl.GRPOTrainer(..., callbacks=[DiagnoseCallback()])

Every `every` logged steps it diagnoses what TRL has logged so far and logs each warning or critical finding
once, when it fires or worsens. Then, on the main process, it writes `findings.json` and `findings.md` to
`output_dir` (again at the end), and puts the findings where the run's own loggers (`report_to`) show them:
a text entry `grposcope/findings` in TensorBoard (in `<logging_dir>/grposcope`, beside transformers' events), the
run summary's `grposcope/findings` in W&B. A file it
cannot write is one warning, never an exception: the user's `trainer.save_model()` after `train()` still runs.
grposcope's TRL subclass installs it itself (`diagnose_every`). It needs transformers only: nothing of
grposcope's own trainer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..diagnose.engine import Diagnosis, Options
from ..diagnose.live import FIX_HOSTS, LiveDiagnosis
from ..diagnose.render import _md, markdown
from ..runs.formats.tensorboard import FINDINGS_FOLDER

FINDINGS_MD = "findings.md"
TAG = "grposcope/findings"  # the TensorBoard text entry and the W&B summary key
logger = logging.getLogger("grposcope")


class DiagnoseCallback(TrainerCallback):
    """`every`: logged steps between two diagnoses; `options`: what TRL's logs do not say (diagnose.Options;
    the run's num_generations, max_completion_length and max_steps are taken from its args); `fix`: whose option
    names the logged fix lines use: "trl" (stock TRL's GRPOConfig) or "grposcope" (the TRL subclass's)."""

    def __init__(self, every: int = 10, options: Options | None = None, name: str | None = None,
                 fix: str = "trl") -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an int >= 1 (logged steps between diagnoses), got {every!r}")
        if options is not None and not isinstance(options, Options):
            raise TypeError(f"options must be a grposcope.diagnose.Options (what the logs do not say), got "
                            f"{type(options).__name__} {options!r}")
        if fix not in FIX_HOSTS:
            raise ValueError(f"fix must be one of {', '.join(FIX_HOSTS)}, got {fix!r}")
        self.every, self.options, self.name, self.fix = every, options, name, fix
        self.live: LiveDiagnosis | None = None
        self.result: Diagnosis | None = None  # the last Diagnosis, after training
        self._writer: Any = None  # a TensorBoard SummaryWriter, opened on the first finding
        self._unwritable = False  # findings.md could not be written: said once, not at every finding

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        options = self.options or Options(
            num_generations=getattr(args, "num_generations", None),
            max_completion_length=getattr(args, "max_completion_length", None),
            max_steps=state.max_steps if getattr(state, "max_steps", 0) and state.max_steps > 0 else None)
        name = self.name or getattr(args, "run_name", None) or Path(args.output_dir).name
        main = getattr(state, "is_world_process_zero", True)
        self.live = LiveDiagnosis(name, options, every=self.every, output_dir=args.output_dir if main else None,
                                  fix=self.fix)
        # resumed: the steps before, diagnosed without a word (not the totals of a run that had ended)
        self.live.replay(r for r in state.log_history or [] if isinstance(r, dict) and "train_runtime" not in r)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if self.live is None or not logs or not getattr(state, "is_world_process_zero", True):
            return
        if "train_runtime" in logs:  # the run's totals, not a step's figures
            return
        if self.live.add(state.global_step, logs) and self.live.last is not None:  # a finding fired or worsened
            self._publish(args, self.live.last, state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.live is None or not getattr(state, "is_world_process_zero", True):
            return
        try:
            self.result = self.live.finish()  # findings.json
        except OSError as err:  # an unwritable output_dir: said once; training's end (save_model) goes on
            if not self.live.unwritable:  # not said mid-run already
                logger.warning("grposcope diagnose: findings.json not written (%s); training goes on", err)
            self.result = self.live.last
        if self.result is not None:
            self._publish(args, self.result, state.global_step)
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _publish(self, args: Any, result: Any, step: int) -> None:
        """findings.md beside findings.json, and the findings in the run's TensorBoard and W&B."""
        text = f"# grposcope diagnose: {_md(result.run.name)}\n\n" + markdown([result], heading="## Findings") + "\n"
        try:
            (Path(args.output_dir) / FINDINGS_MD).write_text(text, encoding="utf-8")
        except OSError as err:
            if not self._unwritable:
                logger.warning("grposcope diagnose: %s not written (%s); training goes on", FINDINGS_MD, err)
            self._unwritable = True
        report_to = getattr(args, "report_to", None) or []
        report_to = [report_to] if isinstance(report_to, str) else list(report_to)
        if "tensorboard" in report_to or "all" in report_to:
            self._tensorboard(args, text, step)
        if "wandb" in report_to or "all" in report_to:
            _wandb_summary(text)

    def _tensorboard(self, args: Any, text: str, step: int) -> None:
        try:
            if self._writer is None:
                from torch.utils.tensorboard import SummaryWriter

                # a folder of its own beside transformers' events (TensorBoard shows it as the run's `grposcope`)
                log_dir = Path(getattr(args, "logging_dir", None) or Path(args.output_dir) / "runs") / FINDINGS_FOLDER
                self._writer = SummaryWriter(log_dir=str(log_dir))
            self._writer.add_text(TAG, text, global_step=step)
            self._writer.flush()
        except (ImportError, OSError) as err:
            logger.warning("grposcope diagnose: findings not logged to TensorBoard (%s)", err)


def _wandb_summary(text: str) -> None:
    """The findings in the active W&B run's summary (the run transformers' WandbCallback started)."""
    try:
        import wandb
    except ImportError:
        return
    if getattr(wandb, "run", None) is not None:
        wandb.run.summary[TAG] = text  # type: ignore[union-attr]  # wandb: run Optional, checked above
