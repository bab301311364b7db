"""Findings as people read them: rich renderables for the terminal, Markdown for report.md and findings.md, HTML
for report.html. Everything that comes from a log (run names, keys, file names) is escaped for its medium."""

from __future__ import annotations

import html
from typing import Any

from .engine import Diagnosis
from .findings import Finding

STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
UNKNOWN_SHOWN = 12  # unknown keys listed by name; the rest counted


def _md(text: Any) -> str:
    """Text safe inside a Markdown table cell or list item: HTML escaped (a run named <img ...> stays text),
    pipes escaped, newlines as spaces."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _where(f: Finding) -> str:
    return f"from step {f.step}" if f.step is not None else "over the run"


def rich_diagnosis(d: Diagnosis, verbose: bool = False) -> list[Any]:
    """The renderables of one run's diagnosis, in order."""
    from rich.text import Text

    from ..terminal import terminal_safe

    safe = terminal_safe
    out: list[Any] = []
    head = Text()
    head.append(safe(d.run.name), style="bold")
    head.append(safe(f"  ({d.run.found or d.run.source}, {len(d.run.steps)} logged steps)"), style="dim")
    out.append(head)
    if not d.findings:
        out.append(Text("  no findings", style="green"))
    for f in d.findings:
        line = Text("  ")
        line.append(f"{f.severity.upper():8}", style=STYLE[f.severity])
        line.append(f" {f.detector}", style="bold")
        line.append(f" ({_where(f)}): ")
        line.append(safe(f.title))
        out.append(line)
        for e in f.evidence:
            out.append(Text(safe(f"      - {e}")))
        for host, text in (("grposcope", f.fix.grposcope), ("TRL", f.fix.trl), ("verl", f.fix.verl)):
            fix = Text(f"      fix ({host}): ", style="green")
            fix.append(safe(text), style="")
            out.append(fix)
        if f.refs:
            out.append(Text("      refs: " + "; ".join(str(r) for r in f.refs), style="dim"))
    out.append(Text(safe(f"  {d.cost.line()}"), style="bold"))
    out += [Text(safe(f"  {line}"), style="dim") for line in _footer(d, verbose)]
    return out


def _footer(d: Diagnosis, verbose: bool) -> list[str]:
    lines = [f"problem: {p}" for p in d.run.problems]
    if d.run.read_as:  # keys read by their plain spelling or --map: said, so a wrong reading is seen
        pairs = sorted(d.run.read_as.items())
        shown = pairs if verbose else pairs[:UNKNOWN_SHOWN]
        more = "" if len(shown) == len(pairs) else f", ... ({len(pairs) - len(shown)} more)"
        lines.append("read by name: " + ", ".join(f"{k} as {m}" for k, m in shown) + more
                     + " (--map KEY=METRIC reads a key otherwise)")
    if d.unchecked:
        short = ", or holds too few points of it" if any("too short" in v for v in d.unchecked.values()) else ""
        lines.append("not checked: " + "; ".join(f"{k} ({v})" for k, v in d.unchecked.items())
                     if verbose else f"not checked ({len(d.unchecked)}): {', '.join(d.unchecked)} "
                     f"(the log lacks what they read{short}; --verbose says what)")
    if d.run.unknown:
        keys = sorted(d.run.unknown)
        shown = ", ".join(keys if verbose else keys[:UNKNOWN_SHOWN])
        more = "" if verbose or len(keys) <= UNKNOWN_SHOWN else f", ... ({len(keys) - UNKNOWN_SHOWN} more)"
        lines.append(f"keys the metric catalogue does not know ({len(keys)}; kept, not read by any detector): "
                     f"{shown}{more}")
    return lines


def markdown(diagnoses: list[Diagnosis], heading: str = "## Findings") -> str:
    """The findings of every run as Markdown (report.md's first section, findings.md)."""
    lines = [heading, ""]
    for d in diagnoses:
        lines.append(f"**{_md(d.run.name)}**: {_md(d.cost.line())}")
        lines.append("")
        if not d.findings:
            lines.append("- no findings")
        for f in d.findings:
            lines.append(f"- **{f.severity}** `{f.detector}` ({_where(f)}): {_md(f.title)}")
            lines += [f"  - {_md(e)}" for e in f.evidence]
            lines.append(f"  - fix: grposcope: {_md(f.fix.grposcope)}; TRL: {_md(f.fix.trl)}; verl: {_md(f.fix.verl)}")
            if f.refs:
                lines.append(f"  - refs: {_md('; '.join(str(r) for r in f.refs))}")
        lines += [f"- {_md(line)}" for line in _footer(d, False)]
        lines.append("")
    return "\n".join(lines)


def html_section(diagnoses: list[Diagnosis]) -> str:
    """The findings of every run as an HTML section (report.html's first)."""
    esc = html.escape
    parts = ['<section id="findings"><h2>Findings</h2>']
    for d in diagnoses:
        parts.append(f"<h3>{esc(d.run.name)}</h3><p><b>{esc(d.cost.line())}</b></p><ul>")
        if not d.findings:
            parts.append("<li>no findings</li>")
        for f in d.findings:
            evidence = "".join(f"<li>{esc(e)}</li>" for e in f.evidence)
            refs = f"<li>refs: {esc('; '.join(str(r) for r in f.refs))}</li>" if f.refs else ""
            parts.append(
                f'<li class="{esc(f.severity)}"><b>{esc(f.severity)}</b> <code>{esc(f.detector)}</code> '
                f"({esc(_where(f))}): {esc(f.title)}<ul>{evidence}"
                f"<li>fix: grposcope: {esc(f.fix.grposcope)}; TRL: {esc(f.fix.trl)}; verl: {esc(f.fix.verl)}</li>"
                f"{refs}</ul></li>")
        parts += [f"<li>{esc(line)}</li>" for line in _footer(d, False)]
        parts.append("</ul>")
    parts.append("</section>")
    return "".join(parts)
