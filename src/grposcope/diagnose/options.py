"""`Options`: what a log may not say, given by the user (`grposcope diagnose`'s options, `DiagnoseCallback`'s),
checked against the one table of option ranges when made."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..components.ranges import check_options


@dataclass(frozen=True)
class Options:
    """What a log may not say, given by the user (`grposcope diagnose`'s options of the same names). Checked
    against the one table of option ranges when made (components/ranges.py: a name means what it means in a
    training config)."""

    entropy_floor: float = 0.5  # nats: the entropy_collapse alarm's floor (CollapseMonitor's)
    kl_bound: float = 0.5  # the kl_drift alarm's bound (CollapseMonitor's)
    success_threshold: float | None = None  # a reward >= this is a success; None: 0.5 for rewards in [0, 1]
    num_generations: int | None = None  # G, when the log does not say it
    max_completion_length: int | None = None  # the length cap, when the log does not say it
    max_steps: int | None = None  # the steps the run was planned for (entropy's projected arrival)
    gpus: int | None = None  # for the cost in GPU-hours
    gpu_hour_cost: float | None = None  # per GPU-hour, for the cost in money

    def __post_init__(self) -> None:
        check_options({f.name: getattr(self, f.name) for f in fields(self)})
        if self.max_steps == -1:  # a training config's "num_train_epochs decides": not known here
            object.__setattr__(self, "max_steps", None)
