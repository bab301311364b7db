"""`grposcope simulate`: the collapse simulator, to compare samplers and estimators (docs/simulator.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
import typer.core

from ..files import atomic_output, check_output_file, write_text_atomic
from ..sim.memory import check_memory
from .app import USER_ERRORS, _console_logging, app, fail, lazy_epilog, wide_console


def _sim_defaults() -> dict[str, Any]:
    """SimConfig's defaults, shown in the help (grposcope.sim.config imports no torch: the CLI stays fast)."""
    from ..sim.config import defaults

    return defaults()


_SIM = _sim_defaults()
_SIM_ERRORS = (*USER_ERRORS, ImportError)  # ImportError: --plot without matplotlib


def _simulate_help() -> str:
    """What --help lists after the options: every component's flags."""
    from .sim_options import component_help

    return component_help()


@app.command("simulate", cls=lazy_epilog(_simulate_help),
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def simulate_command(
    ctx: typer.Context,
    sampler: str = typer.Option(_SIM["sampler"], "--sampler", help="Registered sampler names, comma "
                                "separated: one run each, at the same seed (the same prompts)."),
    advantage_estimator: str = typer.Option(_SIM["estimator"], "--advantage_estimator", help="Registered "
                                            "advantage estimator names, comma separated (several: every sampler "
                                            "with every estimator)."),
    prompts: int = typer.Option(_SIM["prompts"], "--prompts", help="Training prompts N."),
    num_generations: int = typer.Option(_SIM["num_generations"], "--num_generations",
                                        help="Samples per group G."),
    steps: int = typer.Option(_SIM["steps"], "--steps", help="Training steps (at most 100,000)."),
    batch_size: int = typer.Option(_SIM["batch_size"], "--batch_size", help="Prompts handed to the sampler "
                                   "per step (B)."),
    lr: float = typer.Option(_SIM["lr"], "--lr", help="Step size of the REINFORCE update of w."),
    seed: int = typer.Option(_SIM["seed"], "--seed", help="Seeds the prompts, their order and every draw."),
    features: int = typer.Option(_SIM["features"], "--features", help="k: length of each prompt's feature "
                                 "vector and of w."),
    shared_skill: float = typer.Option(_SIM["shared_skill"], "--shared_skill", help="How much the prompts' "
                                       "features share one direction (0: nothing in common)."),
    difficulty_mean: float = typer.Option(_SIM["difficulty_mean"], "--difficulty_mean", help="Mean of the "
                                          "base logits z_i (lower: harder prompts)."),
    difficulty_std: float = typer.Option(_SIM["difficulty_std"], "--difficulty_std", help="Std of the base "
                                         "logits (higher: more prompts near 0% or 100% success)."),
    heldout_frac: float = typer.Option(_SIM["heldout_frac"], "--heldout_frac", help="Held-out prompts, as a "
                                       "fraction of N, never trained on."),
    sampler_kwargs: Optional[str] = typer.Option(None, "--sampler_kwargs", help="A plug-in sampler's keyword "
                                                 "arguments that are no flag of their own, as JSON, as grposcope "
                                                 "train takes them (e.g. '{\"rounds\": 2}')."),
    advantage_estimator_kwargs: Optional[str] = typer.Option(None, "--advantage_estimator_kwargs", help="The "
                                                             "same, for a plug-in estimator (e.g. "
                                                             "'{\"eps\": 0.001}')."),
    sampler_options: Optional[str] = typer.Option(None, "--sampler_options", hidden=True),  # old: app.RENAMED
    estimator_options: Optional[str] = typer.Option(None, "--estimator_options", hidden=True),
    output: Path = typer.Option(Path("simulation.json"), "--output", "-o", help="Results JSON: config, summary and "
                                "per-step history of every run."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw accuracy and informative fraction vs "
                                        "samples generated (a .png; needs matplotlib)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing --output / --plot files."),
) -> None:
    """Simulate RLVR training on Bernoulli rewards to compare samplers and estimators (docs/simulator.md). Each
    option of a sampler or estimator is a flag of its own, as in grposcope train (listed below).

    \b
    Examples:
      grposcope simulate --sampler fixed,dynamic,reinforce_ada,budgeted --plot plot.png
      grposcope simulate --sampler reinforce_ada --advantage_estimator pool --exit_rule pos
      grposcope simulate --advantage_estimator grpo,avspo --acr_threshold_init 0.2 --difficulty_mean -3
    """
    options = dict(locals())
    import json

    _console_logging()
    try:
        configs = _sim_configs(options, ctx)
        check_memory(*configs)  # every run fits in this machine's memory, before the first one starts
        for path, flag, name in ((output, "--output", "simulation.json"), (plot, "--plot", "simulation.png")):
            if path is not None:
                check_output_file(path, flag, overwrite, name)  # now, not after the runs
        if plot is not None:
            _pyplot()  # a missing matplotlib fails now, not after the runs
        from ..sim import simulate

        results = [simulate(config) for config in configs]
        write_text_atomic(output, json.dumps({"runs": [r.to_dict() for r in results]}, indent=1) + "\n",
                          "--output")
        if plot is not None:
            _plot_simulations(results, plot)
    except _SIM_ERRORS as err:
        raise fail(err) from None
    _print_sim_table(results)
    seconds = sum(r.seconds for r in results)
    typer.echo(f"{len(results)} run(s) in {seconds:.1f} s; results written to {output}"
               + (f", plot to {plot}" if plot is not None else ""))


def _sim_configs(o: dict[str, Any], ctx: Any) -> list[Any]:
    """One SimConfig per (sampler, estimator), everything checked before the first run."""
    from ..sim import SimConfig
    from .sim_options import route_all

    samplers = _names(o["sampler"], "--sampler")
    estimators = _names(o["advantage_estimator"], "--advantage_estimator")
    routed = route_all(ctx.args, {"sampler": samplers, "advantage_estimator": estimators},
                       {"sampler": o["sampler_kwargs"], "advantage_estimator": o["advantage_estimator_kwargs"]},
                       {"sampler": o["sampler_options"], "advantage_estimator": o["estimator_options"]}, ctx)
    shared = {key: o[key] for key in ("prompts", "num_generations", "steps", "batch_size", "lr", "seed",
                                      "features", "shared_skill", "difficulty_mean", "difficulty_std",
                                      "heldout_frac")}
    return [SimConfig(sampler=s, estimator=e, sampler_options=routed["sampler"][s],
                      estimator_options=routed["advantage_estimator"][e], **shared)
            for s in samplers for e in estimators]


def _names(text: str, flag: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))  # in order, once each
    if not names:
        raise ValueError(f"{flag} needs at least one name")
    return names


def _pyplot() -> Any:
    from ..reports.plots import pyplot

    return pyplot("--plot")


def _run_label(result: Any) -> str:
    return f"{result.config.sampler} + {result.config.estimator}"


def _plot_simulations(results: list[Any], path: Path) -> None:
    """Accuracy (training set, solid; held-out, dotted) and informative fraction against samples generated."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for r in results:
        x = r.history["samples_total"]
        (line,) = top.plot(x, r.history["accuracy"], label=_run_label(r))
        top.plot(x, r.history["heldout_accuracy"], linestyle=":", color=line.get_color())
        bottom.plot(x, r.history["sampler/informative_frac"], color=line.get_color(), linewidth=0.8)
    top.set_ylabel("accuracy (mean p; dotted: held-out)")
    bottom.set_ylabel("informative fraction of kept groups")
    bottom.set_xlabel("samples generated")
    top.legend()
    c = results[0].config
    fig.suptitle(f"grposcope simulate: N={c.prompts}, G={c.num_generations}, B={c.batch_size}, seed={c.seed}")
    fig.tight_layout()
    try:
        with atomic_output(path, "--plot") as tmp:
            fig.savefig(tmp, dpi=120)
    finally:
        plt.close(fig)


def _print_sim_table(results: list[Any]) -> None:
    """One row per run: what it spent, how much of it was informative, and where accuracy went. The
    estimator gets a column only when the runs differ in it."""
    from rich import box
    from rich.table import Table

    c, s0 = results[0].config, results[0].summary
    estimators = list(dict.fromkeys(r.config.estimator for r in results))
    one_estimator = "" if len(estimators) > 1 else f", {c.estimator}"
    table = Table(title=f"simulated RLVR: {c.prompts} prompts, G={c.num_generations}, B={c.batch_size}, "
                        f"{c.steps} steps, seed {c.seed}{one_estimator}; accuracy starts at "
                        f"{s0['initial_accuracy']:.3f}",
                  box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    headers = ["sampler"] + (["estimator"] if len(estimators) > 1 else []) + [
        "samples\n/step", "inform.\nfrac", "acr", "acr_post", "inform.\ngrp/1k", "final\naccuracy",
        "held-out\naccuracy"]
    for header in headers:
        table.add_column(header, justify="left" if header in ("sampler", "estimator") else "right",
                         no_wrap=True)
    for r in results:
        s = r.summary
        table.add_row(r.config.sampler, *([r.config.estimator] if len(estimators) > 1 else []),
                      f"{s['samples_per_step']:.0f}", f"{s['informative_frac']:.3f}", f"{s['acr']:.3f}",
                      f"{s['acr_post']:.3f}", f"{s['informative_groups_per_1k_samples']:.1f}",
                      f"{s['final_accuracy']:.3f}", f"{s['final_heldout_accuracy']:.3f}")
    wide_console().print(table)
