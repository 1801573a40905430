"""Character offsets between a document's normalised text and the decoded text it came from.

Normalisation (``ingest.normalise.normalise_map``: NFKC, CRLF to LF, control characters out)
changes offsets wherever it changes a character ("½" becomes the three characters "1⁄2", "¯"
becomes " ̄", "\\r\\n" becomes "\\n"). Its per-character origin map is kept compactly as
*runs*: ``((n_0, d_0), (n_1, d_1), ...)`` with ascending ``n``, meaning that for every
normalised offset ``n`` with ``n_k <= n < n_{k+1}`` the source offset is ``n + d_k``. A file that
is already NFKC with LF line ends has the single run ``((0, 0),)``.

Offsets are in characters (code points) of the decoded text, not bytes.
"""

from __future__ import annotations

import bisect
from typing import Sequence

Runs = tuple[tuple[int, int], ...]
"""``((normalised_offset, source_minus_normalised), ...)``, ascending; see the module docstring."""


def runs_from_origin(origin: Sequence[int]) -> Runs:
    """Runs of an origin map (``origin[i]`` = source offset of normalised character ``i``; one
    extra final entry for the end of the text, as ``normalise_map`` returns it)."""
    runs: list[tuple[int, int]] = []
    last = None
    for n, src in enumerate(origin):
        delta = src - n
        if delta != last:
            runs.append((n, delta))
            last = delta
    return tuple(runs)


def slice_runs(runs: Runs, start: int, end: int) -> Runs:
    """The runs that cover normalised offsets ``start`` to ``end`` (both included), the first one
    moved to ``start``: what a chunk of ``[start, end)`` keeps to map any offset inside it."""
    if not runs:
        return ()
    i = max(0, bisect.bisect_right(runs, (start, float("inf"))) - 1)
    out = [(start, runs[i][1])]
    for n, delta in runs[i + 1:]:
        if n > end:
            break
        out.append((n, delta))
    return tuple(out)


def source_offset(runs: Runs, offset: int) -> int | None:
    """The source offset of normalised ``offset`` (``None`` without runs, or before the first)."""
    if not runs or offset < runs[0][0]:
        return None
    i = bisect.bisect_right(runs, (offset, float("inf"))) - 1
    return offset + runs[i][1]


def encode_runs(runs: Runs) -> str:
    """Runs as a compact string for stores that keep scalars only: ``"n:d n:d ..."``."""
    return " ".join(f"{n}:{d}" for n, d in runs)


def decode_runs(text: str | None) -> Runs:
    """The inverse of :func:`encode_runs`; ``""`` or ``None`` read as no runs."""
    if not text:
        return ()
    return tuple((int(n), int(d)) for n, d in (part.split(":") for part in text.split()))
