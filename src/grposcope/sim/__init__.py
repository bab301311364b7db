"""The collapse simulator: a fast model of RLVR dynamics, to test estimators and samplers at scales no CPU can
train (docs/simulator.md).

    from grposcope.sim import SimConfig, simulate
    result = simulate(SimConfig(sampler="budgeted", estimator="grpo", steps=200))
    result.summary["final_accuracy"], result.history["collapse/acr"]

It runs the trainer's own samplers (grposcope.sampling), estimators and collapse monitor (grposcope.core) on
Bernoulli rewards from a shared linear logit model; it imports nothing else of grposcope (no transformers,
trainer, rollout or rewards). `SimConfig` is importable without torch; the rest loads it on first use.
"""

from __future__ import annotations

from .config import SimConfig

_LAZY = {"simulate": "run", "SimResult": "run", "Population": "model", "make_population": "model"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Population", "SimConfig", "SimResult", "make_population", "simulate"]
