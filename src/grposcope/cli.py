"""The `grposcope` command.

    grposcope train                                   # the quickstart preset
    grposcope train --config run.yaml --num_generations 16 --use_avspo true
"""

from __future__ import annotations

import logging
import sys
import types
import typing
from pathlib import Path
from typing import Any, Optional

import typer
import typer.core

from . import __version__

app = typer.Typer(add_completion=False, no_args_is_help=False, help="Measure and fix advantage collapse in GRPO.")

_BOOL = {"true": True, "yes": True, "1": True, "on": True, "false": False, "no": False, "0": False, "off": False}


@app.callback(invoke_without_command=True)
def main(ctx: typer.Context, version: bool = typer.Option(False, "--version", help="Print the version.")) -> None:
    if version:
        typer.echo(f"grposcope {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


class _TrainCommand(typer.core.TyperCommand):
    """`train`, whose --help ends with every component's options; built only when help is shown, because it
    imports the registries (and torch)."""

    @property
    def epilog(self) -> str:
        from .trainer.options import options_help

        return options_help()

    @epilog.setter
    def epilog(self, value: Any) -> None:
        pass


@app.command(cls=_TrainCommand, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", help="A YAML file of GRPOConfig options."),
    preset_name: Optional[str] = typer.Option(None, "--preset", help="A named preset (default with no arguments: quickstart)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest complete checkpoint in output_dir."),
) -> None:
    """Train with GRPO. Any GRPOConfig option can be given as --name value (see docs/usage.md)."""
    from .presets import preset
    from .trainer import GRPOConfig, GRPOTrainer

    _console_logging()
    args = None
    try:
        overrides = parse_overrides(ctx.args)
        values: dict[str, Any] = {}
        if preset_name or (config is None and not overrides):
            values.update(preset(preset_name or "quickstart"))
        if config is not None:
            values.update(read_yaml(config))
        values.update(overrides)
        if resume:
            values["resume_from_checkpoint"] = True
        args = GRPOConfig.from_dict(coerce_all(values))
        GRPOTrainer(args=args).train()
    except (ValueError, TypeError, OSError, RuntimeError, FloatingPointError) as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        _say_how_to_resume(args)
        raise typer.Exit(1) from None


def _say_how_to_resume(args: Any) -> None:
    """After a failed run: where its last checkpoint is, so that no step done so far is lost."""
    if args is None:
        return
    from .trainer.checkpoint import latest_checkpoint

    last = latest_checkpoint(args.output_dir)
    if last is not None:
        typer.echo(f"the run's last checkpoint is {last}; once fixed, continue it by adding --resume", err=True)


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of GRPOConfig options, got {type(data).__name__}")
    return data


def parse_overrides(argv: list[str]) -> dict[str, str]:
    """`--name value`, `--name=value`, and a bare `--flag` (true), as TRL's scripts take them."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--") or token == "--":
            raise ValueError(f"unexpected argument {token!r}: options are given as --name value")
        name, eq, value = token[2:].partition("=")
        name = name.replace("-", "_")
        if not eq:
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value, i = argv[i + 1], i + 1
            else:
                value = "true"
        out[name] = value
        i += 1
    return out


def coerce_all(values: dict[str, Any]) -> dict[str, Any]:
    from .trainer import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    return {k: coerce(k, v, hints[k]) if k in hints and isinstance(v, str) else v for k, v in values.items()}


def coerce(name: str, raw: str, hint: Any) -> Any:
    """Turns a command-line string into the type the config field declares: `--reward_weights 1,0.5` gives
    [1.0, 0.5] for a list[float], `--virtual_reward_range -1,1` (-1.0, 1.0) for a tuple[float, float]."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = typing.get_args(hint) if union else (hint,)
    origins = [typing.get_origin(kind) or kind for kind in options]
    if type(None) in origins and raw.lower() in ("none", "null"):
        return None
    if bool in origins and raw.lower() in _BOOL:
        return _BOOL[raw.lower()]
    for kind, origin in zip(options, origins):
        if origin in (list, tuple) and ("," in raw or str not in origins):
            item_kind = (typing.get_args(kind) or (str,))[0]
            items = [item.strip() for item in raw.strip("[]()").split(",") if item.strip()]
            return origin(coerce(name, item, item_kind) for item in items)
    for kind in (int, float):
        if kind in origins:
            try:
                return kind(raw)
            except ValueError:
                pass
    if str in origins:
        return raw
    raise ValueError(f"--{name}: cannot read {raw!r} as {hint}")


_EVAL_ERRORS = (ValueError, TypeError, OSError, RuntimeError, ImportError)  # OSError: missing/existing files


@app.command("eval")
def eval_command(
    model: str = typer.Option(..., "--model", help="A checkpoint folder (e.g. output/run/checkpoint-20), "
                              "embedded:<name>, or a hub id in the local Hugging Face cache."),
    dataset: str = typer.Option(..., "--dataset", help="arithmetic[:levels], rg:<reasoning-gym name>, or a "
                                "MATH-500-style .jsonl file (problem, answer)."),
    split: Optional[str] = typer.Option(None, "--split", help="eval (held-out), train or all. Default: all "
                                        "for a .jsonl file, eval for a generated task."),
    num_samples: int = typer.Option(0, "--num_samples", help="k sampled completions per prompt for avg@k and "
                                    "pass@k; 0 = greedy pass@1 only."),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature; must be > 0 when "
                                      "--num_samples > 0."),
    top_p: float = typer.Option(1.0, "--top_p", help="Nucleus sampling mass, in (0, 1]."),
    max_completion_length: int = typer.Option(256, "--max_completion_length",
                                              help="Tokens generated at most per completion."),
    max_prompt_length: int = typer.Option(512, "--max_prompt_length", help="Longer prompts keep their last "
                                          "tokens (as in training); 0 = no limit."),
    reward_funcs: Optional[str] = typer.Option(None, "--reward_funcs", help="Registered reward names, comma "
                                               "separated. Default: the task's (box_accuracy_reward for a "
                                               ".jsonl file)."),
    success_threshold: float = typer.Option(0.5, "--success_threshold", help="A completion is correct when "
                                            "its reward is >= this."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Evaluate the first N examples of the split."),
    seed: int = typer.Option(42, "--seed", help="Seeds the split (as in training) and the sampling."),
    dataset_size: Optional[int] = typer.Option(None, "--dataset_size", help="Train examples of a generated "
                                               "task, as the training run's --dataset_size (default: 1000)."),
    eval_size: Optional[int] = typer.Option(None, "--eval_size", help="Held-out examples, as the training "
                                            "run's --eval_size (default: 50 generated, 10% of a file)."),
    batch_size: int = typer.Option(16, "--batch_size", help="Prompts generated at once (x k when sampling)."),
    output: Optional[Path] = typer.Option(None, "--output", help="Results JSON. Default: "
                                          "eval-<model>-<dataset>.json in the current folder."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --output file."),
    trust_remote_code: bool = typer.Option(False, "--trust_remote_code", help="Let transformers run Python "
                                           "files from the model folder (only for folders you trust)."),
) -> None:
    """Evaluate a model: greedy pass@1, and avg@k / pass@k with --num_samples k (see docs/evaluation.md)."""
    _console_logging()
    options = dict(locals())
    try:
        result, path = _run_eval(options)
    except _EVAL_ERRORS as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        raise typer.Exit(1) from None
    _print_eval_table(result, options)
    typer.echo(f"{len(result.records)} prompts in {result.seconds:.1f} s; results written to {path}")


def _run_eval(o: dict[str, Any]) -> tuple[Any, Path]:
    """Checks everything cheap first (settings, output file, data, reward names), then loads and evaluates."""
    from .evaluation import EvalSettings, default_split, evaluate_model, load_eval_examples
    from .models import load_model
    from .rewards import get_reward

    settings = EvalSettings(
        max_completion_length=o["max_completion_length"], num_samples=o["num_samples"],
        temperature=o["temperature"], top_p=o["top_p"], success_threshold=o["success_threshold"],
        batch_size=o["batch_size"], seed=o["seed"],
    )
    if o["max_prompt_length"] < 0:
        raise ValueError(f"--max_prompt_length must be >= 0 (0: no limit), got {o['max_prompt_length']}")
    path = o["output"] or Path(_default_output_name(o["model"], o["dataset"]))
    if path.exists() and not o["overwrite"]:
        raise FileExistsError(
            f"{path} already exists; pass --overwrite to replace it, or choose another --output"
        )
    o["split"] = o["split"] or default_split(o["dataset"])
    examples, task_rewards = load_eval_examples(
        o["dataset"], o["split"], seed=o["seed"], dataset_size=o["dataset_size"], eval_size=o["eval_size"],
        limit=o["limit"],
    )
    names = [n.strip() for n in (o["reward_funcs"] or "").split(",") if n.strip()]
    for name in names:
        get_reward(name)  # an unknown name fails now, with the known ones, not after loading the model
    funcs = names or task_rewards
    if not funcs:
        raise ValueError(
            f"{o['dataset']!r} recommends no reward function; pass one, e.g. --reward_funcs accuracy_reward"
        )
    model, tokenizer = load_model(o["model"], trust_remote_code=o["trust_remote_code"])
    with _eval_progress() as bar:
        task = bar.add_task("eval", total=len(examples))
        result = evaluate_model(model, tokenizer, examples, funcs, settings,
                                max_prompt_length=o["max_prompt_length"] or None,
                                progress=lambda done, _total: bar.update(task, completed=done))
    config = {key: o[key] for key in ("model", "dataset", "split", "limit", "dataset_size", "eval_size",
                                      "max_prompt_length")}
    result.save(path, config=config, overwrite=o["overwrite"])
    return result, path


def _default_output_name(model: str, dataset: str) -> str:
    """eval-<model>-<dataset>.json: the last part of the model path and the task spec, safe as a file name."""
    import re

    name = Path(model.removeprefix("embedded:").rstrip("/\\")).name or "model"
    task = Path(dataset).stem if dataset.endswith(".jsonl") else dataset
    return "eval-" + "-".join(re.sub(r"[^A-Za-z0-9._-]+", "_", part) for part in (name, task)) + ".json"


def _eval_progress() -> Any:
    """A rich progress bar over prompts on stderr (rich prints it plainly when stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    columns = ("evaluating", BarColumn(), MofNCompleteColumn(), "prompts", TimeElapsedColumn(),
               TimeRemainingColumn())
    return Progress(*columns, console=Console(stderr=True))


def _print_eval_table(result: Any, o: dict[str, Any]) -> None:
    """Rows: each level, then all; columns: prompts, greedy pass@1, and avg@k / pass@k when sampling."""
    from rich.console import Console
    from rich.table import Table

    k = result.settings.num_samples
    sampled = [f"avg@{k}", f"pass@{k}"] if k > 0 else []
    table = Table(title=f"{o['model']} on {o['dataset']} ({o['split']} split)")
    for header in ["level", "prompts", "pass@1 (greedy)", *sampled]:
        table.add_column(header, justify="left" if header == "level" else "right")
    rows = [*result.levels.items(), ("all", result.overall)]
    for i, (level, figures) in enumerate(rows):
        cells = [str(figures["prompts"])] + [f"{figures[name]:.3f}" for name in ["accuracy", *sampled]]
        table.add_row(level, *cells, style="bold" if i == len(rows) - 1 else None)
    Console().print(table)


# --- grposcope simulate ------------------------------------------------------------------------------------


def _sim_defaults() -> dict[str, Any]:
    """SimConfig's defaults, shown in the help (grposcope.sim.config imports no torch: the CLI stays fast)."""
    from .sim.config import defaults

    return defaults()


_SIM = _sim_defaults()
_SIM_ERRORS = (ValueError, TypeError, OSError, RuntimeError, ImportError)


@app.command("simulate")
def simulate_command(
    sampler: str = typer.Option(_SIM["sampler"], "--sampler", help="Registered sampler names, comma "
                                "separated: one run each, at the same seed (the same prompts)."),
    estimator: str = typer.Option(_SIM["estimator"], "--estimator", help="Registered advantage estimator "
                                  "names, comma separated (several: every sampler with every estimator)."),
    prompts: int = typer.Option(_SIM["prompts"], "--prompts", help="Training prompts N."),
    num_generations: int = typer.Option(_SIM["num_generations"], "--num_generations",
                                        help="Samples per group G."),
    steps: int = typer.Option(_SIM["steps"], "--steps", help="Training steps."),
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
    sampler_options: Optional[str] = typer.Option(None, "--sampler_options", help="key=value pairs, comma "
                                                  "separated, given to every sampler that takes them "
                                                  "(reinforce_ada.exit_rule=pos: to that one only)."),
    estimator_options: Optional[str] = typer.Option(None, "--estimator_options", help="The same, for the "
                                                    "estimators (e.g. avspo.alpha=0.5)."),
    output: Path = typer.Option(Path("simulation.json"), "--output", help="Results JSON: config, summary and "
                                "per-step history of every run."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw accuracy and informative fraction vs "
                                        "samples generated (a .png; needs matplotlib)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing --output / --plot files."),
) -> None:
    """Simulate RLVR training on Bernoulli rewards to compare samplers and estimators (docs/simulator.md)."""
    options = dict(locals())
    import json

    _console_logging()
    try:
        configs = _sim_configs(options)
        for path in (output, plot):
            if path is not None and path.exists() and not overwrite:
                raise FileExistsError(f"{path} already exists; pass --overwrite to replace it, or choose "
                                      "another file")
        if plot is not None:
            _pyplot()  # a missing matplotlib fails now, not after the runs
        from .sim import simulate

        results = [simulate(config) for config in configs]
        output.write_text(json.dumps({"runs": [r.to_dict() for r in results]}, indent=1) + "\n")
        if plot is not None:
            _plot_simulations(results, plot)
    except _SIM_ERRORS as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        raise typer.Exit(1) from None
    _print_sim_table(results)
    seconds = sum(r.seconds for r in results)
    typer.echo(f"{len(results)} run(s) in {seconds:.1f} s; results written to {output}"
               + (f", plot to {plot}" if plot is not None else ""))


def _sim_configs(o: dict[str, Any]) -> list[Any]:
    """One SimConfig per (sampler, estimator), everything checked before the first run."""
    from .core.advantages import ESTIMATORS
    from .sampling import SAMPLERS
    from .sim import SimConfig

    samplers, estimators = _names(o["sampler"], "--sampler"), _names(o["estimator"], "--estimator")
    sampler_opts = _route_options(o["sampler_options"], samplers, SAMPLERS, "--sampler_options")
    estimator_opts = _route_options(o["estimator_options"], estimators, ESTIMATORS, "--estimator_options")
    shared = {key: o[key] for key in ("prompts", "num_generations", "steps", "batch_size", "lr", "seed",
                                      "features", "shared_skill", "difficulty_mean", "difficulty_std",
                                      "heldout_frac")}
    return [SimConfig(sampler=s, estimator=e, sampler_options=sampler_opts[s],
                      estimator_options=estimator_opts[e], **shared) for s in samplers for e in estimators]


def _names(text: str, flag: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))  # in order, once each
    if not names:
        raise ValueError(f"{flag} needs at least one name")
    return names


def _route_options(text: str | None, names: list[str], registry: Any, flag: str) -> dict[str, dict[str, Any]]:
    """`key=value,name.key=value` -> each name's keyword arguments. An unscoped key goes to every name whose
    factory takes it, and must fit at least one; values are read as JSON (5, true, null), else as text."""
    import json

    routed: dict[str, dict[str, Any]] = {name: {} for name in names}
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{flag}: cannot read {item!r}; write key=value, e.g. exit_rule=pos")
        scope, dot, key = key.strip().rpartition(".")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw.strip()
        if dot and scope not in routed:
            raise ValueError(f"{flag}: {scope!r} is not one of the runs' names ({', '.join(names)})")
        targets = [scope] if dot else [n for n in names if registry.takes(n, key)]
        if not targets:
            raise ValueError(f"{flag}: none of {', '.join(names)} takes an option {key!r}")
        for name in targets:
            routed[name][key] = value
    return routed


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError("--plot needs matplotlib: pip install matplotlib (or grposcope[bench])") from None
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


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
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _print_sim_table(results: list[Any]) -> None:
    """One row per run: what it spent, how much of it was informative, and where accuracy went. The
    estimator gets a column only when the runs differ in it."""
    from rich import box
    from rich.console import Console
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
    console = Console()
    if not console.is_terminal:  # a pipe, a log file, a test: rich's 80 columns would cut the numbers
        console = Console(width=120)
    console.print(table)


def _console_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def run() -> None:  # the console-script entry point
    app()


if __name__ == "__main__":
    run()
