"""The report's figures: one PNG per view, the runs overlaid on one step axis.

Every time plot shares the x range (step 0 to the longest run's last step) and the width, so the plots line
up when stacked in report.html. Per-step figures of small batches are noisy (a step of 2 groups has an ACR of 0,
0.5 or 1), so each series is drawn faintly as logged and solidly as a trailing mean over `window` steps.
Alarms are marked on every time plot at the step they first fired: a dotted line in the run's colour and a
marker at the top whose shape names the alarm. Streaks of no-signal steps (acr_post 1: nothing reached the
gradient) are a band along the bottom of the ACR, entropy, KL and reward plots, one band per run, in its colour.
"""

from __future__ import annotations

import gc
import math
from pathlib import Path
from typing import Any

from ..files import atomic_output
from ..runs.record import Run
from .figures import ALARMS, alarms, no_signal_spans
from .regression import Fit

WIDTH, HEIGHT, DPI = 10.0, 3.6, 110
# Fixed margins (not bbox_inches="tight"): every plot's axes start and end at the same x, so the step axes
# line up in report.html whatever the legends hold. The legend lives in the right margin.
LEFT, RIGHT, TOP_IN, BOTTOM_IN = 0.08, 0.72, 0.5, 0.55
LEGEND_CHARS = 38  # longer run names are shortened in legends (the table has them whole)
ALARM_MARKERS = {"stagnation": "v", "entropy_collapse": "X", "kl_drift": "D", "no_signal": "s"}
BAND = 0.025  # height of a run's no-signal band, as a fraction of the axes
PLOT_POINTS = 4000  # points a line is drawn with at most: a figure is about a thousand pixels wide


def pyplot(needed_by: str = "grposcope report") -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display needed); a missing matplotlib fails with
    what needed it and how to install it. Every plotting command of grposcope draws through this."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"{needed_by} needs matplotlib: pip install 'grposcope[report]'", name="matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def as_text(name: str) -> str:
    """`name` (a run's folder name, a title) as matplotlib draws it literally: `$...$` would be read as
    mathtext (a parse error, or another text drawn), and a label that starts with `_` would be left out of
    the legend. Dollars are escaped; a leading `_` gets a zero-width space in front; control characters are
    shown escaped (`\x1b`), as in every text grposcope writes (no font has a glyph for them)."""
    from ..terminal import terminal_safe

    text = terminal_safe(name).replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def trailing_mean(values: list[float], window: int) -> list[float]:
    """Mean of the last `window` finite values up to each position (NaNs skipped; NaN until one is seen)."""
    out: list[float] = []
    kept: list[float] = []
    for v in values:
        if math.isfinite(v):
            kept = (kept + [v])[-window:]
        out.append(math.fsum(kept) / len(kept) if kept else math.nan)
    return out


def smoothing_window(runs: list[Run]) -> int:
    """A tenth of the longest run, between 1 and 25 steps."""
    return max(1, min(25, max(len(r.steps) for r in runs) // 10))


class Canvas:
    """The runs' shared colours, step range and smoothing, and the PNGs written so far."""

    def __init__(self, runs: list[Run], out: Path) -> None:
        self.plt, self.runs, self.out = pyplot(), runs, out
        palette = self.plt.get_cmap("tab10" if len(runs) <= 10 else "tab20")
        self.colors = {id(r): palette(i % palette.N) for i, r in enumerate(runs)}
        self.x_max = max(r.steps[-1] for r in runs)
        self.window = smoothing_window(runs)
        self.files: list[tuple[str, str]] = []  # (file name, caption)
        # tall enough for a legend of every run plus a few keys (alarms, line styles) in the right margin
        self.height = max(HEIGHT, 1.3 + 0.18 * (len(runs) + 4))

    def color(self, run: Run) -> Any:
        return self.colors[id(run)]

    def new(self, rows: int = 1, height: float | None = None) -> tuple[Any, Any]:
        height = height or self.height
        fig, axes = self.plt.subplots(rows, 1, figsize=(WIDTH, height), sharex=True, squeeze=False)
        fig.subplots_adjust(left=LEFT, right=RIGHT, top=1 - TOP_IN / height, bottom=BOTTOM_IN / height,
                            hspace=0.45 if rows > 1 else 0.2)
        return fig, [row[0] for row in axes]

    def step_axis(self, ax: Any, label: bool = True) -> None:
        ax.set_xlim(-0.01 * self.x_max, max(1, self.x_max) * 1.01)  # room for a marker at either end
        ax.grid(alpha=0.3)
        if label:
            ax.set_xlabel("training step")

    def mark_alarms(self, ax: Any) -> list[Any]:
        """Dotted lines and top markers where each run's alarms first fired; legend handles for the kinds."""
        kinds = set()
        for run in self.runs:
            for alarm in alarms(run):
                kinds.add(alarm.name)
                ax.axvline(alarm.first_step, color=self.color(run), linestyle=":", linewidth=1.2)
                ax.plot([alarm.first_step], [1.0], marker=ALARM_MARKERS[alarm.name], color=self.color(run),
                        markersize=8, transform=ax.get_xaxis_transform(), clip_on=False, linestyle="none")
        return [self.plt.Line2D([], [], color="black", marker=ALARM_MARKERS[k], linestyle=":",
                                label=f"alarm: {k.replace('_', ' ')} (first step)") for k in sorted(kinds)]

    def mark_no_signal(self, ax: Any) -> list[Any]:
        """A band along the bottom, in each run's colour (one row per run), over its no-signal streaks; a
        legend handle when any was drawn."""
        drawn = False
        for row, run in enumerate(self.runs):
            spans = no_signal_spans(run)
            if spans:  # each step covers [step - 0.5, step + 0.5]
                ax.broken_barh([(start - 0.5, length) for start, length in spans], (row * BAND, BAND),
                               transform=ax.get_xaxis_transform(), color=self.color(run), alpha=0.7, linewidth=0)
                drawn = True
        if not drawn:
            return []
        from matplotlib.patches import Patch

        return [Patch(color="gray", alpha=0.7, label="no-signal steps (acr_post 1)")]

    def marks(self, ax: Any) -> list[Any]:
        """Alarms and no-signal streaks on a time plot; their legend handles."""
        return self.mark_alarms(ax) + self.mark_no_signal(ax)

    def legend(self, ax: Any, extra: list[Any] | None = None) -> None:
        handles, labels = ax.get_legend_handles_labels()  # lines labelled "" or "_..." are left out
        handles += extra or []
        labels += [h.get_label() for h in extra or []]
        labels = [label if len(label) <= LEGEND_CHARS else _cut(label) for label in labels]
        if handles:
            ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)

    def save(self, fig: Any, name: str, caption: str) -> None:
        try:  # through a temporary file: a full disk leaves no 0-byte PNG that a rerun would refuse
            with atomic_output(self.out / name, "--output") as tmp:
                fig.savefig(tmp, dpi=DPI, format="png")
        finally:
            self.plt.close(fig)
            # a closed figure is a reference cycle: without a full collection now, the lines of a long run
            # (100,000 points each) piled up figure after figure (+150 MB a plot on bench/metrics_memory.py)
            gc.collect()
        self.files.append((name, caption))

    def series(self, ax: Any, run: Run, name: str, label: str, linestyle: str = "-", raw: bool = True) -> bool:
        """The run's `name`: faint as logged, solid as the trailing mean. False when the run never logged it.
        Past PLOT_POINTS logged steps (more than a figure's width can show), the faint line is the band between
        each stretch's lowest and highest value and the solid one every k-th point of the mean."""
        import numpy as np

        x, y = np.asarray(run.steps, dtype=float), np.asarray(run.values(name), dtype=float)
        keep = np.isfinite(y)
        x, y = x[keep], y[keep]
        if not len(x):
            return False
        window = min(self.window, len(y))
        total = np.concatenate([[0.0], np.cumsum(y)])  # (n + 1,)
        ends = np.arange(1, len(y) + 1)
        smooth = (total[ends] - total[np.maximum(ends - window, 0)]) / np.minimum(ends, window)  # trailing mean
        stride = max(1, -(-len(x) // PLOT_POINTS))
        if raw and self.window > 1:
            if stride > 1:
                cut = len(x) // stride * stride
                lo, hi = y[:cut].reshape(-1, stride).min(axis=1), y[:cut].reshape(-1, stride).max(axis=1)
                ax.fill_between(x[:cut:stride], lo, hi, color=self.color(run), alpha=0.22, linewidth=0)
            else:
                ax.plot(x, y, color=self.color(run), alpha=0.22, linewidth=0.8, linestyle=linestyle)
        ax.plot(x[::stride], smooth[::stride], color=self.color(run), linewidth=1.8, linestyle=linestyle, label=label)
        return True

    def smoothing_note(self) -> str:
        return f"solid: mean of the last {self.window} steps; faint: each step" if self.window > 1 else "each step"


def _cut(label: str) -> str:
    """A legend label shortened to LEGEND_CHARS with an ellipsis, never between the two characters of `\\$`."""
    cut = label[:LEGEND_CHARS - 1]
    return (cut[:-1] if cut.endswith("\\") and label[len(cut)] == "$" else cut) + "\u2026"


def draw_all(runs: list[Run], out: Path, entropy_floor: float, kl_bound: float) -> list[tuple[str, str]]:
    """Every plot of the report into `out`; returns (file name, caption) of each PNG written, in order."""
    canvas = Canvas(runs, out)
    plot_acr(canvas)
    plot_collapse_split(canvas)
    plot_metric(canvas, "entropy/mean", "entropy.png", "mean token entropy (nats)", "Entropy",
                floor=(entropy_floor, f"entropy alarm floor {entropy_floor:g} nats"))
    plot_metric(canvas, "kl/mean", "kl.png", "mean per-token KL to the reference (nats)", "KL drift",
                floor=(kl_bound, f"kl_drift alarm bound {kl_bound:g} nats"))
    plot_metric(canvas, "reward/mean", "reward.png", "mean reward of the step's groups", "Reward")
    plot_accuracy(canvas)
    plot_sampler_cost(canvas)
    return canvas.files


def plot_acr(canvas: Canvas) -> None:
    fig, (ax,) = canvas.new()
    for run in canvas.runs:
        canvas.series(ax, run, "collapse/acr", as_text(run.name))
        canvas.series(ax, run, "collapse/acr_post", "", linestyle="--", raw=False)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("fraction of groups")
    ax.set_title(f"Advantage collapse ({canvas.smoothing_note()})", fontsize=9)
    canvas.step_axis(ax)
    styles = [canvas.plt.Line2D([], [], color="black", label="ACR: collapsed as drawn"),
              canvas.plt.Line2D([], [], color="black", linestyle="--", label="acr_post: no gradient left")]
    canvas.legend(ax, styles + canvas.marks(ax))
    canvas.save(fig, "acr.png", "collapse/acr (solid: groups collapsed as drawn) and collapse/acr_post (dashed: no "
                "gradient left) per step, one line per run")


def plot_collapse_split(canvas: Canvas) -> None:
    """One panel per run: its ACR stacked as all-correct (too easy) over all-wrong (too hard)."""
    runs = [r for r in canvas.runs if r.has("collapse/acr_all_correct") or r.has("collapse/acr_all_wrong")]
    if not runs:
        return
    fig, axes = canvas.new(rows=len(runs), height=1.2 + 1.5 * len(runs))
    fig.subplots_adjust(top=1 - 0.8 / fig.get_figheight())  # the suptitle above the first panel's title
    for ax, run in zip(axes, runs):
        steps, _ = run.points("collapse/acr")
        correct = trailing_mean(_at(run, "collapse/acr_all_correct", steps), canvas.window)
        wrong = trailing_mean(_at(run, "collapse/acr_all_wrong", steps), canvas.window)
        ax.stackplot(steps, wrong, correct, colors=("#d62728", "#2ca02c"), alpha=0.75,
                     labels=("all wrong (too hard)", "all correct (too easy)"))
        ax.set_ylim(0, 1)
        ax.set_ylabel("groups", fontsize=8)
        ax.set_title(as_text(run.name), fontsize=9, loc="left")
        canvas.step_axis(ax, label=ax is axes[-1])
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    smoothing = f", each a mean of the last {canvas.window} steps" if canvas.window > 1 else ""
    fig.suptitle(f"Which collapse: all-correct vs all-wrong groups, stacked{smoothing}", fontsize=10,
                 x=(LEFT + RIGHT) / 2, y=1 - 0.15 / fig.get_figheight())
    canvas.save(fig, "collapse_split.png", "collapse/acr_all_correct and collapse/acr_all_wrong per step, stacked, "
                "one panel per run")


def _at(run: Run, name: str, steps: list[int]) -> list[float]:
    """`name` at `steps` (0 where not logged: a step without the split had no such groups)."""
    lookup = dict(zip(*run.points(name)))
    return [lookup.get(s, 0.0) for s in steps]


def plot_metric(canvas: Canvas, name: str, file: str, ylabel: str, title: str,
                floor: tuple[float, str] | None = None) -> None:
    fig, (ax,) = canvas.new()
    drawn = [canvas.series(ax, run, name, as_text(run.name)) for run in canvas.runs]
    if not any(drawn):
        canvas.plt.close(fig)
        return
    if floor is not None:
        ax.axhline(floor[0], color="gray", linestyle="--", linewidth=1.2, label=floor[1])
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}: {name} ({canvas.smoothing_note()})", fontsize=9)
    canvas.step_axis(ax)
    canvas.legend(ax, canvas.marks(ax))
    canvas.save(fig, file, f"{title}: {name} per run")


def plot_accuracy(canvas: Canvas) -> None:
    fig, (ax,) = canvas.new()
    drawn = False
    for run in canvas.runs:
        steps, values = run.accuracy_points()
        if steps:
            ax.plot(steps, values, marker="o", markersize=4, color=canvas.color(run), label=as_text(run.name))
            drawn = True
    if not drawn:
        canvas.plt.close(fig)
        return
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("held-out accuracy (pass@1)")
    ax.set_title("Held-out accuracy (step 0: before training)", fontsize=9)
    canvas.step_axis(ax)
    canvas.legend(ax)
    canvas.save(fig, "accuracy.png", "eval/accuracy: held-out accuracy at each evaluation, one line per run")


def plot_sampler_cost(canvas: Canvas) -> None:
    runs = [r for r in canvas.runs if r.has("sampler/samples_generated")]
    if not runs:
        return
    fig, (top, bottom) = canvas.new(rows=2, height=5.6)
    for run in runs:
        canvas.series(top, run, "sampler/samples_generated", as_text(run.name), raw=False)
        canvas.series(bottom, run, "sampler/tokens_generated", as_text(run.name), raw=False)
    top.set_ylabel("samples generated / step")
    bottom.set_ylabel("tokens generated / step")
    top.set_ylim(bottom=0)
    bottom.set_ylim(bottom=0)
    smoothing = f" (mean of the last {canvas.window} steps)" if canvas.window > 1 else ""
    top.set_title(f"Sampler cost{smoothing}", fontsize=9)
    canvas.step_axis(top, label=False)
    canvas.step_axis(bottom)
    canvas.legend(top)
    canvas.save(fig, "sampler_cost.png", "sampler/samples_generated and sampler/tokens_generated per step, one "
                "line per run")


def plot_regression(runs: list[Run], x: list[float], y: list[float], fit: Fit, out: Path) -> str:
    """Final accuracy against acr_100, one point per run, and the fitted line; returns the file name."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    ax.scatter(x, y, s=36, color="#1f77b4", zorder=3, label=f"runs (n = {fit.n})")
    lo, hi = min(x), max(x)
    pad = 0.05 * (hi - lo or 1.0)
    xs = [lo - pad, hi + pad]
    ax.plot(xs, [fit.predict(v) for v in xs], color="#d62728", linewidth=1.8,
            label=f"accuracy = {fit.intercept:.3f} {'+' if fit.slope >= 0 else '-'} {abs(fit.slope):.3f} x acr_100\n"
                  f"r = {fit.r:.3f}, R\u00b2 = {fit.r2:.3f}, p = {fit.p_value:.3g}")
    ax.set_xlabel("acr_100: mean ACR over the first 100 steps (fraction of groups)")
    ax.set_ylabel("final held-out accuracy")
    ax.set_title("Does early collapse predict final accuracy? (least squares over runs)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8, frameon=False)  # off the data
    try:
        with atomic_output(out / "regression.png", "--output") as tmp:
            fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format="png")
    finally:
        plt.close(fig)
    return "regression.png"


__all__ = ["ALARMS", "as_text", "draw_all", "plot_regression", "pyplot", "trailing_mean"]
