"""Dense-similarity distributions of two embedding models, and one model's thresholds mapped onto the other's.

Retrieval's absolute rules turn at cosines measured on all-MiniLM-L6-v2
(:data:`docanchor.embedder.MINILM_DENSE`); another model's cosines sit at their own height. This
maps each MiniLM threshold ``t`` to the same quantile under the other model: ``q`` = the share of
MiniLM's similarities below ``t``, and the new threshold is the other model's ``q``-quantile of
the same distribution. Two distributions, both of bench/budget_recall.py's answerable English
questions (373, the 4 corpora of ../shared/bench/chunking_eval) asked of the whole index:

- ``top-1``: each question's best dense similarity (retrieval's dense list,
  :func:`retrieval.stages.gather.gather`): what ``strong`` and ``strong_pair`` judge (a strong
  match is decided by the best chunks of the list);
- ``top-40``: every similarity of each question's dense list (:data:`retrieval.stages.gather.DENSE_K`
  chunks): what ``evidence`` and ``whole_match`` judge (any listed chunk).

The no-answer questions (each asked of the other corpora's documents only, as budget_recall's
no-answer part) are printed as a check of the separation, not used in the mapping.

Run: ``HF_HUB_OFFLINE=1 python bench/dense_scale.py [--model multilingual-e5-small]`` after
``bench/budget_recall.py --reuse-index`` has built both models' English index (without it the
corpora are ingested and embedded here, through the same embedding cache).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from budget_recall import DATA, OUT, CachedEmbedder, load_questions, reused_index_dir  # noqa: E402

QUANTILES = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
RULES = (("strong", "top-1"), ("strong_pair", "top-1"), ("evidence", "top-40"), ("whole_match", "top-40"))
"""Each :class:`docanchor.embedder.DenseScale` field and the distribution it is mapped on."""


def similarities(model: str) -> dict[str, np.ndarray]:
    """``{"top-1", "top-40", "no-answer top-1": similarities}`` of ``model`` over the questions."""
    from docanchor.embedder import get_embedder
    from docanchor.settings import Settings
    from docanchor.text import normalise_query
    from plugin.api import DocAnchor
    from retrieval.stages import gather

    emb = CachedEmbedder(get_embedder(model), OUT / "embeddings.sqlite")
    settings = Settings(data_dir=Path("unused"), namespace="corpora")
    settings = settings.with_(data_dir=reused_index_dir(model, emb.precision, settings))
    da = DocAnchor(settings, embedder=emb)
    by_corpus: dict[str, list[str]] = {}
    for path in sorted((DATA / "corpora").glob("*.md")):
        by_corpus.setdefault(path.stem, []).append(da.ingest_file(path, namespace="corpora").record.doc_id)
    records = gather.records(da.ctx, "corpora")
    top1, top40, none1 = [], [], []
    for q, c, _ in load_questions(None, None):
        qn = normalise_query(q)
        sims = [s for _, s in gather.gather(da.ctx, "corpora", qn, None, records).dense]
        top1.append(sims[0])
        top40.extend(sims)
        others = sorted(d for k, ids in by_corpus.items() if k != c for d in ids)
        none1.append(gather.gather(da.ctx, "corpora", qn, others, records).dense[0][1])
    return {"top-1": np.array(top1), "top-40": np.array(top40), "no-answer top-1": np.array(none1)}


def main() -> None:
    from docanchor.embedder import MINILM_DENSE
    from docanchor.settings import DEFAULT_EMBEDDING_MODEL

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="multilingual-e5-small", help="the model whose thresholds are mapped")
    args = ap.parse_args()
    base, other = similarities(DEFAULT_EMBEDDING_MODEL), similarities(args.model)
    print(f"{'distribution':18} {'model':24} n     " + " ".join(f"q{int(q * 100):02d}".rjust(6) for q in QUANTILES))
    for name in base:
        for label, dist in ((DEFAULT_EMBEDDING_MODEL, base[name]), (args.model, other[name])):
            print(f"{name:18} {label:24} {len(dist):5} " + " ".join(f"{v:6.3f}" for v in np.quantile(dist, QUANTILES)))
    print(f"\nthreshold    on      {DEFAULT_EMBEDDING_MODEL:>18} quantile {args.model:>22}  (other distribution)")
    for field, on in RULES:
        t = getattr(MINILM_DENSE, field)
        alt = "top-40" if on == "top-1" else "top-1"
        q, q_alt = float(np.mean(base[on] < t)), float(np.mean(base[alt] < t))
        print(f"{field:12} {on:7} {t:18.3f} {q:8.3f} {np.quantile(other[on], q):22.3f}"
              f"  ({alt}: q {q_alt:.3f} -> {np.quantile(other[alt], q_alt):.3f})")
    for label, dist in ((DEFAULT_EMBEDDING_MODEL, base), (args.model, other)):
        print(f"no-answer top-1 above answerable top-1's median, {label}: "
              f"{np.mean(dist['no-answer top-1'] >= np.median(dist['top-1'])):.1%}")


if __name__ == "__main__":
    main()
