"""The state of a run's stateful components in a checkpoint, under the keys every host keeps them (the own
trainer's trainer_state.pt, the TRL integration's grposcope_state.pt)."""

from __future__ import annotations

from typing import Any


def component_state(*, estimator, sampler, monitor) -> dict[str, Any]:
    """The advantage estimator's (AVSPO's threshold), the sampler's and the collapse monitor's state."""
    return {"estimator": estimator.state_dict(), "sampler": sampler.state_dict(), "monitor": monitor.state_dict()}


def load_component_state(state: dict[str, Any], *, estimator, sampler, monitor) -> None:
    """Puts `component_state`'s dict (or a checkpoint's, which holds it) back into the live components."""
    estimator.load_state_dict(state["estimator"])
    sampler.load_state_dict(state["sampler"])
    monitor.load_state_dict(state["monitor"])
