"""The docs say what the code does: the options table is current, and every logged metric is documented."""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from pathlib import Path

from grposcope.trainer.config_doc import embed

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_usage_options_table_matches_the_config():
    text = (DOCS / "usage.md").read_text()
    assert embed(text) == text, "docs/usage.md's options table is out of date: run python -m grposcope.cli.render"


def documented_metric(name: str, metrics_md: str) -> bool:
    generic = re.sub(r"^(reward|eval/accuracy)/[^/]+(/mean)?$", lambda m: f"{m.group(1)}/<", name)
    return f"`{name}`" in metrics_md or (generic != name and generic in metrics_md)


def test_every_metric_of_a_run_is_in_metrics_md(tmp_path, tiny_llama, tiny_tokenizer):
    from grposcope import GRPOConfig, GRPOTrainer

    data = [{"prompt": "What is 2 + 3 ?", "answer": "5", "level": "easy"}] * 4

    def toy(prompts, completions, **kw):
        return [len(c) / 50 for c in completions]

    config = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=2, per_device_train_batch_size=4,
                        max_completion_length=4, max_steps=2, eval_steps=1, beta=0.1, logging_steps=1)
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=toy, train_dataset=data,
                eval_dataset=data[:2], args=config).train()
    names = {k for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
             for k in json.loads(line) if k not in ("step", "time")}
    metrics_md = (DOCS / "metrics.md").read_text()
    missing = sorted(n for n in names if not documented_metric(n, metrics_md))
    assert not missing, f"not in docs/metrics.md: {missing}"
    assert {"loss/kl", "kl/mean", "eval/accuracy", "eval/accuracy/easy"} <= names


def test_integrations_md_what_runs_where_matches_the_registrations():
    from grposcope.integrations.hosts_doc import embed as embed_hosts

    text = (DOCS / "integrations.md").read_text()
    assert embed_hosts(text) == text, ("docs/integrations.md's 'What runs where' is out of date: run python -m "
                                       "grposcope.cli.render")


def test_metrics_md_names_table_is_the_catalogues():
    from grposcope.runs.catalogue import names_table

    text = (DOCS / "metrics.md").read_text()
    table = text.split("<!-- names-table:start -->\n", 1)[1].split("\n<!-- names-table:end -->", 1)[0]
    assert table == names_table(), ("docs/metrics.md's 'Names in other logs' table differs from the catalogue: "
                                    "paste grposcope.runs.catalogue.names_table() between its markers")


STEP = ("_step", "_generate", "_optimize")  # GRPOTrainer's step: sample, score, estimate, loss, step, monitor


def test_architecture_md_shows_the_trainers_own_grpo_step():
    from grposcope.trainer.trainer import GRPOTrainer

    text = (DOCS / "architecture.md").read_text()
    first = re.search(r"^## (.+)$", text, re.MULTILINE).group(1)
    assert first == "One GRPO step", f"docs/architecture.md opens with 'One GRPO step', not {first!r}"
    block = text.split("<!-- grpo-step:start -->\n", 1)[1].split("<!-- grpo-step:end -->", 1)[0]
    source = "\n".join(textwrap.dedent(inspect.getsource(getattr(GRPOTrainer, name))) for name in STEP)
    assert block == f"```python\n{source}```\n", (
        f"docs/architecture.md's 'One GRPO step' differs from GRPOTrainer.{', '.join(STEP)} "
        "(trainer/trainer.py): paste their source between the grpo-step markers")
    code = [line for line in source.splitlines() if line.strip()]
    assert len(code) <= 55, f"the step shown is {len(code)} lines: it should read on one screen (about 40)"
