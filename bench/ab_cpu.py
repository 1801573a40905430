"""The A/B method shared by the CPU benches (:mod:`bench.parse_cpu`, :mod:`bench.chunk_cpu`): this
checkout against the code of an earlier commit, with a check that both give the same output.

- With ``--baseline REV`` the tree of commit ``REV`` is exported with ``git archive`` into a
  temporary folder (no worktree is created) and run with this checkout's virtualenv.
- Each measurement runs in a fresh process: the calling script again, with its own arguments and
  ``--child CODE_DIR OUT``; the child writes JSON ``{file: {"cpu_s": ..., "result": ..., ...}}``
  to ``OUT`` (a script may wrap that, see ``files_of`` in :func:`compare`).
- The codes alternate for ``--rounds`` rounds (every other round in the reverse order, against
  load drift), and each file's figure is the least CPU over the rounds (the run least disturbed).
- The report prints ``uptime`` at the start and the end, one line per file (the script's own
  columns, CPU s of each code, their ratio, the output's digest when every run gave the same, else
  ``DIFFERENT`` and where the first difference is) and the totals; the process exits with status
  1 when an output differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

Runs = dict[str, list[dict]]  # label ("this", "baseline") -> one {file: figures} per round


@dataclasses.dataclass(frozen=True)
class Table:
    """How a script's report looks: the file column (``name_width`` characters, text from
    ``name_cell(file)``), extra right-aligned columns ``(title, width, value(figures of the file in
    this checkout's first run))``, the title of the output column and the word of the summary."""

    name_width: int
    name_cell: Callable[[str], str]
    extras: list[tuple[str, int, Callable[[dict], object]]]
    column: str  # "output", "chunks"
    noun: str  # the summary's first word: "outputs", "chunks"
    same: str  # the summary when every output is identical


def export(rev: str, into: Path) -> Path:
    """The tree of commit ``rev`` under ``into`` (``git archive``; no worktree is created)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def alternate(script: str, argv: list[str], configs: dict[str, Path], rounds: int, tmp: Path) -> Runs:
    """Run ``script argv --child CODE_DIR OUT`` for each configuration ``rounds`` times in fresh
    processes, alternating their order; the JSON each run wrote, per label, in round order."""
    runs: Runs = {label: [] for label in configs}
    for r in range(rounds):
        for label in list(configs) if r % 2 == 0 else list(configs)[::-1]:
            out = tmp / f"{label}-{r}.json"
            subprocess.run([sys.executable, script, *argv, "--child", str(configs[label]), str(out)], check=True)
            runs[label].append(json.loads(out.read_text()))
    return runs


def _first_difference(a: str, b: str) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at character {at}: {a[max(0, at - 60):at + 60]!r} vs {b[max(0, at - 60):at + 60]!r}"


def _ratio(this: float, labels: list[str], other: dict[str, float]) -> str:
    return f"  {this / other[labels[1]]:5.2f}" if len(labels) > 1 and other[labels[1]] else ""


def report(runs: Runs, table: Table) -> bool:
    """Print the per-file table (files in the order of this checkout's first run) and the totals;
    True when every file's output is identical across all runs."""
    labels, same_all = list(runs), True
    first_run = runs["this"][0]

    def cells(name: str, values: list) -> str:
        return " ".join([f"{name:<{table.name_width}}"] + [f"{v:>{w}}" for (_, w, _), v in zip(table.extras, values)]) + " "

    print(cells("file", [t for t, _, _ in table.extras]) + " ".join(f"{label + ' CPU s':>15}" for label in labels)
          + ("  ratio" if len(labels) > 1 else "") + "  " + table.column)
    totals = dict.fromkeys(labels, 0.0)
    for name in first_run:
        best = {label: min(r[name]["cpu_s"] for r in rs) for label, rs in runs.items()}
        results = [r[name]["result"] for rs in runs.values() for r in rs]
        same = all(x == results[0] for x in results)
        same_all &= same
        for label in labels:
            totals[label] += best[label]
        digest = hashlib.sha256(results[0].encode()).hexdigest()[:12]
        print(cells(table.name_cell(name), [value(first_run[name]) for _, _, value in table.extras])
              + " ".join(f"{best[label]:15.3f}" for label in labels) + _ratio(best["this"], labels, best)
              + ("  identical " + digest if same else "  DIFFERENT"))
        if not same:
            other = next(x for x in results if x != results[0])
            print("    first difference " + _first_difference(results[0], other))
    print(cells("total", ["" for _ in table.extras]) + " ".join(f"{totals[label]:15.3f}" for label in labels)
          + _ratio(totals["this"], labels, totals))
    print(f"{table.noun}: " + (table.same if same_all else "DIFFERENT (see above)"))
    return same_all


def compare(script: str, argv: list[str], baseline: str | None, rounds: int, table: Table,
            files_of: Callable[[Runs], Runs] = lambda runs: runs) -> None:
    """The whole A/B run (see the module docstring); exits with status 1 when an output differs.
    ``files_of`` turns the children's JSON into ``{label: [{file: figures}]}`` (and may print)."""
    print(f"uptime at start: {os.popen('uptime').read().strip()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        configs = {"this": REPO}
        if baseline:
            configs["baseline"] = export(baseline, Path(tmp) / "baseline")
        same = report(files_of(alternate(script, argv, configs, rounds, Path(tmp))), table)
    print(f"uptime at end: {os.popen('uptime').read().strip()}")
    sys.exit(0 if same else 1)
