"""Ranked-list truncation rules for the cut-off stage, compared on the list the stage sees.

For every English question of bench/budget_recall.py, one ``DocAnchor.retrieve`` call records the
undecided candidates as :func:`retrieval.stages.cutoff.relevance_floor` receives them (after the
context stage: matches and their neighbours, with final scores) and the reference characters
each one's chunk holds. Each rule then gives a floor for that list, and the table prints, per
half of the questions, the mean number of listed candidates at or above the floor and the share
of the reference characters held by the candidates at or above it (neighbours included): the
most the packer could return under that floor at any budget. A rule that keeps fewer candidates
for the same share wins. Questions flagged ``no_strong_match`` (their budget is capped instead)
are left out.

Rules (``s`` the listed candidates' scores above the share floor, best first):

- ``share X``: X times the best score (the stage's rule, :data:`retrieval.stages.cutoff.RELEVANCE_CUTOFF`).
- ``gap N``: the knee: the largest drop ``s[i] - s[i+1]`` with at least N candidates kept.
- ``spread R``: the first drop at least R times the mean of the drops within 3 places of it
  (at least 2 kept).
- ``sd K``: the mean plus K standard deviations of the listed candidates' scores.

Each rule but ``share`` is floored at the stage's share (it only stops earlier). The commit that
added this script gives the same rules measured end to end through the stage
(bench/budget_recall.py), where they ranked as they do here.

Run: ``python bench/cutoff_rules.py --index-dir DIR`` (a copy of bench/budget_recall.py's
``--reuse-index`` index; about 400 retrieves).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import recall_why  # noqa: E402  (after the sys.path insert)

Row = tuple[float, bool, int]
"""One candidate as the cut-off saw it: (final score, listed, reference characters its chunk holds)."""


def capture(da, questions, chunks_of) -> list[tuple[int, int, list[Row]]]:
    """``[(question number, reference characters, rows)]`` of the questions with a strong match."""
    from retrieval.stages import cutoff

    seen: list = []
    real = cutoff.relevance_floor

    def spy(pool):
        seen.append([(c.chunk_id, c.score, c.listed) for c in pool.values() if c.placement is None])
        return real(pool)

    cutoff.relevance_floor = spy
    out = []
    try:
        for qi, (q, corpus, refs) in enumerate(questions):
            seen.clear()
            r = da.retrieve(q, 1000)
            if r.no_strong_match or not seen:
                continue
            ref: set[int] = set()
            for s, e in refs:
                ref.update(range(int(s), int(e)))
            span = {c.chunk_id: (a, b) for c, a, b in chunks_of[corpus]}
            rows = []
            for cid, score, listed in seen[0]:
                a, b = span.get(cid, (0, 0))
                rows.append((score, listed, len(ref.intersection(range(a, b)))))
            out.append((qi, len(ref), rows))
    finally:
        cutoff.relevance_floor = real
    return out


def share(x: float):
    """The floor of ``share X``; each rule maps a question's rows to a floor."""
    return lambda rows: x * max(r[0] for r in rows)


def _above(rows: list[Row]) -> tuple[float, list[float]]:
    from retrieval.stages.cutoff import RELEVANCE_CUTOFF

    base = share(RELEVANCE_CUTOFF)(rows)
    return base, sorted((r[0] for r in rows if r[1] and r[0] >= base), reverse=True)


def gap(least: int):
    def floor(rows):
        base, s = _above(rows)
        drops = [(s[i] - s[i + 1], -i) for i in range(len(s) - 1) if i + 1 >= least]
        return max(base, s[-max(drops)[1]]) if drops else base
    return floor


def spread(ratio: float, least: int = 2, window: int = 3):
    def floor(rows):
        base, s = _above(rows)
        drops = [s[i] - s[i + 1] for i in range(len(s) - 1)]
        for i, d in enumerate(drops):
            near = [drops[j] for j in range(max(0, i - window), min(len(drops), i + window + 1)) if j != i]
            if i + 1 >= least and d > 0 and near and d >= ratio * statistics.mean(near):
                return max(base, s[i])
        return base
    return floor


def sd(k: float):
    def floor(rows):
        base, _ = _above(rows)
        listed = [r[0] for r in rows if r[1]]
        if len(listed) < 2:
            return base
        return max(base, min(max(listed), statistics.mean(listed) + k * statistics.pstdev(listed)))
    return floor


RULES = {
    **{f"share {x}": share(x) for x in (0.2, 0.28, 0.32, 0.36, 0.4, 0.45, 0.5)},
    **{f"gap {n}": gap(n) for n in (1, 3, 6, 10, 15)},
    **{f"spread {r}": spread(r) for r in (3, 5)},
    **{f"sd {k}": sd(k) for k in (0, 0.5, 1.0)},
}
"""The rules compared, by the name the table prints."""


def table(captured) -> None:
    halves = {"odd": [c for c in captured if c[0] % 2 == 0], "even": [c for c in captured if c[0] % 2 == 1],
              "all": captured}
    print(f"{len(captured)} questions with a strong match; per half: listed candidates kept (mean) / "
          f"reference characters held by the candidates kept (%)")
    print(f"{'rule':12} " + " ".join(f"{h:>16}" for h in halves))
    for name, rule in RULES.items():
        cells = []
        for part in halves.values():
            kept, held = [], []
            for _, nref, rows in part:
                f = rule(rows)
                kept.append(sum(1 for r in rows if r[1] and r[0] >= f))
                held.append(sum(r[2] for r in rows if r[0] >= f) / max(1, nref))
            cells.append(f"{statistics.mean(kept):6.2f} / {100 * statistics.mean(held):6.2f}")
        print(f"{name:12} " + " ".join(f"{c:>16}" for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index-dir", type=Path, required=True, help="a copy of bench/budget_recall.py's index")
    args = ap.parse_args()
    args.half, args.every = "", 1
    da, _, questions, _, chunks_of = recall_why.setup(args)
    table(capture(da, questions, chunks_of))


if __name__ == "__main__":
    main()
