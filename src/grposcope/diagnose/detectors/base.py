"""The detectors' base class and their registry (one per plug-in family, core/registry.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ...core.registry import Registry
from ..findings import Finding, Fix, Ref

if TYPE_CHECKING:
    from ..engine import View

DETECTORS: Registry["Detector"] = Registry("detector")


class Detector:
    name: ClassVar[str] = ""
    needs: ClassVar[tuple[tuple[str, ...], ...]] = ()  # each group: one of these canonical names must be logged
    least: ClassVar[int] = 4  # logged points a needed series must have
    fix: ClassVar[Fix]
    refs: ClassVar[tuple[Ref, ...]] = ()
    summary: ClassVar[str] = ""  # what it catches, for --list and the docs

    def missing(self, view: "View") -> str:
        """'' when the run logged what this detector needs; else what it lacks, in TRL's and verl's names."""
        from ..catalogue import CATALOGUE

        lacking = [group for group in self.needs if not any(view.has(n, self.least) for n in group)]
        if not lacking:
            return ""

        def spell(name: str) -> str:
            m = CATALOGUE.get(name)
            other = [*(m.trl[:1] if m else ()), *(m.verl[:1] if m else ())]
            return f"{name}" + (f" ({', '.join(other)})" if other else "")

        return "needs " + "; ".join(" or ".join(spell(n) for n in group) for group in lacking)

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

