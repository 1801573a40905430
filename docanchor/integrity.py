"""Records = Chroma = lexical index: the start-up clean-up, the discard of a failed ingest, the audit.

The document records are the truth: a document exists when its record does (the record is
written after all of its chunks and deleted before them, see :mod:`docanchor.store`). What can
disagree with them, and where it is mended:

- chunks of a document that has no record -- an ingest that failed (:func:`discard_unrecorded`,
  called at once; when the store did not answer then, a running server tries again until it does:
  :func:`discard_left_behind`) or a process killed halfway (:func:`clean_up` at start-up, from the
  pending marks of :mod:`docanchor.pending`), in Chroma and in the lexical index alike;
- a lexical index that is damaged, missing or holds other counts than the records: checked and
  mended by :class:`docanchor.lexical.LexicalIndex` whenever a process opens a namespace (and so
  at start-up by :func:`clean_up`);
- anything else (chunks deleted from Chroma by hand, marks lost): :func:`audit` reports it per
  document, ``docanchor check`` prints it, and ``docanchor check --repair`` removes stray chunks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from docanchor.context import Context
from docanchor.errors import Conflict
from docanchor.lexical import catch_up_plan

log = logging.getLogger("docanchor.integrity")


def discard_unrecorded(ctx: Context, namespace: str, doc_id: str) -> int:
    """Remove ``doc_id``'s chunks from Chroma and the lexical index unless it has a record.

    Only a document marked pending (:mod:`docanchor.pending`) can have chunks without a record
    here; for any other, nothing is read or written.

    Returns:
        Chunks removed from Chroma (0 when the document has a record: then nothing is touched).
    """
    if not ctx.store.pending.has(namespace, doc_id):
        return 0
    if ctx.store.get_document(namespace, doc_id) is not None:
        ctx.store.pending.clear(namespace, doc_id)
        return 0
    removed = ctx.store.delete_document(namespace, doc_id)
    ctx.lexical.delete(namespace, doc_id)
    return removed


def discard_left_behind(ctx: Context) -> int:
    """In a running process, remove what its failed ingests left in the store: every document it
    marked pending (:mod:`docanchor.pending`) and has no record (:func:`discard_unrecorded`). Under
    ``ctx.write_lock``, which an ingest holds from its first chunk written to its last record, so
    no mark names a write of this process under way.

    Returns:
        Chunks removed from Chroma.

    Raises:
        StoreUnavailable: the store still does not answer (the marks stay, for the next try).
    """
    removed = 0
    with ctx.write_lock:
        for namespace, doc_id in ctx.store.pending.all():
            n = discard_unrecorded(ctx, namespace, doc_id)
            if n:
                log.warning("removed %d chunks that a failed ingest of %s left in namespace %r", n, doc_id, namespace)
            removed += n
    return removed


@dataclass
class CleanUp:
    """What :func:`clean_up` removed: chunks of unrecorded documents, per namespace."""

    discarded: dict[str, int] = field(default_factory=dict)
    stray_chunks: dict[str, int] = field(default_factory=dict)


def clean_up(ctx: Context, *, scan: bool | None = None) -> CleanUp:
    """Make every namespace's Chroma chunks and lexical index agree with its records.

    1. Documents left pending by an ingest that died are discarded (:func:`discard_unrecorded`).
    2. Each namespace's lexical index is opened and checked (and mended) against the records.
    3. Chroma's chunk count is compared with the records' total. Stray chunks are then found
       by reading every chunk's ``doc_id`` and deleted -- only when ``scan`` (default: with
       embedded Chroma, where this process is the only writer); with a Chroma server another
       process's ingest in flight has chunks and no record yet, so they are only logged.

    A namespace indexed with another embedding model (``embedding_model_mismatch``, which every
    request to it answers until ``docanchor reindex``) is logged and skipped at step 2 or 3,
    whichever opens its chunks first, so one such namespace on a shared Chroma server does not
    stop a process from starting.

    Returns:
        A :class:`CleanUp`.
    """
    scan = not ctx.settings.chroma_host if scan is None else scan
    report = CleanUp()
    for namespace, doc_id in ctx.store.pending.all():
        n = discard_unrecorded(ctx, namespace, doc_id)
        if n:
            report.discarded[namespace] = report.discarded.get(namespace, 0) + n
            log.warning("removed %d chunks of an unfinished ingest of %s in namespace %r", n, doc_id, namespace)
    for namespace in ctx.store.namespaces():
        try:
            _check_namespace(ctx, namespace, scan, report)
        except Conflict as err:  # indexed with another model: unusable until reindexed, not a reason to stop
            log.warning("namespace %r not checked at start-up: %s", namespace, err.message)
    return report


def _check_namespace(ctx: Context, namespace: str, scan: bool, report: CleanUp) -> None:
    """Steps 2 and 3 of :func:`clean_up` for one namespace.

    Raises:
        Conflict: ``embedding_model_mismatch`` (or ``embedding_precision_mismatch``) when the
            namespace's lexical check or its chunk count opens a chunk collection of another model.
    """
    ctx.lexical.verify(namespace)
    expected = sum(r.n_chunks for r in ctx.store.list_documents(namespace))
    extra = ctx.store.count_chunks(namespace) - expected
    if extra > 0 and scan:
        removed = ctx.store.remove_orphans(namespace)
        report.stray_chunks[namespace] = removed
        log.warning("removed %d chunks without a document record in namespace %r", removed, namespace)
    elif extra > 0:
        log.warning("namespace %r holds %d chunks more than its records (ingests in flight elsewhere, or "
                    "left by a crash); 'docanchor check' tells which", namespace, extra)


@dataclass(frozen=True)
class DocumentAudit:
    """One document's chunk counts: its record's ``n_chunks`` (``None``: no record), Chroma's, the lexical index's."""

    doc_id: str
    record: int | None
    chroma: int
    lexical: int

    @property
    def ok(self) -> bool:
        return self.record is not None and self.record == self.chroma == self.lexical


@dataclass
class Audit:
    """Per-document counts of one namespace; ``problems`` lists every document that disagrees."""

    namespace: str
    documents: list[DocumentAudit]

    @property
    def problems(self) -> list[DocumentAudit]:
        return [d for d in self.documents if not d.ok]

    @property
    def orphans(self) -> list[DocumentAudit]:
        """Documents with chunks (in Chroma, the lexical index or both) and no record: an ingest
        killed before its record (start-up and ``check --repair`` remove them), or one under way."""
        return [d for d in self.documents if d.record is None]

    @property
    def orphan_chunks(self) -> int:
        """Chunks of :attr:`orphans`: per document, the more of its Chroma and lexical counts."""
        return sum(max(d.chroma, d.lexical) for d in self.orphans)

    @property
    def ok(self) -> bool:
        return not self.problems


def audit(ctx: Context, namespace: str) -> Audit:
    """Count every document's chunks in the records, in Chroma and in the lexical index.

    Reads every chunk id of the namespace from Chroma (paged); changes nothing. With a Chroma
    server, the lexical counts are those the index has once caught up with the store's change log
    (:func:`_caught_up`), as before a search.
    """
    records = {r.doc_id: r.n_chunks for r in ctx.store.list_documents(namespace)}
    chroma = {d: len(ids) for d, ids in ctx.store.chunk_ids_by_document(namespace).items()}
    lexical = ctx.lexical.doc_counts(namespace)
    if ctx.settings.chroma_host:
        lexical = _caught_up(ctx, namespace, lexical, records, chroma)
    docs = sorted(set(records) | set(chroma) | set(lexical))
    return Audit(namespace, [DocumentAudit(d, records.get(d), chroma.get(d, 0), lexical.get(d, 0)) for d in docs])


def _caught_up(ctx: Context, namespace: str, lexical: dict[str, int], records: dict[str, int],
               chroma: dict[str, int]) -> dict[str, int]:
    """``lexical`` (indexed chunks per document, as on disk) as catching up with the whole change log
    leaves it (:func:`docanchor.lexical.catch_up_plan`): a document another process wrote or
    deleted is indexed again from the store (Chroma's count) or dropped. The process holding the
    index (a running server's worker) applies those entries before its next search, and one that
    opens the index checks it against the records, so a lag behind the log is no disagreement; an
    index that differs for a document the log never named is one. Reads the namespace's whole
    change log; changes nothing."""
    touched = sorted({doc_id for _, _, doc_id in ctx.store.changes_since(namespace, 0)})
    drop, again = catch_up_plan(touched, lexical, records.get)
    dropped = set(drop)
    caught_up = {d: n for d, n in lexical.items() if d not in dropped}
    return {**caught_up, **{d: chroma.get(d, 0) for d in again}}
