"""Renders GRPOConfig's fields as a Markdown table: the run-wide ones from config.py itself (name, default,
docstring), the components' from their registrations, and from options.py which component reads each, so
that each option is documented once: docs/usage.md embeds the output, and a test keeps it in sync.

    python -m grposcope.trainer.config_doc
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

BEGIN, END = "<!-- config-table:begin -->", "<!-- config-table:end -->"


def field_docs() -> dict[str, str]:
    """GRPOConfig's run-wide fields and their docstrings, read from config.py (the one place they are written),
    for the options table and for configs that reuse a field (the TRL integration's)."""
    source = (Path(__file__).parent / "config.py").read_text()
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "GRPOConfig")
    docs = {}
    for node, after in zip(cls.body, cls.body[1:] + [None]):
        if isinstance(node, ast.AnnAssign):
            has_doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            docs[node.target.id] = " ".join(after.value.value.split()) if has_doc else ""
    return docs


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
            current = heading
            rows.append(f"| **{sections[heading]}** | | | |")
        doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else ""
        default = show(defaults[node.target.id]) if node.target.id in defaults else "required"
        text = " ".join(doc.split()).replace("|", "\\|")
        rows.append(f"| `{node.target.id}` | `{default}` | {readers(node.target.id)} | {text} |")
    return "\n".join(["| option | default | read by | meaning |", "|---|---|---|---|", *rows, *component_rows()])


def component_rows() -> list[str]:
    """The options the components declare where they are registered, one section per family."""
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


if __name__ == "__main__":
    print(config_table())
