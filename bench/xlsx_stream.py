"""Does a big sheet stream? Parse workbooks of 10,000 and 100,000 rows in the sandbox, as an upload is.

Each workbook (written by openpyxl's write-only mode: one sheet, a header and five columns of
text, numbers and dates per row) is parsed by :func:`ingest.parsers.parse` under the parse CPU,
wall-clock and memory caps, and one line is printed: rows, file bytes, characters of normalised
text, blocks, wall-clock seconds and peak RSS growth in MiB (:func:`bench.corpus_report.measure_ingest`),
or the error code when the parse was refused (``parse_cpu_limit`` past ``Settings.parse_cpu_s``,
``parse_timeout`` past ``Settings.parse_wall_s``). Quote ``uptime`` with the figures.

    python bench/xlsx_stream.py [--rows 10000 100000]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus_report import measure_ingest, uptime  # noqa: E402


def workbook(rows: int) -> bytes:
    """An XLSX file of one sheet: a header row and ``rows`` rows of five columns."""
    import openpyxl

    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("Inspections")
    ws.append(["Crane", "Berth", "Inspected", "Cost EUR", "Note"])
    for i in range(rows):
        ws.append([f"C{i}", i % 40, f"2025-05-{i % 28 + 1:02d}", i * 3, f"inspection note number {i} for crane C{i}"])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    args = ap.parse_args(argv)
    from ingest.parsers import parse

    print(f"uptime: {uptime()}")
    for rows in args.rows:
        data = workbook(rows)
        m = measure_ingest(lambda: parse("xlsx", data, "big.xlsx"))
        what = (f"chars={len(m.result.text):,} blocks={len(m.result.blocks):,}" if m.result is not None
                else f"refused={m.error.code}")
        print(f"rows={rows:,} bytes={len(data):,} {what} s={m.seconds:.1f} peak_growth_MiB={m.peak_mb:.0f}", flush=True)
    print(f"uptime: {uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
