"""The forecast's figure: ACR against G (stacked all-wrong / all-correct), each sampler's samples per informative
group against G, and the histogram of the probe's pass rates (matplotlib, imported only when drawing)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..files import atomic_output
from .forecast import Forecast, closed_form_samplers
from .plots import as_text, pyplot


def plot_forecast(result: Forecast, path: Any, title: str) -> None:
    """Three panels: ACR vs G stacked (all wrong under all correct, +-1 SE, the target; hatched where the
    plug-in was used), samples per informative group vs G per sampler, and the histogram of pass rates."""
    plt = pyplot("grposcope forecast --plot")
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4.8))
    _plot_acr(left, result)
    _plot_costs(middle, result)
    _plot_pass_rates(right, result.counts)
    fig.suptitle(as_text(title), fontsize=10)  # the title names a file, which may hold a $
    fig.tight_layout()
    try:  # through a temporary file: a full disk leaves no 0-byte image that a rerun would refuse
        with atomic_output(path, "--plot") as tmp:
            fig.savefig(tmp, dpi=110, format=Path(path).suffix[1:].lower() or "png")
    finally:
        plt.close(fig)


def _plot_pass_rates(ax: Any, counts: list[tuple[int, int]]) -> None:
    """One bar per possible c/k when every prompt has the same k (no empty bins between them), else 20 bins."""
    from matplotlib.ticker import MaxNLocator

    ks = {k for k, _ in counts}
    k = ks.pop() if len(ks) == 1 else 0
    bins = [(c - 0.5) / k for c in range(k + 2)] if 0 < k <= 40 else [i / 20 for i in range(21)]
    ax.hist([c / k for k, c in counts], bins=bins, color="#8064a2", edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # prompts are counted
    ax.set(xlim=(min(bins), max(bins)), xlabel="pass rate (successes / samples)", ylabel="prompts",
           title=f"pass rates of the {len(counts)} prompts" + (f" (k = {k} samples each)" if k else ""))


def _plot_acr(ax: Any, result: Forecast) -> None:
    sizes = list(result.acr)
    x = range(len(sizes))  # categorical: G = 2, 4, ..., 32 evenly spaced
    wrong = [result.acr[g].all_wrong for g in sizes]
    correct = [result.acr[g].all_correct for g in sizes]
    se = [result.acr[g].acr_se if math.isfinite(result.acr[g].acr_se) else 0.0 for g in sizes]
    hatch = ["//" if result.acr[g].plug_in_prompts else "" for g in sizes]
    ax.bar(x, wrong, color="#d62728", alpha=0.75, label="all wrong (too hard)", hatch=hatch, edgecolor="white")
    ax.bar(x, correct, bottom=wrong, color="#2ca02c", alpha=0.75, label="all correct (too easy)", hatch=hatch,
           edgecolor="white")  # the colours of grposcope report's collapse_split.png
    ax.errorbar(x, [w + c for w, c in zip(wrong, correct)], yerr=se, fmt="none", ecolor="black", capsize=4,
                label="± 1 SE over prompts")
    ax.axhline(result.target_acr, color="gray", linestyle="--", label=f"target ACR {result.target_acr:g}")
    if any(hatch):
        ax.bar([0], [0], color="lightgray", hatch="//", edgecolor="white", label="hatched: plug-in (G > k)")
    ax.set(xticks=list(x), xticklabels=[str(g) for g in sizes], ylim=(0, 1.05),
           xlabel="group size G (samples per prompt)", ylabel="expected ACR (share of groups collapsed)",
           title="forecast advantage collapse")
    ax.legend(loc="upper right", fontsize=8)


def _plot_costs(ax: Any, result: Forecast) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    shown = []  # (N,) every value drawn, to put a labelled tick below and above them all
    for name, by_g in result.costs.items():
        points = [(g, c) for g, c in by_g.items() if math.isfinite(c.samples_per_informative)]
        shown += [c.samples_per_informative for _, c in points]
        if points:
            ax.errorbar([g for g, _ in points], [c.samples_per_informative for _, c in points],
                        yerr=[c.se if math.isfinite(c.se) else 0.0 for _, c in points], marker="o", capsize=3,
                        label=name if name in closed_form_samplers() else f"{name} (Monte Carlo)")
    sizes = list(result.acr)
    ax.set(xscale="log", yscale="log", xlabel="group size G (samples per prompt)",
           ylabel="samples generated per informative group",
           title=f"sampler cost (budget {result.budget} samples/step)")
    ax.set_xticks(sizes, [str(g) for g in sizes])
    ax.minorticks_off()
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 5, 10, 20, 50: readable labels
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(True, which="major", alpha=0.3)
    if shown:  # the axis ends at ticks of the 1-2-5 series, so that the extreme values can be read
        nice = [m * 10.0**e for e in range(-1, 7) for m in (1, 2, 5)]
        ax.set_ylim(max([v for v in nice if v <= min(shown) * 0.95] or [nice[0]]) * 0.97,
                    min([v for v in nice if v >= max(shown) * 1.05] or [nice[-1]]) * 1.03)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
