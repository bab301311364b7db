"""One vocabulary across commands (issue 57, part 5): the simulator takes train's names for its components and
their options, the spellings before still work with one `note:` line naming the new one (cli/app.py, RENAMED),
and every command names the file or folder it writes `-o/--output`."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import textwrap

import pytest
import typer.main
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.cli.app import RENAMED, both_spellings

SMALL = ["--prompts", "300", "--batch_size", "16", "--num_generations", "4", "--steps", "4"]


def simulate(tmp_path, name: str, *args: str):
    out = tmp_path / f"{name}.json"
    result = CliRunner().invoke(app, ["simulate", *SMALL, *args, "--output", str(out)])
    return result, out


def runs(path) -> list[dict]:
    """The runs as written, less their wall time (the one thing the seed does not fix)."""
    out = json.loads(path.read_text())["runs"]
    for run in out:
        run.pop("seconds")
    return out


def notes(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("note:")]


# --- simulate takes train's names ------------------------------------------------------------------------------

def test_simulate_with_trains_names_is_the_same_run_as_with_the_old_ones(tmp_path):
    new, new_out = simulate(tmp_path, "new", "--sampler", "fixed,reinforce_ada", "--advantage_estimator",
                            "grpo,avspo", "--exit_rule", "pos", "--round_size", "4", "--acr_threshold_init", "0.2")
    assert new.exit_code == 0, new.output
    assert notes(new.output) == []
    old, old_out = simulate(tmp_path, "old", "--sampler", "fixed,reinforce_ada", "--estimator", "grpo,avspo",
                            "--sampler_options", "exit_rule=pos,reinforce_ada.round_size=4",
                            "--estimator_options", "avspo.acr_threshold_init=0.2")
    assert old.exit_code == 0, old.output
    assert runs(new_out) == runs(old_out)  # the same configs as written, and the same numbers, bit for bit
    configs = [r["config"] for r in runs(new_out)]
    # each flag went to the runs whose sampler or estimator takes it, and to no other
    assert [(c["sampler"], c["estimator"], c["sampler_options"], c["estimator_options"]) for c in configs] == [
        ("fixed", "grpo", {}, {}), ("fixed", "avspo", {}, {"acr_threshold_init": 0.2}),
        ("reinforce_ada", "grpo", {"exit_rule": "pos", "round_size": 4}, {}),
        ("reinforce_ada", "avspo", {"exit_rule": "pos", "round_size": 4}, {"acr_threshold_init": 0.2})]


def test_each_old_spelling_works_and_prints_one_note_naming_the_new_one(tmp_path):
    result, out = simulate(tmp_path, "old", "--sampler", "reinforce_ada", "--estimator", "avspo",
                           "--sampler-options", "exit_rule=pos", "--estimator_options", "virtual_sample_alpha=0.3")
    assert result.exit_code == 0, result.output
    assert notes(result.output) == [
        "note: --estimator is now --advantage_estimator; --estimator still works, and will go in a later version",
        "note: --sampler_options is now a flag per option, as in grposcope train (e.g. --exit_rule pos), and "
        "--sampler_kwargs '{json}' for a plug-in's other keyword arguments; --sampler_options still works, and "
        "will go in a later version",
        "note: --estimator_options is now a flag per option, as in grposcope train (e.g. --virtual_sample_alpha "
        "0.5), and --advantage_estimator_kwargs '{json}' for a plug-in's other keyword arguments; "
        "--estimator_options still works, and will go in a later version"]
    (config,) = [r["config"] for r in runs(out)]
    assert (config["estimator"], config["sampler_options"], config["estimator_options"]) == (
        "avspo", {"exit_rule": "pos"}, {"virtual_sample_alpha": 0.3})


def test_the_help_shows_the_new_names_and_the_component_flags_not_the_old_spellings():
    result = CliRunner().invoke(app, ["simulate", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for shown in ("--advantage_estimator ", "--sampler_kwargs", "--advantage_estimator_kwargs",
                  "--sampler knapsack: --sample_budget None, --knapsack_max_groups 4",
                  "--sampler reinforce_ada: --exit_rule \"balance\"", "--advantage_estimator avspo: "):
        assert shown in text
    for hidden in ("--estimator ", "--sampler_options", "--estimator_options", "--policy_loss", "--epsilon"):
        assert hidden not in text


def test_every_component_flag_of_simulate_is_a_train_option_of_the_same_name():
    # the same flag works in both: a flag simulate takes that train lacks would be a second vocabulary
    from grposcope.cli.sim_options import component_flags
    from grposcope.trainer import GRPOConfig

    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    flags = set(component_flags())
    assert {"exit_rule", "knapsack_max_groups", "sample_budget", "acr_threshold_init"} <= flags
    assert flags <= fields, sorted(flags - fields)


def test_a_flag_is_read_as_the_type_train_reads_it(tmp_path):
    result, out = simulate(tmp_path, "typed", "--sampler", "knapsack", "--sample_budget", "96",
                           "--knapsack_max_groups", "3", "--advantage_estimator", "avspo",
                           "--virtual_reward_range", "-1,1", "--acr_threshold_adaptive", "false")
    assert result.exit_code == 0, result.output
    (config,) = [r["config"] for r in runs(out)]
    assert config["sampler_options"] == {"sample_budget": 96, "knapsack_max_groups": 3}
    assert config["estimator_options"] == {"virtual_reward_range": [-1.0, 1.0], "acr_threshold_adaptive": False}


def test_the_kwargs_mapping_refuses_an_option_that_is_a_flag_of_its_own(tmp_path):
    # as train refuses a config field inside advantage_estimator_kwargs: the flag is the one way to set it
    result, out = simulate(tmp_path, "s", "--sampler", "reinforce_ada", "--sampler_kwargs", '{"exit_rule": "pos"}')
    assert result.exit_code == 2 and not out.exists()
    assert "error: --sampler_kwargs: exit_rule is an option of its own; write --exit_rule pos, as grposcope " \
        "train takes it" in result.output.replace("\n", "")
    built_in = simulate(tmp_path, "s", "--sampler_kwargs", '{"rounds": 2}')[0]
    assert built_in.exit_code == 2
    assert "none of fixed takes an option 'rounds' (the mapping holds a plug-in's keyword arguments" in \
        built_in.output.replace("\n", "")


def test_an_unknown_or_foreign_flag_is_one_error_line(tmp_path):
    typo, out = simulate(tmp_path, "s", "--sampler", "reinforce_ada", "--exit_rul", "pos")
    assert typo.exit_code == 2 and not out.exists()
    # one line, as click's usage errors are (the test runner calls the program "root")
    assert re.fullmatch(r"error: (grposcope|root) simulate: No such option: --exit_rul \(Possible options: "
                        r"--exit_rule\); see (grposcope|root) simulate --help", typo.output.strip()), typo.output
    loss = simulate(tmp_path, "s", "--epsilon", "0.2")[0]
    assert loss.exit_code == 2
    assert loss.output.strip() == ("error: --epsilon is an option of the policy loss (grpo), which the simulator "
                                   "has none of: its update is REINFORCE on w (docs/simulator.md)")
    twice = simulate(tmp_path, "s", "--sampler", "reinforce_ada", "--exit_rule", "pos", "--sampler_options",
                     "exit_rule=neg")[0]
    assert twice.exit_code == 2 and "--exit_rule: exit_rule is set by --sampler_options too; set it once" in \
        twice.output.replace("\n", "")


PLUGIN = textwrap.dedent('''
    from grposcope.core.advantages import AdvantageEstimator, AdvantageOutput, grpo_advantages


    class Shifted(AdvantageEstimator):
        """grpo's advantages plus `shift`, a keyword argument that is no config field."""

        def __init__(self, shift: float = 0.0, advantage_eps: float = 1e-4):
            self.shift, self.eps = shift, advantage_eps

        def __call__(self, rewards, pool=None, as_drawn=None):
            return AdvantageOutput(grpo_advantages(rewards, "group", True, self.eps) + self.shift)
''')


@pytest.fixture
def shifted(tmp_path, monkeypatch):
    """A plug-in estimator, vocab_plugin:Shifted, on sys.path; the registry forgets it afterwards."""
    from grposcope.core.advantages import ESTIMATORS

    (tmp_path / "vocab_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "vocab_plugin:Shifted"
    if "vocab_plugin:Shifted" in ESTIMATORS._entries:
        ESTIMATORS.unload("vocab_plugin:Shifted")
    sys.modules.pop("vocab_plugin", None)


def test_a_plugins_keyword_arguments_go_in_the_kwargs_mapping_as_in_train(tmp_path, shifted):
    new, new_out = simulate(tmp_path, "new", "--advantage_estimator", f"grpo,{shifted}",
                            "--advantage_estimator_kwargs", '{"shift": 0.5}', "--advantage_eps", "0.001")
    assert new.exit_code == 0, new.output
    old, old_out = simulate(tmp_path, "old", "--estimator", f"grpo,{shifted}", "--estimator_options",
                            f"{shifted}.shift=0.5,advantage_eps=0.001")
    assert old.exit_code == 0, old.output
    assert runs(new_out) == runs(old_out)
    # the mapping reached the plug-in only; the flag every estimator that takes it, the plug-in too (by name)
    assert [r["config"]["estimator_options"] for r in runs(new_out)] == [
        {"advantage_eps": 0.001}, {"shift": 0.5, "advantage_eps": 0.001}]


def test_sweeps_simulate_backend_takes_the_same_flags_as_its_train_backend(tmp_path):
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, ["sweep", "--output", str(out), "--backend", "simulate", "--levels=-1",
                                      "--group_sizes", "4", "--samplers", "reinforce_ada", "--prompts", "200",
                                      "--batch_size", "16", "--features", "4", "--max_steps", "2",
                                      "--exit_rule", "pos", "--round_size", "4"])
    assert result.exit_code == 0, result.output
    (summary,) = [json.loads(p.read_text()) for p in out.glob("*/summary.json")]
    assert summary["config"]["sampler_options"] == {"exit_rule": "pos", "round_size": 4}


# --- one name for the output option ----------------------------------------------------------------------------

OUTPUT = ("--output", "-o")  # the file or folder a command writes: one name in every command
# what each command writes under that name; a second form of the result beside it, or beside what the command
# prints, keeps its own name (--json: the findings as JSON, --plot: a figure); train writes to output_dir,
# GRPOConfig's (TRL's) field; demo only prints
MAIN_OUTPUT = {"eval", "probe", "simulate", "sweep", "report", "diagnose"}
SECONDARY = {"diagnose": {"--json"}, "forecast": {"--json", "--plot"}, "audit-rewards": {"--json"},
             "simulate": {"--plot"}}
WRITES_NO_FILE_OPTION = {"train", "demo"}
SECONDARY_NAMES = {"--json", "--plot"}
# an option spelt like a file it writes (--out, --output_dir, --save_to, --json_out, --html, ...)
LOOKS_LIKE_OUTPUT = re.compile(r"^--(out|.*output.*|.*_out|json.*|plot.*|html|md|csv|png|pdf|save_to|dest.*|"
                               r"export.*|dump.*|.*_dir|.*_file|.*_path)$")


def commands() -> dict:
    return typer.main.get_command(app).commands


def output_options(command) -> dict[str, list[str]]:
    """The command's options that look like something it writes, or that its --overwrite help names: their
    name -> all their spellings."""
    options = [p for p in command.params if p.param_type_name == "option" and not getattr(p, "hidden", False)]
    overwrite = next((p.help or "" for p in options if "--overwrite" in p.opts), "")
    named = set(re.findall(r"--[a-z_]+", overwrite))
    return {p.opts[0]: list(p.opts) for p in options if LOOKS_LIKE_OUTPUT.match(p.opts[0]) or p.opts[0] in named}


def test_every_command_is_classified_by_what_it_writes():
    # a new command must say here what it writes, and under which name: it cannot drift unseen
    classified = MAIN_OUTPUT | set(SECONDARY) | WRITES_NO_FILE_OPTION
    assert set(commands()) == classified, f"classify {sorted(set(commands()) ^ classified)} in this file"


@pytest.mark.parametrize("name", sorted(MAIN_OUTPUT | set(SECONDARY) | WRITES_NO_FILE_OPTION))
def test_each_commands_outputs_are_named_as_the_vocabulary_says(name):
    found = output_options(commands()[name])
    expected = ({"--output"} if name in MAIN_OUTPUT else set()) | SECONDARY.get(name, set())
    assert set(found) == expected, f"grposcope {name} writes {sorted(found)}; the vocabulary: {sorted(expected)}"
    if name in MAIN_OUTPUT:
        assert sorted(found["--output"]) == sorted(OUTPUT)
    for option in SECONDARY.get(name, ()):
        assert option in SECONDARY_NAMES and found[option] == [option]


def test_a_secondary_output_says_it_is_written_as_well():
    for name, options in SECONDARY.items():
        params = {p.opts[0]: p for p in commands()[name].params if p.param_type_name == "option"}
        for option in options:
            assert params[option].help.startswith("Also "), (name, option, params[option].help)


def test_train_writes_to_output_dir_trls_name():
    from grposcope.trainer import GRPOConfig

    assert "output_dir" in {f.name for f in dataclasses.fields(GRPOConfig)}


@pytest.mark.parametrize("name", sorted(MAIN_OUTPUT))
def test_out_is_still_taken_as_output_with_a_note(name, capsys):
    group = typer.main.get_command(app)
    assert both_spellings(group, [name, "--out", "x", "--out=y"]) == [name, "--output", "x", "--output=y"]
    assert capsys.readouterr().err.splitlines() == [
        "note: --out is now --output; --out still works, and will go in a later version"] * 2


def test_an_old_spelling_is_renamed_only_where_its_new_name_is_an_option():
    group = typer.main.get_command(app)
    # train takes GRPOConfig's fields as extra arguments: it never had --estimator, and keeps what it is given
    assert both_spellings(group, ["train", "--estimator", "grpo"]) == ["train", "--estimator", "grpo"]
    assert set(RENAMED.values()) <= {o for c in commands().values() for p in c.params for o in p.opts}
