"""What a detector says: a finding with its evidence, the fix in each trainer's own option names, and the papers.

A finding is data (JSON in `grposcope diagnose --json`, `findings.json` beside a run, the report's first
section); the terminal and report renderings live in render.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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
