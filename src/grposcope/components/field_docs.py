"""The docs of a dataclass's fields, read from its source: a field's docstring is the string literal right below
it (the convention of grposcope's GRPOConfig and of components/fields.py, which IDEs show on hover). Written once
there, shown again wherever a host needs them: TRL's `--help` (metadata["help"]), docs/usage.md's options table.
"""

from __future__ import annotations

import ast
import inspect
import textwrap


def field_docs(cls: type) -> dict[str, str]:
    """Each field of `cls` and of the dataclasses it inherits -> its docstring on one line ("" when it has
    none); a field redeclared lower in the hierarchy keeps the lower doc."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or "__dataclass_fields__" not in vars(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):  # a class built at run time, or one of a library without sources
            continue
        node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef))
        for field, after in zip(node.body, node.body[1:] + [None]):
            if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
                doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                    else None
                docs[field.target.id] = " ".join(doc.split()) if isinstance(doc, str) else ""
    return docs
