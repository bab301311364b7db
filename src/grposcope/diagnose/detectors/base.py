"""The detectors' base class and their registry (one per plug-in family, core/registry.py).

The registry finds the detectors itself: its first lookup imports every module of this package
(core.registry, `entry_modules`), and each module's `@register` classes register then. A new detector is a class
in a module here; no import line lists it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Iterable

from ...core.registry import Registry
from ..findings import Finding, Fix, Ref

if TYPE_CHECKING:
    from ..view import View

DETECTORS: Registry["Detector"] = Registry("detector", package=__package__)  # listed and run by name


class Detector:
    name: ClassVar[str] = ""
    needs: ClassVar[tuple[tuple[str, ...], ...]] = ()  # each group: one of these canonical names must be logged
    least: ClassVar[int] = 4  # logged points a needed series must have
    fix: ClassVar[Fix]
    refs: ClassVar[tuple[Ref, ...]] = ()
    summary: ClassVar[str] = ""  # what it catches, for --list and the docs

    def missing(self, view: "View") -> str:
        """'' when the run logged what this detector needs; else what it lacks, in TRL's and verl's names."""
        from ...runs.catalogue import CATALOGUE

        lacking = [group for group in self.needs if not any(view.has(n, self.least) for n in group)]
        if not lacking:
            return ""

        def spell(name: str) -> str:
            m = CATALOGUE.get(name)
            other = [*(m.trl[:1] if m else ()), *(m.verl[:1] if m else ())]
            return f"{name}" + (f" ({', '.join(other)})" if other else "")

        short = [(n, len(view[n][1])) for group in lacking for n in group if view.has(n)]
        said = "needs " + "; ".join(" or ".join(spell(n) for n in group) for group in lacking)
        if short:  # present, but too short to judge: say how short
            said += " with " + str(self.least) + " or more logged points; present but too short: " + ", ".join(
                f"{n} ({k} point{'s' if k > 1 else ''})" for n, k in short)
        return said

    def detect(self, view: "View") -> list[Finding]:
        raise NotImplementedError

    def finding(self, severity: str, step: float | None, title: str, evidence: list[str],
                fix: Fix | None = None, refs: tuple[Ref, ...] | None = None, **figures: float) -> Finding:
        return Finding(run="", detector=self.name, severity=severity,
                       step=None if step is None else int(step), title=title, evidence=evidence,
                       fix=fix or self.fix, refs=self.refs if refs is None else refs,
                       figures={k: float(v) for k, v in figures.items()})


def register(cls: type[Detector]) -> type[Detector]:
    DETECTORS.register(cls.name)(cls)
    return cls



def alarm_rules(view: "View", judge_gain: bool = True):
    """The alarms' rules (core/alarms.py) with the user's floor and bound, their windows fitted to the logged run
    as the trainers fit them (a tenth of the run, 5 to 50 steps). Without `judge_gain`, the entropy rule is its
    floor and window alone (a detector that judges the score's gain itself)."""
    import math

    from ...core.alarms import AlarmRules, alarm_window

    window = alarm_window(len(view.run.steps))
    return AlarmRules(stagnation_steps=window, entropy_floor=view.options.entropy_floor, entropy_steps=window,
                      kl_bound=view.options.kl_bound,
                      entropy_gain=AlarmRules.entropy_gain if judge_gain else math.inf)


def alarm_steps(view: "View", name: str, judge_gain: bool = True) -> list[int]:
    """The steps on which alarm `name` is on when the run's log (with its reward and held-out scores) is
    replayed through the alarms' rules; `judge_gain`: see alarm_rules."""
    from ...core.alarms import replay
    from ...runs import catalogue as c
    from ..signals import no_signal_mask

    run = view.run
    key = f"alarms, gain judged: {judge_gain}"
    if key not in view.memo:
        import numpy as np

        known = np.isfinite(view.array(c.GRAD_NORM)) | np.isfinite(view.array(c.SKIPPED_NO_SIGNAL)) | \
            np.isfinite(view.array(c.ACR_POST))
        no_signal = np.where(known, no_signal_mask(view).astype(float), np.nan).tolist()
        view.memo[key] = replay(run.steps, run.values(c.ACR), run.values(c.ENTROPY), run.values(c.KL), no_signal,
                                alarm_rules(view, judge_gain), reward=run.values(c.REWARD),
                                held_out=zip(*run.accuracy_points()))
    return view.memo[key][name]


def spans(steps: Iterable[int]) -> str:
    """`1, 3-5, 7-8` for [1, 3, 4, 5, 7, 8]; long lists cut after 8 spans."""
    out: list[str] = []
    start = prev = None
    for s in map(int, steps):
        if start is None or prev is None or s != prev + 1:
            if start is not None:
                out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = s
        prev = s
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out[:8]) + (f", ... ({len(out) - 8} more)" if len(out) > 8 else "")


def p_text(p: float) -> str:
    return "p < 1e-4" if p < 1e-4 else f"p = {p:.2g}"
