"""What a detector says: a finding with its evidence, the fix in each trainer's own option names, and the papers.

A finding is data (JSON in `grposcope diagnose --json`, `findings.json` beside a run, the report's first
section); the terminal and report renderings live in render.py.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

SEVERITIES = ("info", "warning", "critical")  # in rising order; `--fail_on` compares by this order


def rank(severity: str) -> int:
    """info 0, warning 1, critical 2; an unknown severity fails with the known ones."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        raise ValueError(f"unknown severity {severity!r}; known: {', '.join(SEVERITIES)}") from None


@dataclass(frozen=True)
class Fix:
    """The change that addresses a finding, spelled as each trainer spells it: grposcope's options (its own
    trainer and the TRL subclass share them), stock TRL's GRPOConfig, verl's Hydra keys."""

    grposcope: str
    trl: str
    verl: str


@dataclass(frozen=True)
class Ref:
    title: str
    arxiv: str

    def __str__(self) -> str:
        return f"{self.title} (arXiv {self.arxiv})"


@dataclass
class Finding:
    """One detector's conclusion about one run. `step`: the first logged step at which it holds."""

    run: str
    detector: str
    severity: str
    step: int | None
    title: str  # one line: what is wrong
    evidence: list[str]  # the figures it fired on
    fix: Fix
    refs: tuple[Ref, ...] = ()
    figures: dict[str, float] = field(default_factory=dict)  # the key numbers, for tests and tools

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "detector": self.detector, "severity": self.severity, "step": self.step,
                "title": self.title, "evidence": list(self.evidence), "fix": asdict(self.fix),
                "refs": [str(r) for r in self.refs], "figures": dict(self.figures)}


# The papers the detectors cite, each once.
ACR_PAPER = Ref("Advantage Collapse in Group Relative Policy Optimization: Diagnosis and Mitigation", "2605.21125")
DAPO = Ref("DAPO: An Open-Source LLM Reinforcement Learning System at Scale", "2503.14476")
REINFORCE_ADA = Ref("Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training", "2510.04996")
DEEPSEEKMATH = Ref("DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models", "2402.03300")
DR_GRPO = Ref("Understanding R1-Zero-Like Training: A Critical Perspective", "2503.20783")
PPO = Ref("Proximal Policy Optimization Algorithms", "1707.06347")
ENTROPY_MECHANISM = Ref("The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models", "2505.22617")
SUMMARIZE = Ref("Learning to summarize from human feedback", "2009.01325")
OVEROPTIMIZATION = Ref("Scaling Laws for Reward Model Overoptimization", "2210.10760")
LENGTH_CORRELATIONS = Ref("A Long Way to Go: Investigating Length Correlations in RLHF", "2310.03716")
EXPLODING_GRADIENTS = Ref("On the difficulty of training Recurrent Neural Networks", "1211.5063")
DEEPSEEK_R1 = Ref("DeepSeek-R1: Incentivizing Reasoning Capability in LLMs via Reinforcement Learning", "2501.12948")


_SETTING = re.compile(r"^\s*(\w+)=(True|False|'[^']*'|-?\d+(?:\.\d+)?)(?=\s|$|\))")


def without_applied(text: str, settings: Mapping[str, Any]) -> str:
    """A fix (clauses split by '; ', alternatives by ' or ') without the settings the run already has, and said
    so: `use_avspo=True ...; a larger num_generations` for a run with use_avspo on gives `a larger
    num_generations (already on: use_avspo=True)`, the next lever first. Unchanged when none applies."""
    on: list[str] = []

    def applied(part: str) -> bool:
        match = _SETTING.match(part)
        if match is None or match.group(1) not in settings:
            return False
        name, value = match.group(1), match.group(2)
        have = settings[name]
        wanted = {"True": True, "False": False}.get(value, value.strip("'"))
        if have == wanted or (isinstance(have, (int, float)) and str(have) == value):
            on.append(f"{name}={value}")
            return True
        return False

    clauses, dropped = [], False
    for clause in text.split("; "):
        kept = [part for part in clause.split(" or ") if not applied(part)]
        if kept:
            joined = " or ".join(kept).strip()
            # "X; or Y" with X dropped reads "Y"
            clauses.append(joined[3:] if dropped and joined.startswith("or ") else joined)
        dropped = not kept
    if not on:
        return text
    rest = "; ".join(clauses) or "the settings above are on and the problem persists: see the evidence"
    return f"{rest} (already on in this run: {', '.join(on)})"


def applied_settings(run: Any) -> dict[str, Any]:
    """What a run is known to have set, for `without_applied`: its config (the reader's), and what grposcope's
    own metrics show (AVSPO logs avspo/*; a skipped step logs optimizer/skipped_no_signal = 1)."""
    settings = dict(getattr(run, "config", {}) or {})
    series = getattr(run, "series", {}) or {}
    if any(name.startswith("avspo/") for name in series):
        settings.setdefault("use_avspo", True)
    skipped = [v for v in series.get("optimizer/skipped_no_signal", []) if v == v]  # NaN: not logged
    if skipped and max(skipped) >= 1:
        settings.setdefault("skip_no_signal_steps", True)
    return settings
