"""The equal-numbers table: for a scripted reward, what each host (grposcope's own trainer, the TRL subclass, the
verl wrapper) drew per prompt per round, how many rows it kept, and its largest advantage difference from the
sampler and estimator alone.

The rows come from the tests themselves, which write them when GRPOSCOPE_EQUAL_NUMBERS_OUT names a folder
(tests/test_trl_samplers.py in .venv, tests/verl/test_verl_sampling.py in .venv-verl):

    GRPOSCOPE_EQUAL_NUMBERS_OUT=/tmp/equal .venv/bin/python -m pytest tests/test_trl_samplers.py -k alike
    GRPOSCOPE_EQUAL_NUMBERS_OUT=/tmp/equal .venv-verl/bin/python -m pytest tests/verl/test_verl_sampling.py
    python bench/equal_numbers.py /tmp/equal
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def rows(folder: Path) -> list[dict]:
    found = []
    for path in sorted(folder.glob("*.json")):
        found += json.loads(path.read_text())
    return found


def table(found: list[dict]) -> str:
    """One Markdown line per case and host, prompts in name order."""
    lines = ["| case | host | samples per prompt per round | rows kept per prompt | max advantage difference |",
             "|---|---|---|---|---|"]
    order = {"grposcope": 0, "trl": 1, "verl": 2}
    for row in sorted(found, key=lambda r: (r["case"], order.get(r["host"], 9))):
        drawn = "; ".join(f"{p}: {'+'.join(str(n) for n in rounds)}"
                          for p, rounds in sorted(row["samples_per_prompt_per_round"].items()))
        kept = ", ".join(f"{p}: {n}" for p, n in sorted(row["rows_kept"].items()))
        lines.append(f"| {row['case']} | {row['host']} | {drawn} | {kept} | {row['max_advantage_difference']:.1e} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    found = rows(parser.parse_args().folder)
    if not found:
        raise SystemExit("no rows: run the tests with GRPOSCOPE_EQUAL_NUMBERS_OUT set to this folder first")
    print(table(found))


if __name__ == "__main__":
    main()
