"""Chunk vectors read ahead after a server starts, so the first searches filtered to a document
do not each wait for a read of its vectors from Chroma.

A search within a few documents is exact over their cached vectors
(:mod:`docanchor.doc_vectors`); without this, the first request touching each document reads that
document's vectors during the request. After start-up, a background thread reads the default
namespace's documents into the cache, a batch at a time, until the cache is full or every
document is in it. A failed read is logged and ends the warming; requests then read what they
need as before.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from docanchor.errors import DocAnchorError

if TYPE_CHECKING:
    from plugin.api import DocAnchor

log = logging.getLogger("docanchor.warm")


def warm_vectors(da: DocAnchor, namespace: str | None = None, stop=None) -> int:
    """Read the vectors of ``namespace``'s documents (default: the configured one) into the
    store's vector cache while they fit; ``stop()`` is asked before each batch. Returns how many
    documents were read.

    Raises:
        StoreUnavailable: Chroma cannot be read.
    """
    from retrieval.stages.gather import records

    ns = da.settings.namespace if namespace is None else namespace
    sizes = {d: r.n_chunks for d, r in sorted(records(da.ctx, ns).items())}
    return da.ctx.store.warm_vectors(ns, sizes, stop=stop)


class VectorWarmer:
    """One background thread running :func:`warm_vectors` for ``da``; :meth:`close` stops it
    between batches and waits for it."""

    def __init__(self, da: DocAnchor) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(da,), name="docanchor-warm-vectors", daemon=True)
        self._thread.start()

    def _run(self, da: DocAnchor) -> None:
        try:
            n = warm_vectors(da, stop=self._stop.is_set)
        except DocAnchorError as exc:
            log.warning("reading chunk vectors ahead stopped: %s", exc.message)
            return
        log.info("read the chunk vectors of %d document(s) ahead of searches", n)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
