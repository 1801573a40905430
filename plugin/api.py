"""The Python API: every DocAnchor operation as a method, for embedding it in another program.

    from plugin.api import DocAnchor
    da = DocAnchor()                      # settings from DOCANCHOR_* variables
    doc = da.ingest_file("report.pdf")
    print(doc.record.anchor)
    print(da.retrieve("What changed in Q3?", budget_tokens=500).context)

The HTTP layer and the CLI are thin wrappers over this class.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import unicodedata
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from docanchor.access import check_namespace
from docanchor.context import Context
from docanchor.embedder import Embedder
from docanchor.disk import DiskGuard
from docanchor.errors import (Conflict, InvalidRequest, NotFound, document_deleted, document_indexing, document_not_found,
                              unreadable_file)
from docanchor.jobs import EmbeddingMeter, Job, JobStore
from docanchor.library import Filter, Page, check_metadata, check_tags, matching, merge_metadata, page
from docanchor.settings import MAX_BUDGET_TOKENS, Settings
from docanchor.store_record import follow, store_name
from docanchor.types import DocumentRecord, RetrievalResult, path_source
from ingest.fetch import AddressPolicy, Fetched, fetch_url, is_public_address
from plugin.lock import Hold, hold
from plugin.runner import JobRunner
from plugin.warm import VectorWarmer

if TYPE_CHECKING:  # the heavy modules (chunking, parsers, BM25) load with the first call that needs them
    from docanchor.reindex import ReindexProgress, ReindexResult
    from ingest.pipeline import IngestResult, Prepared, Progress, Source
    from ingest.stream import Outcome, StreamProgress
    from retrieval.assembly.assemble import Assembly
    from retrieval.assembly.compact import Compaction
    from retrieval.read import ReadResult

MAX_QUERY_CHARS = 4000
MAX_SOURCE_CHARS = 4096
"""Longest source a document records, in characters (Linux's PATH_MAX; a longer path or URL is refused)."""
MAX_SOURCES = 100
"""Most sources one document records; identical bytes from further places are not added (a bound
on the record's size)."""


class DocAnchor:
    """One DocAnchor instance over one data dir (or Chroma server).

    Args:
        settings: defaults to ``Settings.from_env()``. Settings that name no Chroma server use the
            one the data dir belongs to (:func:`docanchor.store_record.follow`).
        embedder: an embedder instead of the configured model (tests pass a fake).

    Raises:
        ConfigError: ``settings`` name another store than the one the data dir belongs to.
    """

    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = None) -> None:
        self.settings = follow(settings or Settings.from_env())
        self.ctx = Context(self.settings, embedder=embedder)
        self._hold: Hold | None = None
        self._warmer: VectorWarmer | None = None
        self.url_policy: AddressPolicy = is_public_address
        """Which resolved addresses URL ingest may contact (tests relax it for a loopback server)."""

    def _ns(self, namespace: str | None) -> str:
        """``namespace`` as checked by :func:`docanchor.access.check_namespace` (trimmed), else the
        configured one. Raises: InvalidRequest ``invalid_namespace`` for an empty or too long one."""
        return self.settings.namespace if namespace is None else check_namespace(namespace)

    def close(self) -> None:
        """Finish queued ingest jobs, then release the store's files and connections and the data dir."""
        if "runner" in self.__dict__:
            self.runner.close()
            del self.__dict__["runner"]
        if self._warmer is not None:
            self._warmer.close()
            self._warmer = None
        self.ctx.close()
        if self._hold is not None:
            self._hold.release()
            self._hold = None

    def interrupt_jobs(self) -> None:
        """For a server's stop: start no more ingest jobs, stop the running ones at their next step
        and leave them queued, so the next start resumes them (:meth:`plugin.runner.JobRunner.interrupt`)."""
        if "runner" in self.__dict__:
            self.runner.interrupt()

    def stop_jobs_soon(self) -> None:
        """The first step of :meth:`interrupt_jobs`, safe in a signal handler (it only sets flags;
        :meth:`plugin.runner.JobRunner.stop_soon`): no job starts, running ones stop at their next
        step, requests waiting for a job answer at once."""
        runner = self.__dict__.get("runner")
        if runner is not None:
            runner.stop_soon()

    def hold_data_dir(self, holder: str = "python") -> Hold:
        """Take the data dir for this process until :meth:`close` (see :mod:`plugin.lock`).

        Every method that writes calls it first, so a program using this class never writes
        while a server (or a CLI command) of another process uses the same embedded data dir;
        ``docanchor serve`` calls it with ``"server"``, CLI commands with their name.

        Raises:
            Conflict: ``store_locked`` when another process holds the data dir.
        """
        if self._hold is None:
            self._hold = hold(self.settings, holder)
        return self._hold

    def __enter__(self) -> "DocAnchor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- jobs
    @cached_property
    def disk(self) -> DiskGuard:
        """Free-space checks of the data dir (see :mod:`docanchor.disk`)."""
        return DiskGuard(self.settings.data_dir, self.settings.min_free_disk_bytes)

    @cached_property
    def jobs(self) -> JobStore:
        return JobStore(self.settings.data_dir, self.disk)

    @cached_property
    def embedding_meter(self) -> EmbeddingMeter:
        """Chunks embedded by this instance's ingest jobs and the seconds it took (``/metrics``)."""
        return EmbeddingMeter()

    @cached_property
    def runner(self) -> JobRunner:
        """Lanes, URL fetchers and cancelling of the ingest jobs (see :mod:`plugin.runner`)."""
        return JobRunner(self)

    def submit(
        self, data: bytes, *, filename: str | None = None, title: str | None = None,
        namespace: str | None = None, wait_s: float = 0.0, replace: str | None = None,
        source: str | None = None, tags: Sequence[str] | None = None, metadata: dict | None = None,
    ) -> Job:
        """Queue an ingest job and wait up to ``wait_s`` seconds for it to end.

        Same bytes already stored: a job that is ``done`` at once with ``duplicate: true``
        (``tags`` and ``metadata``, when given, are applied to that document as
        :meth:`update_document` does).
        With ``replace``, the job replaces that document (see :meth:`replace`); its result then
        also has ``replaced`` (the old doc_id) and ``chunks_removed``. ``source`` is recorded as
        in :meth:`ingest_bytes`. Small jobs run in their own lane, so they never wait behind a
        big one (:func:`plugin.runner.job_lane`: bytes, then chunks).

        Raises:
            Conflict: ``store_locked`` when another process holds the data dir.
            InvalidRequest: ``source`` is not a string of at most :data:`MAX_SOURCE_CHARS` characters,
                or ``tags`` or ``metadata`` break the rules of :mod:`docanchor.library`.
            DocumentError: ``empty_file`` for zero bytes or only whitespace, before any job is queued
                (else such a file queued behind a running job would answer 202 and fail later).
            UnsupportedType: ``unsupported_type`` (415) for bytes of no supported type, likewise
                before any job is queued (:func:`ingest.detect.detect_type`).
            TooLarge: ``too_large`` (413) for a zip bomb (the sizes a package's ZIP directory
                declares), and DocumentError ``malformed`` for a package that is no readable ZIP,
                likewise (:func:`ingest.pipeline.refuse_at_upload`).
            NotFound: ``document_not_found`` when ``replace`` names no document of the namespace.
            Conflict: ``replace_in_progress`` while another job replaces that document, or
                ``document_indexing`` while it is itself being indexed.
            DiskFull: the upload cannot be kept without eating into the disk's reserve.

        Returns:
            The job as it stands when the wait ends (``status`` queued, running, done, failed or cancelled).
        """
        source = clean_source(filename if source is None else source)
        self.hold_data_dir()
        labels = _checked_labels(tags, metadata)
        return self.runner.submit(data, filename=(filename or "")[:300], title=title, namespace=self._ns(namespace),
                                  wait_s=wait_s, replace=replace, source=source, **labels)

    def submit_url(self, url: str, *, title: str | None = None, namespace: str | None = None, wait_s: float = 0.0,
                   replace: str | None = None, source: str | None = None, tags: Sequence[str] | None = None,
                   metadata: dict | None = None) -> Job:
        """Queue a job that fetches ``url`` (stage ``fetching``, in a small pool of fetch threads,
        under ``url_fetch_timeout_s`` for the whole fetch) and then ingests it like :meth:`submit`;
        ``source`` (default: the URL) is recorded as in :meth:`ingest_bytes`, ``tags`` and
        ``metadata`` as in :meth:`submit`.

        A fetch failure ends the job with its code (``url_address_refused``, ``url_timeout`` ...;
        see :func:`ingest.fetch.fetch_url`).

        Raises:
            InvalidRequest: ``url_invalid`` or ``url_scheme_not_allowed``, or bad ``tags`` or
                ``metadata``, before any job is queued.
            NotFound, Conflict, DiskFull: as :meth:`submit`.
        """
        source = clean_source(url if source is None else source)
        self.hold_data_dir()
        labels = _checked_labels(tags, metadata)
        return self.runner.submit_url(url, title=title, namespace=self._ns(namespace), wait_s=wait_s, replace=replace,
                                      source=source, **labels)

    def wait_job(self, job_id: str, wait_s: float) -> Job:
        """The job once it ends, or as it stands after ``wait_s`` seconds (at once while half the
        server's threads already wait for jobs)."""
        return self.runner.wait(job_id, wait_s)

    def get_job(self, job_id: str, namespace: str | None = None) -> Job:
        """Raises: NotFound (``job_not_found``, naming the namespace searched when one is given),
        also for another namespace's job."""
        job = self.jobs.get(job_id)
        if job is None or (namespace is not None and job.namespace != self._ns(namespace)):
            where = "" if namespace is None else f" in namespace {self._ns(namespace)!r}"
            raise NotFound(f"No ingest job with id {job_id!r}{where}.", code="job_not_found", job_id=job_id)
        return job

    def cancel_job(self, job_id: str, namespace: str | None = None) -> Job:
        """Cancel a queued or running ingest job; nothing of it stays stored, and a restart does not
        run it again. A running job stops at its next step; this waits up to
        ``plugin.runner.CANCEL_WAIT_S`` seconds for that and returns the job (``cancelled``, or still
        ``running`` with ``cancel_requested`` when it has not stopped yet).

        Raises:
            NotFound: ``job_not_found``.
            Conflict: ``job_finished`` when the job is done, failed or cancelled already
                (:func:`docanchor.errors.job_finished`).
        """
        return self.runner.cancel(job_id, namespace)

    def pending_job(self, doc_id: str, namespace: str | None = None) -> Job | None:
        """The running or queued job that will produce ``doc_id``, if any ("still indexing")."""
        return self.jobs.active_for_doc(self._ns(namespace), doc_id)

    def resume_jobs(self) -> list[str]:
        """Re-queue jobs a previous process left unfinished (called when a server starts).

        First the stores are made to agree with the document records
        (:func:`docanchor.integrity.clean_up`: chunks a crash left without a record go, from Chroma
        and the lexical index, and a damaged lexical index is rebuilt), so nothing half-written is
        ever visible; jobs cancelled before the crash end as cancelled; upload files of no
        unfinished job are removed. Returns the ids of the jobs re-queued.

        Raises:
            Conflict: ``store_locked`` when another process holds the data dir.
            DiskFull: the clean-up could not write for want of space.
        """
        self._clean_up()
        return self.runner.resume()

    def _clean_up(self) -> None:
        """The store clean-up of :meth:`resume_jobs` alone."""
        from docanchor.integrity import clean_up

        self.hold_data_dir()
        with self.disk.guard():
            clean_up(self.ctx)

    def health(self) -> dict:
        """``{"status": "ok"}``, or ``{"status": "degraded", "problems": [...]}`` with one
        ``{code, message, ...}`` per problem: ``store_unavailable`` (the Chroma server does not
        answer its heartbeat: :meth:`docanchor.store.ChromaStore.health`), ``disk_full`` (see
        :meth:`docanchor.disk.DiskGuard.health`)."""
        problems = [p for p in (self.ctx.store.health(), self.disk.health()) if p]
        return {"status": "degraded", "problems": problems} if problems else {"status": "ok"}

    # ----------------------------------------------------------------- documents
    def ingest_bytes(
        self, data: bytes, *, filename: str | None = None, title: str | None = None,
        namespace: str | None = None, progress: Progress | None = None, source: str | None = None,
        tags: Sequence[str] | None = None, metadata: dict | None = None, prepared: Prepared | None = None,
    ) -> IngestResult:
        """Ingest a file's bytes. See :func:`ingest.stream.ingest_document` for errors.

        ``tags`` and ``metadata`` (rules in :mod:`docanchor.library`) go into the record; bytes
        already stored keep their document, to which they are applied as by :meth:`update_document`.
        Before the chunks are embedded, the disk must hold them (:func:`docanchor.disk.chunk_store_bytes`)
        and keep ``min_free_disk_bytes`` free. An ingest that fails (or is cancelled) after writing
        chunks leaves none behind (Chroma or lexical index) -- except on a full disk, where Chroma
        is not touched again (it may block on a full disk) and the next start-up's clean-up removes them.

        Args:
            source: where the bytes came from (a path, a URL, an upload's file name), added to
                the document's ``sources``, also when the same bytes are stored already (then
                only the record changes). ``None`` records ``filename``; ``""`` records nothing.
            prepared: ``data`` parsed and chunked already (:func:`ingest.pipeline.prepare`, as an
                ingest job does before it changes lanes): not parsed again.

        Raises:
            Conflict: ``store_locked`` when another process holds the data dir.
            InvalidRequest: ``source`` is not a string of at most :data:`MAX_SOURCE_CHARS` characters.
            DiskFull: ``disk_full`` (507) before anything is written, or when a write failed for space.
            Conflict: ``document_deleted`` when the bytes were stored already but their document was
                deleted before the source could be added (:meth:`remember_source`); nothing is stored.
        """
        from ingest.stream import ingest_document

        source = clean_source(filename if source is None else source)
        self.hold_data_dir()
        ns = self._ns(namespace)
        labels = _checked_labels(tags, metadata)
        res = ingest_document(self.ctx, data, namespace=ns, filename=filename, title=title, progress=progress,
                              source=source, tags=labels["tags"] or (), metadata=labels["metadata"], disk=self.disk,
                              prepared=prepared)
        if res.duplicate:
            res.record = self.label(ns, self.remember_source(ns, res.record, source), **labels)
        return res

    def ingest_file(self, path: str | Path, *, title: str | None = None, namespace: str | None = None,
                    progress: Progress | None = None, tags: Sequence[str] | None = None,
                    metadata: dict | None = None) -> IngestResult:
        """Ingest a file from disk; its name is used as a type hint and fallback title, its
        absolute path (symbolic links kept, as given) is recorded as its source (``tags`` and
        ``metadata`` as in :meth:`ingest_bytes`).

        Raises:
            DocumentError: ``unreadable_file`` when the file cannot be read (missing, a folder, no
                permission: :func:`docanchor.errors.unreadable_file`, naming ``path``); else as
                :meth:`ingest_bytes`.
        """
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise unreadable_file(exc, path) from exc
        return self.ingest_bytes(data, filename=p.name, title=title, namespace=namespace, progress=progress,
                                 source=path_source(p), tags=tags, metadata=metadata)

    def ingest_many(self, sources: Iterable[Source | str | Path], *, namespace: str | None = None,
                    progress: StreamProgress | None = None) -> Iterator[Outcome]:
        """Ingest many files or byte strings, the next ones parsing while the current ones embed.

        Args:
            sources: paths (read when their turn comes; the absolute path is recorded as the
                source, as :meth:`ingest_file` does) or :class:`~ingest.pipeline.Source` objects
                (bytes or a path, with an optional file name, title, ``origin``, ``tags`` and
                ``metadata``; without an ``origin``, the path or else the file name is recorded).
            progress: ``progress(index, stage, done, total)`` for the source at ``index``; see
                :data:`ingest.stream.StreamProgress`.

        Yields:
            One :class:`~ingest.stream.Outcome` per source, in order: its ``result`` or the
            ``error`` that refused it (a bad file never stops the others; ``disk_full`` as in
            :meth:`ingest_bytes`). A duplicate's record gains the source, tags and metadata, as
            with :meth:`ingest_bytes`. See :func:`ingest.stream.ingest_stream`.

            A source whose path, ``origin``, ``tags`` or ``metadata`` break the rules of
            :meth:`ingest_bytes` (a path over :data:`MAX_SOURCE_CHARS` characters, say) gets an
            ``invalid_argument`` error when its turn to be read comes; the others go on.

        Raises:
            Conflict: ``store_locked`` when another process holds the data dir (at the call).
        """
        from ingest.pipeline import Source
        from ingest.stream import ingest_stream

        self.hold_data_dir()
        ns = self._ns(namespace)
        items = (s if isinstance(s, Source) else Source(path=Path(s)) for s in sources)
        outcomes = ingest_stream(self.ctx, items, namespace=ns, progress=progress, disk=self.disk,
                                 check=self._checked_source)
        return self._remembering(ns, outcomes)

    @staticmethod
    def _checked_source(item: Source) -> Source:
        """``item`` with the ``origin`` that gets recorded (its absolute path, else its file name,
        when it names none) and its tags and metadata checked (:mod:`docanchor.library`).

        Raises:
            InvalidRequest: ``invalid_argument`` for a path or ``origin`` over
                :data:`MAX_SOURCE_CHARS` characters, or tags or metadata that break the rules.
        """
        import dataclasses

        origin = item.origin
        if origin is None and item.path is not None:
            origin = path_source(item.path)
            if len(origin) > MAX_SOURCE_CHARS:
                raise InvalidRequest(f"The file's path is {len(origin):,} characters long; DocAnchor records paths of "
                                     f"at most {MAX_SOURCE_CHARS:,} characters: move the file to a shorter path.",
                                     code="invalid_argument")
        elif origin is None:
            origin = item.filename
        labels = _checked_labels(list(item.tags), item.metadata)
        return dataclasses.replace(item, origin=clean_source(origin), tags=tuple(labels["tags"]),
                                   metadata=labels["metadata"])

    def _remembering(self, namespace: str, outcomes: Iterator[Outcome]) -> Iterator[Outcome]:
        """``outcomes``, a duplicate's record gaining its source, tags and metadata; one whose
        document was deleted meanwhile becomes that source's ``document_deleted`` error."""
        for outcome in outcomes:
            res, src = outcome.result, outcome.source
            if res is not None and res.duplicate:
                try:
                    res.record = self.label(namespace, self.remember_source(namespace, res.record, src.origin),
                                            list(src.tags) or None, src.metadata)
                except Conflict as err:
                    if err.code != "document_deleted":
                        raise
                    outcome.result, outcome.error = None, err
            yield outcome

    def remember_source(self, namespace: str, record: DocumentRecord, source: str | None) -> DocumentRecord:
        """``record`` with ``source`` added to its sources (written back when it was not there).

        Raises:
            Conflict: ``document_deleted`` when the document was deleted since ``record`` was read
                (:meth:`_stored_now`): nothing is written, a record never comes back without its chunks.
        """
        if not source or source in record.sources or len(record.sources) >= MAX_SOURCES:
            return record
        with self.ctx.write_lock:
            current = self._stored_now(namespace, record.doc_id)
            if source not in current.sources:
                current.sources = [*current.sources, source]
                self.ctx.store.put_document(namespace, current)
        return current

    def forget_source(self, doc_id: str, source: str, namespace: str | None = None) -> dict:
        """Take ``source`` off a document's sources; a document left with none is deleted.

        What the CLI does when a file was edited (after the new version is stored) or is gone from
        a synced folder: identical bytes that also came from elsewhere stay stored.

        Returns:
            ``{"doc_id", "deleted", "chunks_removed", "sources"}`` (the sources that remain).

        Raises:
            NotFound, Conflict: as :meth:`get_document`; ``store_locked`` as :meth:`hold_data_dir`.
        """
        ns = self._ns(namespace)
        self.hold_data_dir()
        self.get_document(doc_id, ns)
        with self.ctx.write_lock:
            record = self._still_stored(ns, doc_id)
            left = [s for s in record.sources if s != source]
            if left == record.sources:
                return {"doc_id": doc_id, "deleted": False, "chunks_removed": 0, "sources": left}
            if left:
                record.sources = left
                self.ctx.store.put_document(ns, record)
                return {"doc_id": doc_id, "deleted": False, "chunks_removed": 0, "sources": left}
            removed = self._delete(ns, doc_id)
        return {"doc_id": doc_id, "deleted": True, "chunks_removed": removed, "sources": []}

    def ingest_text(self, text: str, *, title: str | None = None, namespace: str | None = None,
                    source: str | None = None, tags: Sequence[str] | None = None,
                    metadata: dict | None = None) -> IngestResult:
        """Ingest plain text (UTF-8); Markdown headings give structure when ``title`` ends in .md.
        ``source`` (where the text came from) is recorded when given; ``tags`` and ``metadata`` as
        in :meth:`ingest_bytes`."""
        data, name = text_upload(text, title)
        return self.ingest_bytes(data, filename=name, title=title, namespace=namespace, source=source or "", tags=tags,
                                 metadata=metadata)

    def fetch(self, url: str) -> Fetched:
        """Fetch a document from a public http(s) URL; see :func:`ingest.fetch.fetch_url` for errors."""
        return fetch_url(url, max_bytes=self.settings.max_upload_bytes, timeout_s=self.settings.url_fetch_timeout_s,
                         policy=self.url_policy)

    def list_documents(self, namespace: str | None = None) -> list[DocumentRecord]:
        """Every document of the namespace, by title then doc_id."""
        return self.ctx.store.list_documents(self._ns(namespace))

    def page_documents(self, flt: Filter | None = None, *, namespace: str | None = None, limit: int = 50,
                       cursor: str | None = None, sort: str = "title", order: str = "asc") -> Page:
        """One page of the namespace's documents that ``flt`` matches; see :func:`docanchor.library.page`.

        Raises:
            InvalidRequest: a bad ``limit``, ``sort``, ``order`` or ``cursor`` (one made for another
                namespace included), or namespace.
        """
        ns = self._ns(namespace)
        return page(self.list_documents(ns), flt or Filter(), namespace=ns, limit=limit, cursor=cursor, sort=sort,
                    order=order)

    def update_document(self, doc_id: str, *, tags: Sequence[str] | None = None, metadata: dict | None = None,
                        namespace: str | None = None) -> DocumentRecord:
        """Change a document's tags (replaced) and metadata (a JSON merge patch: ``None`` removes a key).

        Only the record is rewritten: no chunk is re-embedded or re-indexed.

        Raises:
            InvalidRequest: tags or metadata break the rules of :mod:`docanchor.library`.
            NotFound, Conflict: as :meth:`get_document`.
            DiskFull: the disk is full (nothing is changed).
        """
        ns = self._ns(namespace)
        tags = None if tags is None else check_tags(list(tags))
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidRequest("'metadata' must be a JSON object; a key set to null is removed.",
                                 code="invalid_argument", field="metadata")
        with self.ctx.write_lock:
            return self.label(ns, self.get_document(doc_id, ns), tags, metadata)

    def label(self, namespace: str, record: DocumentRecord, tags: list[str] | None,
              metadata: dict | None) -> DocumentRecord:
        """``record`` with ``tags`` (replacing) and ``metadata`` (merged), written when it changed;
        the change is made to the record as stored when it is written (:meth:`_stored_now`).

        Raises:
            DiskFull: the disk is full (the record is not touched).
            Conflict: ``document_deleted`` when the document was deleted since ``record`` was read.
        """
        if tags is None and metadata is None:
            return record
        with self.ctx.write_lock:
            current = self._stored_now(namespace, record.doc_id)
            new_tags = current.tags if tags is None else tags
            new_meta = current.metadata if metadata is None else merge_metadata(current.metadata, metadata)
            if (new_tags, new_meta) == (current.tags, current.metadata):
                return current
            self.disk.check()
            current.tags, current.metadata = list(new_tags), dict(new_meta)
            with self.disk.guard():
                self.ctx.store.put_document(namespace, current)
        return current

    def _stored_now(self, namespace: str, doc_id: str) -> DocumentRecord:
        """The record of ``doc_id`` as stored now, for a write that adds to it; call it holding
        ``ctx.write_lock``. A duplicate upload read the record before a delete may have run: writing
        its copy back would leave a record without chunks.

        Raises:
            Conflict: ``document_deleted`` (:func:`docanchor.errors.document_deleted`).
        """
        record = self.ctx.store.get_document(namespace, doc_id)
        if record is None:
            raise document_deleted(doc_id)
        return record

    def get_document(self, doc_id: str, namespace: str | None = None) -> DocumentRecord:
        """The stored record of ``doc_id``; every method naming a document goes through here.

        Raises:
            Conflict: ``document_indexing`` (409) while a queued or running ingest job will produce
                ``doc_id``; ``details`` has ``job_id``, ``percent`` and ``stage``.
            NotFound: ``document_not_found`` when no document and no pending job has that id.
        """
        ns = self._ns(namespace)
        record = self.ctx.store.get_document(ns, doc_id)
        if record is None:
            job = self.pending_job(doc_id, ns)
            if job is not None:
                raise document_indexing(doc_id, job.job_id, job.percent, job.stage)
            record = self.ctx.store.get_document(ns, doc_id)  # the job may have ended between the two looks
        if record is None:
            raise document_not_found(doc_id)
        return record

    def anchor(self, doc_id: str, namespace: str | None = None, *, named: bool | None = None) -> str:
        """The document's anchor, at most ``anchor_tokens`` budget tokens, as :meth:`reader_record`
        gives it (its "More:" line names ``namespace`` when the reader named it). Raises as
        :meth:`get_document`."""
        return self.reader_record(doc_id, namespace, named=named).anchor

    def reader_record(self, doc_id: str, namespace: str | None = None, *, named: bool | None = None) -> DocumentRecord:
        """The record of ``doc_id`` as a reader is given it; the stored record is not changed.

        Read in a namespace the reader named (``named``; by default, whether ``namespace`` is given),
        the anchor's "More:" line names that namespace, so a model that follows it reads where the
        document is, and the anchor stays within ``anchor_tokens`` budget tokens
        (:func:`plugin.answers.named_anchor`). Every door reads anchors here: the CLI's
        ``--namespace``, ``namespace=`` in Python, and over HTTP the X-DocAnchor-Namespace header,
        ``?namespace=`` or a body field (MCP's and LobeChat's ``namespace`` argument use the same rule).

        Raises:
            as :meth:`get_document`.
        """
        record = self.get_document(doc_id, namespace)
        if not (namespace is not None if named is None else named):
            return record
        return dataclasses.replace(record, anchor=self._named_anchor(record.anchor, record.doc_id, namespace))

    def named_answer(self, result: dict, namespace: str | None) -> dict:
        """An ingest answer (:func:`ingest_answer`) as a reader who named ``namespace`` is given it:
        its anchor's "More:" line names the namespace, by :meth:`reader_record`'s rule, so the
        answer to an upload and a later read of the anchor say the same. ``result`` unchanged when
        ``namespace`` is ``None`` or it has no anchor; never the stored record."""
        if namespace is None or not result.get("anchor"):
            return result
        return {**result, "anchor": self._named_anchor(result["anchor"], result["doc_id"], namespace)}

    def _named_anchor(self, anchor: str, doc_id: str, namespace: str | None) -> str:
        from plugin.answers import named_anchor  # with the retrieval modules it imports, on first use

        return named_anchor(anchor, doc_id, self._ns(namespace), counter=self.ctx.counter,
                            max_tokens=self.settings.anchor_tokens)

    def delete_document(self, doc_id: str, namespace: str | None = None) -> int:
        """Delete a document everywhere. Returns chunks removed.

        Of several deletes of one document at once, exactly one deletes it: the others find it gone
        (the record is looked up again under the write lock) and raise ``document_not_found``.

        Raises:
            NotFound, Conflict: as :meth:`get_document`; ``store_locked`` as :meth:`hold_data_dir`.
            DiskFull: the disk is full (deleting needs room in the store's logs first; nothing is changed).
        """
        ns = self._ns(namespace)
        self.hold_data_dir()
        self.get_document(doc_id, ns)  # a document still indexing is document_indexing, not "not found"
        with self.ctx.write_lock:
            self._still_stored(ns, doc_id)
            return self._delete(ns, doc_id)

    def _still_stored(self, namespace: str, doc_id: str) -> DocumentRecord:
        """The record of ``doc_id`` as stored now; call it holding ``ctx.write_lock``, so that of
        two writers that both found the document, the second sees what the first did.

        Raises:
            NotFound: ``document_not_found`` when another request removed it meanwhile.
        """
        record = self.ctx.store.get_document(namespace, doc_id)
        if record is None:
            raise document_not_found(doc_id)
        return record

    def _delete(self, namespace: str, doc_id: str) -> int:
        """Remove a document's record, chunks and BM25 rows; refused with ``disk_full`` on a full disk."""
        self.disk.check()
        with self.disk.guard(), self.ctx.write_lock:
            removed = self.ctx.store.delete_document(namespace, doc_id)
            self.ctx.lexical.delete(namespace, doc_id)
        return removed

    def replace(
        self, doc_id: str, data: bytes, *, filename: str | None = None, title: str | None = None,
        namespace: str | None = None, progress: Progress | None = None, source: str | None = None,
    ) -> IngestResult:
        """Replace document ``doc_id`` with new bytes: the new version is written, then the old removed.

        Order (readers never see a mix): the new version's chunks are stored and its record is
        written (it becomes visible whole), and only then is the old record deleted, then the old
        chunks from Chroma and from the BM25 index. Every read goes through the records, so a
        reader sees the old document, or both whole documents for that short moment, or the new
        one -- never a document with some chunks of each, and never neither. The new version has
        its own ``doc_id`` (ids derive from the bytes). Same bytes as the old version: nothing
        changes. Bytes already stored as another document: that document stays, the old goes.

        Returns:
            The new version's ingest result (``duplicate`` True when its bytes were stored already).

        Raises:
            NotFound: ``document_not_found`` when ``doc_id`` is not in the namespace (nothing written).
            Conflict: ``replace_in_progress`` while another replacement of ``doc_id`` runs (one
                document is replaced by one new version at a time).
            DocumentError, TooLarge, UnsupportedType, DiskFull: the new bytes cannot be ingested;
                the old version is kept untouched.
        """
        ns = self._ns(namespace)
        self.hold_data_dir()
        with self.runner.replacing(ns, doc_id):
            res = self.ingest_bytes(data, filename=filename, title=title, namespace=ns, progress=progress,
                                    source=source)
            self.drop_replaced(ns, doc_id, res.record.doc_id)
        return res

    def drop_replaced(self, namespace: str, old_id: str, new_id: str) -> dict:
        """Remove the replaced version (unless it is the new one). Returns the result fields
        ``replaced`` (the old doc_id) and ``chunks_removed``."""
        removed = self._delete(namespace, old_id) if old_id != new_id else 0
        return {"replaced": old_id, "chunks_removed": removed}

    def reindex(self, namespace: str | None = None, *, all_namespaces: bool = False, force: bool = False,
                progress: ReindexProgress | None = None) -> list[ReindexResult]:
        """Rebuild namespaces' chunk embeddings with the configured model; see :mod:`docanchor.reindex`.

        Args:
            namespace: the namespace to rebuild (default: the configured one).
            all_namespaces: rebuild every namespace that has documents instead.
            force: rebuild even where the configured model is already recorded.

        Raises:
            StoreUnavailable: Chroma cannot be reached or the rebuild came out short.
            Conflict: ``store_locked`` when another process holds the data dir.
        """
        from docanchor.reindex import reindex_namespace

        self.hold_data_dir()
        spaces = self.ctx.store.namespaces() if all_namespaces else [self._ns(namespace)]
        with self.ctx.write_lock:
            return [reindex_namespace(self.ctx, ns, force=force, progress=progress) for ns in spaces]

    def status(self, namespace: str | None = None) -> dict:
        """What the index holds and how it is built, for ``docanchor status`` and ``GET /v1/status``.

        Returns:
            ``namespace``; ``documents`` and ``chunks`` (visible ones); ``embedding_model`` and
            ``embedding_dimension`` configured; ``indexed_with``: the model recorded on the chunk
            collection when it differs (``docanchor reindex`` rebuilds), else ``None``;
            ``chunk_tokens``, ``chunk_overlap_tokens``, ``anchor_tokens`` (budget tokens),
            ``budget_encoding``; ``store``: ``embedded`` or ``chroma server <host>:<port>``.
            Opens the store; loads no model.
        """
        from docanchor.errors import Conflict

        ns = self._ns(namespace)
        docs = self.list_documents(ns)
        indexed_with = None
        try:
            self.ctx.store.count_chunks(ns)
        except Conflict as err:
            if err.code != "embedding_model_mismatch":
                raise
            indexed_with = err.details.get("stored_model")
        s = self.settings
        return {
            "namespace": ns, "documents": len(docs), "chunks": sum(d.n_chunks for d in docs),
            "embedding_model": self.ctx.embedder.name, "embedding_dimension": self.ctx.embedder.dimension,
            "indexed_with": indexed_with, "chunk_tokens": s.chunk_tokens,
            "chunk_overlap_tokens": s.chunk_overlap_tokens, "anchor_tokens": s.anchor_tokens,
            "budget_encoding": s.budget_encoding,
            "store": store_name(s),
        }

    # ----------------------------------------------------------------- retrieval
    def retrieve(
        self, query: str, budget_tokens: int | None = None, *, doc_ids: Sequence[str] | None = None,
        namespace: str | None = None, explain: bool = False, budget_source: str | None = None,
        scope: Filter | None = None,
    ) -> RetrievalResult:
        """The most relevant sections under ``budget_tokens`` (budget tokens; default from settings).

        With ``explain``, ``trace["budget_source"]`` is ``budget_source`` when given (the HTTP route
        passes ``"model"`` for a budget derived from the caller's model), else ``"request"`` when
        ``budget_tokens`` was given and ``"default"`` when ``settings.default_budget_tokens`` was used.
        ``scope`` (tags, metadata conditions) narrows the search to the documents it matches
        (within ``doc_ids`` when both are given) before the dense and BM25 searches run, so their
        top-k are taken among those documents only; when none matches, the result is empty and its
        ``message`` says so.
        A budget derived from the model (``budget_source="model"``) may be 0 (the conversation
        leaves no room): nothing is returned, and the trace shows every candidate dropped for budget.

        Raises:
            InvalidRequest: empty or over-long query (``details`` ``{"field": "query"}``, as the
                HTTP schema's), a budget that is not a whole number from 1
                to :data:`MAX_BUDGET_TOKENS` (see :func:`check_budget`), or an empty ``doc_ids``
                (``None`` searches every document).
            NotFound: a named ``doc_id`` does not exist.
            Conflict: ``document_indexing`` when a named ``doc_id`` is still being indexed.
        """
        query = check_query(query)
        if doc_ids is not None and not list(doc_ids):
            raise InvalidRequest("doc_ids is empty; name at least one document, or leave doc_ids out to search all "
                                 "documents.", code="invalid_argument")
        if budget_tokens is None:
            budget = self.settings.default_budget_tokens
        elif budget_tokens == 0 and budget_source == "model" and not isinstance(budget_tokens, bool):
            budget = 0
        else:
            budget = check_budget(budget_tokens)
        ns = self._ns(namespace)
        self._check_visible(ns, doc_ids or ())
        source = budget_source or ("default" if budget_tokens is None else "request")
        from retrieval.search import retrieve as _retrieve

        wanted = list(doc_ids) if doc_ids else None
        if scope:
            wanted = [r.doc_id for r in matching(self.ctx.store.list_documents(ns), scope)
                      if wanted is None or r.doc_id in wanted]
            if not wanted:
                return RetrievalResult(query, budget, [], "", 0, message=(
                    f"No document matches the filter ({scope.describe()}); nothing was searched. Check the tags and "
                    "metadata with GET /v1/documents, or search without the filter."))
        return _retrieve(self.ctx, ns, query, budget, doc_ids=wanted, explain=explain, budget_source=source)

    def start_up(self, resume_jobs: bool = True) -> list[str]:
        """What a server does before its first request (``docanchor serve``, ``docanchor mcp``):
        the model loaded, the store opened, one search (:meth:`warm_search`), then unfinished
        ingest jobs resumed (:meth:`resume_jobs`), then every object alive (the model, the
        modules, what the warm-up search cached) frozen out of garbage collection (:func:`gc.freeze`:
        they live as long as the process, and each full collection during a request would otherwise
        traverse them all again); after it, a background thread reads the documents' chunk vectors
        ahead of searches filtered to them (:mod:`plugin.warm`, stopped by :meth:`close`). Returns
        the ids of the jobs re-queued.

        Args:
            resume_jobs: ``False`` for a worker of ``docanchor serve --workers`` other than the
                first: it cleans up only what its own process left (its marks of ingests under
                way) and leaves the shared job log to the first worker, which resumes it before the
                others start (:mod:`plugin.workers`).

        Raises:
            Conflict, DiskFull, DocAnchorError: as :meth:`resume_jobs`, or when the model or the
                store cannot be opened.
        """
        self.warm_search()
        if resume_jobs:
            resumed = self.resume_jobs()
        else:  # another process resumes the jobs (a worker other than the first)
            self._clean_up()
            resumed = []
        gc.freeze()
        if self._warmer is None:
            self._warmer = VectorWarmer(self)
        return resumed

    def warm_search(self) -> None:
        """One search in the default namespace, its result unused, so that the first request does
        not pay what a process pays once: the model loaded, the lexical index opened, Chroma's
        vector index read into memory, the token encoding loaded, the document records cached (see
        :func:`retrieval.stages.gather.records`). An empty namespace only loads the model."""
        if self.ctx.store.count_documents(self._ns(None)):
            self.retrieve("warm up")
        else:
            self.ctx.embedder.embed_query("warm up")

    def _check_visible(self, ns: str, doc_ids: Sequence[str]) -> None:
        """Raise for the first of ``doc_ids`` that is not a visible document: those in the cached
        records (:func:`retrieval.stages.gather.records`) cost no read, the rest one read."""
        from retrieval.stages.gather import records

        cached = records(self.ctx, ns) if doc_ids else {}
        unsure = [d for d in doc_ids if d not in cached]
        found = self.ctx.store.get_documents(ns, unsure)  # one read for all of them
        for d in unsure:
            if d not in found:
                self.get_document(d, ns)  # raises document_indexing or document_not_found

    def read(self, doc_id: str, *, start: str | int | None = None, budget_tokens: int | None = None,
             namespace: str | None = None) -> ReadResult:
        """A contiguous window of one document; see :func:`retrieval.read.read_document`.

        Raises:
            InvalidRequest: a budget that is not a whole number from 1 to :data:`MAX_BUDGET_TOKENS`,
                or a ``start`` the document does not have.
            NotFound: no document ``doc_id`` in the namespace.
            Conflict: ``document_indexing`` while ``doc_id`` is still being indexed.
        """
        from retrieval.read import read_document

        ns = self._ns(namespace)
        record = self.get_document(doc_id, ns)
        budget = self.settings.default_budget_tokens if budget_tokens is None else check_budget(budget_tokens)
        return read_document(self.ctx, ns, record, start=start, budget_tokens=budget)

    # ----------------------------------------------------------------- conversations
    def assemble_context(
        self, model: str, messages: list, *, tools: list | None = None, reserve_tokens: int | None = None,
        conversation_id: str | None = None, query: str | None = None, budget_share: float | None = None,
        explain_only: bool = False, namespace: str | None = None, spill_threshold_tokens: int | None = None,
        compaction_threshold_percent: int | None = None, context_limit: int | None = None,
    ) -> Assembly:
        """A prompt for ``model`` that fits its window less ``reserve_tokens``; see
        :mod:`retrieval.assembly.assemble` and README.md ("Long conversations").

        Offloaded turns and spilled messages are stored in the namespace ``conversation_id``
        (derived from the conversation when ``None``); evidence for ``query`` comes from
        ``namespace`` (the caller's documents) into ``budget_share`` of the room left.
        ``spill_threshold_tokens`` and ``compaction_threshold_percent`` default to the settings of
        those names (bounds: :data:`docanchor.settings.SETTING_RANGES`). ``context_limit`` is the
        model's window in tokens, required for a model not in DocAnchor's context-limit table.

        Raises:
            InvalidRequest: a malformed argument (the message names it), ``unknown_model`` (a model
                not in the table, without ``context_limit``), or ``context_too_small``.
        """
        from plugin.conversation import assembly_request, policy, run_assembly

        checked = check_query(query) if query is not None else None
        request = assembly_request(model, messages, tools=tools, reserve_tokens=reserve_tokens,
                                   conversation_id=conversation_id, query=checked, budget_share=budget_share,
                                   explain_only=explain_only, context_limit=context_limit)
        rules = policy(self.settings, spill_threshold_tokens, compaction_threshold_percent)
        return run_assembly(self, request, self._ns(namespace), rules)

    def compact_context(
        self, model: str, messages: list, *, mode: str = "continue", conversation_id: str | None = None,
        keep_rounds: int | None = None, summary_tokens: int | None = None, explain_only: bool = False,
        context_limit: int | None = None,
    ) -> Compaction:
        """Compact a conversation (``mode`` ``continue`` or ``handoff``); see
        :mod:`retrieval.assembly.compact`. ``summary_tokens`` defaults to ``settings.summary_tokens``;
        ``context_limit`` as for :meth:`assemble_context`.

        Raises:
            InvalidRequest: a malformed argument (the message names it), or ``unknown_model``.
        """
        from plugin.conversation import compaction_request, run_compaction

        request = compaction_request(model, messages, mode=mode, conversation_id=conversation_id,
                                     keep_rounds=keep_rounds, summary_tokens=summary_tokens,
                                     explain_only=explain_only, context_limit=context_limit,
                                     settings=self.settings)
        return run_compaction(self, request)


def text_upload(text: object, title: str | None) -> tuple[bytes, str]:
    """Text given as a string, as the bytes and file name an upload of it would have.

    Raises:
        InvalidRequest: ``text`` is not a non-empty string.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("'text' must be a non-empty string.", code="invalid_argument")
    name = title if title and title.lower().endswith((".md", ".markdown", ".txt")) else "text.md"
    return text.encode("utf-8"), name


SUMMARY_FIELDS = ("doc_id", "title", "doc_type", "n_chunks", "n_tokens", "n_pages", "source_name", "sources",
                  "flags", "tags", "metadata", "added_at")
"""A document's fields in lists (``GET /v1/documents``, ``docanchor list --json``): the record
without its anchor and outline."""


def document_summary(record: DocumentRecord) -> dict:
    """``record`` as a list shows it: the :data:`SUMMARY_FIELDS`."""
    return {f: getattr(record, f) for f in SUMMARY_FIELDS}


def _checked_labels(tags: Sequence[str] | None, metadata: object) -> dict[str, Any]:
    """``{"tags", "metadata"}`` as :mod:`docanchor.library` checks them; ``None`` for one not given
    (a duplicate then keeps its own).

    Raises:
        InvalidRequest: tags or metadata break the library's rules.
    """
    return {"tags": None if tags is None else check_tags(tags),
            "metadata": None if metadata is None else check_metadata(metadata)}


def clean_source(source: object) -> str | None:
    """A source as recorded: stripped, without control characters; ``None`` for none or blank.

    Raises:
        InvalidRequest: ``invalid_argument`` for a non-string or one over :data:`MAX_SOURCE_CHARS`.
    """
    if source is None:
        return None
    if not isinstance(source, str):
        raise InvalidRequest("'source' must be a string: a path, a URL or a file name.", code="invalid_argument")
    cleaned = "".join(ch for ch in source if unicodedata.category(ch) != "Cc").strip()
    if len(cleaned) > MAX_SOURCE_CHARS:
        raise InvalidRequest(f"'source' is {len(cleaned):,} characters; the limit is {MAX_SOURCE_CHARS:,}.",
                             code="invalid_argument")
    return cleaned or None


def ingest_answer(record: DocumentRecord, duplicate: bool) -> dict:
    """What an ingest job answers with: the record's summary, its ``flags`` (hidden text, garbled
    pages...: the same object as ``GET /v1/documents/<doc_id>``), its ``sources`` and whether the
    bytes were stored already."""
    return {"doc_id": record.doc_id, "title": record.title, "doc_type": record.doc_type, "anchor": record.anchor,
            "n_chunks": record.n_chunks, "n_tokens": record.n_tokens, "flags": dict(record.flags),
            "sources": list(record.sources), "tags": list(record.tags), "metadata": dict(record.metadata),
            "duplicate": duplicate}


EMPTY_QUERY = "'query' must be a non-empty string of words to search for."
"""The one sentence the CLI, HTTP and the Python API give for a missing, empty or blank query
(:func:`check_query`). The tool doors (LobeChat, MCP) say it as they say every missing argument
(:func:`plugin.lobechat.check_arguments`): a model reads one form, in the words of the tool's schema."""


def check_query(query: object) -> str:
    """``query`` stripped, checked as every door checks it.

    Raises:
        InvalidRequest: ``invalid_argument`` (``details`` ``{"field": "query"}``): not a string, or
            empty once normalised as search reads it (:data:`EMPTY_QUERY`; control and format
            characters out: a query of only "\\x01\\x02" would otherwise search for nothing and
            answer with arbitrary sections), or over :data:`MAX_QUERY_CHARS` characters.
    """
    from docanchor.text import normalise_query

    if not isinstance(query, str) or not normalise_query(query):
        raise InvalidRequest(EMPTY_QUERY, code="invalid_argument", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidRequest(f"'query' is {len(query)} characters; the limit is {MAX_QUERY_CHARS}.", code="invalid_argument",
                             field="query")
    return query.strip()


def check_budget(budget: object) -> int:
    """``budget_tokens`` as an int: a whole number from 1 to :data:`MAX_BUDGET_TOKENS` tokens.

    A float with an integral value (``500.0``, as some JSON writers send integers) counts as that
    integer; anything else (``1.5``, ``"100"``, ``true``, ``null``, 0, negative, NaN, above the
    maximum) is refused rather than rounded, coerced or capped.

    Raises:
        InvalidRequest: ``invalid_argument`` with a sentence giving the accepted range, and
            ``details`` ``{"field": "budget_tokens", "value": ...}`` (the value as sent when it is a
            JSON scalar, else its JSON text, at most 40 characters).
    """
    whole = isinstance(budget, int) or (isinstance(budget, float) and budget.is_integer())
    if isinstance(budget, bool) or not whole or not 1 <= budget <= MAX_BUDGET_TOKENS:  # type: ignore[operator]
        try:
            shown = json.dumps(budget, allow_nan=False)[:40]
        except (TypeError, ValueError):  # not JSON, or NaN/infinity (no JSON value)
            shown = type(budget).__name__ if not isinstance(budget, float) else str(budget)
        scalar = budget is None or isinstance(budget, (bool, int, str)) or (isinstance(budget, float) and
                                                                            math.isfinite(budget))
        raise InvalidRequest(
            f"'budget_tokens' must be a whole number of tokens from 1 to {MAX_BUDGET_TOKENS:,}; got {shown}.",
            code="invalid_argument", field="budget_tokens", value=budget if scalar and len(shown) < 40 else shown,
        )
    return int(budget)  # type: ignore[arg-type]
