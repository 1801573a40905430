"""Thread CPU of :func:`retrieval.pack.pack` alone, this checkout's against another's, on the same inputs.

    python bench/pack_ab.py DATA_DIR --against CHECKOUT [--inputs FILE] [--reps 3] [--patch FILE]

The first run asks every question of bench/budget_recall.py at budgets 500 and 4,000 over all
documents of DATA_DIR (an index of bench/scale_bench.py, as bench/retrieve_cpu.py opens it) and
keeps what each request hands to ``pack`` in ``--inputs`` (default: ``pack_inputs.pickle`` beside
DATA_DIR); later runs reuse that file. Then each input is packed by this checkout's
``retrieval/pack.py`` and by ``CHECKOUT/retrieval/pack.py`` (both loaded into this process, each
with its own token counter), alternately first, ``--reps`` times; the least thread CPU of each
request is kept. It prints per budget the mean of those minimums for both and the change, and how
many results (sections, context, tokens, every fate) differ.

Interleaving in one process is what makes a change of a few per cent visible on a machine whose
other load moves thread CPU by more than that from one run to the next (bench/retrieve_cpu.py's
whole-request table cannot). ``--patch FILE`` runs FILE with ``B`` bound to this checkout's
module first: a what-if (e.g. ``B._word_tail = lambda unit, text: 0``) that prices a part of
packing, whatever it does to the answers.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import pickle
import sys
import time
from pathlib import Path

REPO = Path.cwd()
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def _capture(data_dir: Path, out: Path) -> None:
    """Ask every question at 500 and 4,000 tokens and pickle each ``pack`` call's inputs to ``out``."""
    from budget_recall import load_questions
    from scale_bench import settings_for

    import retrieval.search as search
    from plugin.api import DocAnchor
    from plugin.warm import warm_vectors

    questions = [q for q, _, _ in load_questions(None, None)]
    da = DocAnchor(settings_for(data_dir, None))
    warm_vectors(da)
    calls = []
    inner = search.pack

    def recording(pieces, budget, count, **kwargs):
        calls.append((list(pieces), budget, kwargs.get("query_terms") or set()))
        return inner(pieces, budget, count, **kwargs)

    search.pack = recording
    for budget in (500, 4000):
        for q in questions:
            da.retrieve(q, budget)
    da.close()
    out.write_bytes(pickle.dumps(calls))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _digest(res) -> str:
    fates = sorted((cid, repr(p)) for cid, p in res.fates.items())
    whole = (res.sections, res.context, res.context_tokens_used, fates, res.text_tokens, res.citation_tokens)
    return hashlib.sha256(repr(whole).encode()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--against", type=Path, required=True, help="the other checkout (its retrieval/pack.py)")
    ap.add_argument("--inputs", type=Path, help="the pickled pack inputs (written by the first run)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--patch", type=Path, help="a what-if run against this checkout's module, bound to B")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    inputs = args.inputs or args.data_dir.parent / "pack_inputs.pickle"
    if not inputs.exists():
        _capture(args.data_dir, inputs)
    from docanchor.lexical import tokenize
    from docanchor.tokens import TokenCounter

    a = _load(args.against / "retrieval" / "pack.py", "pack_against")
    b = _load(REPO / "retrieval" / "pack.py", "pack_here")
    if args.patch:
        exec(args.patch.read_text(), {"B": b})
    calls = pickle.loads(inputs.read_bytes())
    counters = {a: TokenCounter(), b: TokenCounter()}
    least: dict[tuple, float] = {}
    differ = 0
    for rep in range(args.reps):
        for i, (pieces, budget, terms) in enumerate(calls):
            got = {}
            for module in (a, b) if (i + rep) % 2 else (b, a):
                t = time.thread_time()
                res = module.pack(pieces, budget, counters[module].count, query_terms=terms, tokenize=tokenize)
                spent = time.thread_time() - t
                least[module, i] = min(least.get((module, i), spent), spent)
                got[module] = res
            differ += rep == 0 and _digest(got[a]) != _digest(got[b])
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"pack alone, {len(calls)} requests, least of {args.reps} each; load average {load}")
    for budget in sorted({c[1] for c in calls}):
        idx = [i for i, c in enumerate(calls) if c[1] == budget]
        ms_a = 1000 * sum(least[a, i] for i in idx) / len(idx)
        ms_b = 1000 * sum(least[b, i] for i in idx) / len(idx)
        print(f"  budget {budget:5d} ({len(idx)} requests): {args.against} {ms_a:.2f} ms, here {ms_b:.2f} ms "
              f"({100 * (ms_b - ms_a) / ms_a:+.1f} %)")
    print(f"results that differ: {differ} of {len(calls)}")


if __name__ == "__main__":
    main()
