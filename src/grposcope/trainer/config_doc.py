"""Renders GRPOConfig's fields as a Markdown table: the run-wide ones from config.py itself (name, default,
docstring), the components' from their signatures and docstrings, and from options.py which component reads
each, so that each option is documented once: docs/usage.md embeds the output; and components/fields.py, the
components' options as dataclass fields. `python -m grposcope.cli.render` writes both (and integrations.md's
table); tests fail until it has.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from typing import cast

BEGIN, END = "<!-- config-table:begin -->", "<!-- config-table:end -->"


def field_docs() -> dict[str, str]:
    """GRPOConfig's run-wide fields and their docstrings, read from config.py (the one place they are written)."""
    from ..components.field_docs import field_docs as docs_of
    from .config import GRPOConfig

    own = docs_of(GRPOConfig)
    return {name: own[name] for name in _own_fields()}


def _own_fields() -> list[str]:
    """The fields GRPOConfig declares itself (not those it inherits from the components' mixins), in order."""
    source = (Path(__file__).parent / "config.py").read_text()
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "GRPOConfig")
    return [cast(ast.Name, n.target).id for n in cls.body if isinstance(n, ast.AnnAssign)]


def config_table() -> str:
    import dataclasses

    from .config import GRPOConfig
    from .options import readers, show

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig) if f.default is not dataclasses.MISSING}

    source = (Path(__file__).parent / "config.py").read_text()
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GRPOConfig")
    sections = {i + 1: m.group(1) for i, line in enumerate(source.splitlines())
                if (m := re.match(r"\s*# --- (.+?) -+$", line))}
    rows, current = [], None
    body = cls.body
    for node, after in zip(body, body[1:] + [None]):
        if not isinstance(node, ast.AnnAssign):
            continue
        heading = max((ln for ln in sections if ln < node.lineno), default=None)
        if heading != current:
            assert heading is not None  # headings only grow down the class: never back to None
            current = heading
            rows.append(f"| **{sections[heading]}** | | | |")
        doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else ""
        assert isinstance(node.target, ast.Name) and isinstance(doc, str)  # a field's name and its docstring
        default = show(defaults[node.target.id]) if node.target.id in defaults else "required"
        text = " ".join(doc.split()).replace("|", "\\|")
        rows.append(f"| `{node.target.id}` | `{default}` | {readers(node.target.id)} | {text} |")
    return "\n".join(["| option | default | read by | meaning |", "|---|---|---|---|", *rows, *component_rows()])


def component_rows() -> list[str]:
    """The options the components declare by their signatures, one section per family."""
    from ..components.families import FAMILIES
    from ..components.options import declared
    from .options import readers, show

    rows = []
    options = declared()
    for family in FAMILIES:
        rows.append(f"| **{family.replace('_', ' ')} options (declared by each {family})** | | | |")
        for option in (o for o in options.values() if o.family == family):
            text = " ".join(option.doc.split()).replace("|", "\\|")
            rows.append(f"| `{option.field}` | `{show(option.default)}` | {readers(option.field)} | {text} |")
    return rows


def embed(markdown: str) -> str:
    """Replaces the table between the markers in a Markdown text."""
    start, end = markdown.index(BEGIN) + len(BEGIN), markdown.index(END)
    return markdown[:start] + "\n" + config_table() + "\n" + markdown[end:]


# ---------------------------------------------------------------------------------------------------------
# components/fields.py: the components' options as dataclass fields in source, for IDEs and type checkers

FIELDS_FILE = Path(__file__).parents[1] / "components" / "fields.py"
_MIXINS = {"advantage_estimator": ("EstimatorOptions", "the advantage estimators'"),
           "sampler": ("SamplerOptions", "the samplers'"), "policy_loss": ("LossOptions", "the policy losses'")}
# grposcope's run-wide fields the TRL integration's config adds, meaning what they mean in grposcope's own
TRL_RUN_WIDE = ("advantage_estimator", "advantage_estimator_kwargs", "use_avspo", "sampler", "sampler_kwargs",
                "success_threshold", "acr_ema_lambda", "kl_bound", "skip_no_signal_steps", "diagnose_every")


def _hint(hint) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint).replace("typing.", "")


def render_fields() -> str:
    """The source of components/fields.py: one dataclass per family with a field per declared option (type,
    default and doc from the entry's signature and docstring), and the TRL subclass's subsets (the entries
    that run in TRL, without TRL's own fields). `GRPOConfig` inherits them, so an IDE, mypy or pyright sees
    every option; after a declaration changes, `GRPOConfig()` fails in one line (components.options.
    check_fields) and tests/test_config_static.py fails until `python -m grposcope.cli.render` has run."""
    from ..components.options import RENDER, TRL_SHARED, declared, in_host

    options = declared()
    lines = ['"""The components\' options as dataclass fields, for IDEs and type checkers: rendered from their',
             f"signatures and docstrings by `{RENDER}` (do not edit; a stale file fails",
             "GRPOConfig() in one line naming that command). grposcope's GRPOConfig inherits the first three, the",
             'TRL integration\'s the TRL ones."""',
             "", "from __future__ import annotations", "", "from dataclasses import dataclass",
             "from typing import Any", ""]

    def mixin(name: str, doc: str, fields: list) -> None:
        lines.extend(["", "@dataclass", f"class {name}:", f'    """{doc}"""', ""])
        for option in fields:
            if isinstance(option.default, (list, dict, set)):
                raise TypeError(f"option {option.field}: a mutable default cannot be rendered; use a tuple")
            lines.append(f"    {option.field}: {_hint(option.hint)} = {option.default!r}")
            text = " ".join(option.doc.split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
            text += " " if text.endswith('"') else ""  # a closing quote must not run into the docstring's
            wrapped = textwrap.wrap(f'"""{text}"""', width=116, break_on_hyphens=False)
            lines.extend(f"    {line}" for line in wrapped)
        if not fields:
            lines.append("    pass")
        lines.append("")

    for family, (name, what) in _MIXINS.items():
        mixin(name, f"{what[:1].upper()}{what[1:]} options, one field each.",
              [o for o in options.values() if o.family == family])
    import dataclasses
    import typing
    from types import SimpleNamespace

    from .config import GRPOConfig

    own = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    hints, docs = typing.get_type_hints(GRPOConfig), field_docs()
    mixin("TRLRunWideOptions", "grposcope's run-wide fields in the TRL integration's config (trainer/config.py).",
          [SimpleNamespace(field=n, hint=hints[n], default=own[n].default, doc=docs[n]) for n in TRL_RUN_WIDE])
    for family in ("advantage_estimator", "sampler"):
        name, what = _MIXINS[family]
        mixin(f"TRL{name}", f"{what[:1].upper()}{what[1:]} options that run in TRL, without TRL's own fields.",
              [o for o in options.values() if o.family == family and in_host(o, "trl")
               and o.field not in TRL_SHARED])
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(config_table())  # to look at; `python -m grposcope.cli.render` writes it into docs/usage.md
