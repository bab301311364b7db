"""`DiagnoseCallback`: grposcope diagnose's detectors inside a stock TRL `GRPOTrainer` (or any transformers
Trainer), no trainer swap:

    from grposcope.integrations.trl_callback import DiagnoseCallback
    trainer = trl.GRPOTrainer(..., callbacks=[DiagnoseCallback()])

Every `every` logged steps it diagnoses what TRL has logged so far and logs each warning or critical finding
once, when it fires or worsens; at the end it writes `findings.json` and `findings.md` to `output_dir` (on the
main process). grposcope's TRL subclass installs it itself (`diagnose_every`). It needs transformers only: nothing
of grposcope's own trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..diagnose.engine import Options
from ..diagnose.live import FIX_HOSTS, LiveDiagnosis
from ..diagnose.render import markdown

FINDINGS_MD = "findings.md"


class DiagnoseCallback(TrainerCallback):
    """`every`: logged steps between two diagnoses; `options`: what TRL's logs do not say (diagnose.Options;
    the run's num_generations, max_completion_length and max_steps are taken from its args); `fix`: whose option
    names the logged fix lines use: "trl" (stock TRL's GRPOConfig) or "grposcope" (the TRL subclass's)."""

    def __init__(self, every: int = 10, options: Options | None = None, name: str | None = None,
                 fix: str = "trl") -> None:
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an int >= 1 (logged steps between diagnoses), got {every!r}")
        if fix not in FIX_HOSTS:
            raise ValueError(f"fix must be one of {', '.join(FIX_HOSTS)}, got {fix!r}")
        self.every, self.options, self.name, self.fix = every, options, name, fix
        self.live: LiveDiagnosis | None = None
        self.result = None  # the last Diagnosis, after training

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
        self.live.add(state.global_step, logs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.live is None or not getattr(state, "is_world_process_zero", True):
            return
        self.result = self.live.finish()  # findings.json
        path = Path(args.output_dir) / FINDINGS_MD
        path.write_text(f"# grposcope diagnose: {self.result.run.name}\n\n"
                        + markdown([self.result], heading="## Findings") + "\n", encoding="utf-8")
