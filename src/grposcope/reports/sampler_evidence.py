"""What only rollouts show: for a run whose groups were written (grposcope's completions.jsonl, a stock TRL run's
completions parquet, a verl rollout dump), what each sampler would have bought from prompts like these. The
`advantage_collapse` finding of `grposcope diagnose` and of the report gains one line of evidence from it; the
same figures in full come from `grposcope forecast --from_run RUN`."""

from __future__ import annotations

import math
from typing import Any

STEPS = 20  # the steps whose groups are read: the last 20 of a stock run, the first 20 of a grposcope run
SAMPLERS = ("fixed", "dynamic", "budgeted")
MC_GROUPS = 300  # Monte Carlo groups for the budgeted sampler: a line of evidence, not a study


def sampler_line(run: Any) -> str | None:
    """One sentence, or None when the run holds no groups (or they cannot be read)."""
    from ..runs.values import replay_missing
    from .forecast import forecast
    from .run_counts import counts_from_run

    if run.source not in ("grposcope", "trl", "verl") or not run.path.is_dir() or replay_missing():
        return None  # no groups, or an install without what replays them (the run's notes say so)
    try:
        _, counts, _, measured = counts_from_run(run.path, STEPS, None)
    except (ValueError, OSError):
        return None
    if not counts or not measured:
        return None
    g, steps = int(measured["g"]), int(measured["steps"])
    per_step = max(1, round(len(counts) / max(steps, 1)))
    result = forecast(counts, [g], budget=g * per_step, samplers=list(SAMPLERS), mc_groups=MC_GROUPS)
    cells = []
    for name in SAMPLERS:
        value = result.costs[name][g].informative_per_1k
        cells.append(f"{name} {value:.0f}" if math.isfinite(value) else f"{name} n/a")
    return (f"from the rollouts ({len(counts)} groups of {steps} steps, G = {g}): informative groups per 1,000 "
            f"generated samples on prompts like these: {', '.join(cells)} (grposcope forecast --from_run "
            f"{run.path} for the whole table)")


def add_sampler_evidence(diagnoses: list) -> None:
    """Appends `sampler_line` to each run's advantage_collapse finding (in place)."""
    for d in diagnoses:
        findings = [f for f in d.findings if f.detector == "advantage_collapse"]
        if findings and (line := sampler_line(d.run)) is not None:
            findings[0].evidence.append(line)
