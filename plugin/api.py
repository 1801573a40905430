"""The Python API: every DocAnchor operation as a method, for embedding it in another program.

    from plugin.api import DocAnchor
    da = DocAnchor()                      # settings from DOCANCHOR_* variables
    doc = da.ingest_file("report.pdf")
    print(doc.record.anchor)
    print(da.retrieve("What changed in Q3?", budget_tokens=500).context)

The HTTP layer and the CLI are thin wrappers over this class.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

from docanchor.context import Context
from docanchor.embedder import Embedder
from docanchor.errors import InvalidRequest, document_not_found
from docanchor.settings import Settings
from docanchor.types import DocumentRecord, RetrievalResult
from ingest.pipeline import IngestResult, Progress, ingest_document
from retrieval.read import ReadResult, read_document
from retrieval.search import retrieve as _retrieve

MAX_QUERY_CHARS = 4000


class DocAnchor:
    """One DocAnchor instance over one data dir (or Chroma server).

    Args:
        settings: defaults to ``Settings.from_env()``.
        embedder: an embedder instead of the configured model (tests pass a fake).
    """

    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = None) -> None:
        self.settings = settings or Settings.from_env()
        self.ctx = Context(self.settings, embedder=embedder)
        self._write_lock = threading.Lock()

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.settings.namespace

    # ----------------------------------------------------------------- documents
    def ingest_bytes(
        self, data: bytes, *, filename: str | None = None, title: str | None = None,
        namespace: str | None = None, progress: Progress | None = None,
    ) -> IngestResult:
        """Ingest a file's bytes. See :func:`ingest.pipeline.ingest_document` for errors."""
        with self._write_lock:
            return ingest_document(
                self.ctx, data, namespace=self._ns(namespace), filename=filename, title=title, progress=progress
            )

    def ingest_file(self, path: str | Path, *, title: str | None = None, namespace: str | None = None,
                    progress: Progress | None = None) -> IngestResult:
        """Ingest a file from disk; its name is used as a type hint and fallback title."""
        p = Path(path)
        return self.ingest_bytes(p.read_bytes(), filename=p.name, title=title, namespace=namespace, progress=progress)

    def ingest_text(self, text: str, *, title: str | None = None, namespace: str | None = None) -> IngestResult:
        """Ingest plain text (UTF-8); Markdown headings give structure when ``title`` ends in .md."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequest("'text' must be a non-empty string.", code="invalid_argument")
        name = title if title and title.lower().endswith((".md", ".markdown")) else "text.md"
        return self.ingest_bytes(text.encode("utf-8"), filename=name, title=title, namespace=namespace)

    def list_documents(self, namespace: str | None = None) -> list[DocumentRecord]:
        return self.ctx.store.list_documents(self._ns(namespace))

    def get_document(self, doc_id: str, namespace: str | None = None) -> DocumentRecord:
        """Raises: NotFound (``document_not_found``)."""
        record = self.ctx.store.get_document(self._ns(namespace), doc_id)
        if record is None:
            raise document_not_found(doc_id)
        return record

    def anchor(self, doc_id: str, namespace: str | None = None) -> str:
        """The document's anchor (at most ``anchor_tokens`` budget tokens)."""
        return self.get_document(doc_id, namespace).anchor

    def delete_document(self, doc_id: str, namespace: str | None = None) -> int:
        """Delete a document everywhere. Returns chunks removed. Raises NotFound."""
        ns = self._ns(namespace)
        self.get_document(doc_id, ns)
        with self._write_lock:
            removed = self.ctx.store.delete_document(ns, doc_id)
            self.ctx.lexical.delete(ns, doc_id)
        return removed

    # ----------------------------------------------------------------- retrieval
    def retrieve(
        self, query: str, budget_tokens: int | None = None, *, doc_ids: Sequence[str] | None = None,
        namespace: str | None = None, explain: bool = False,
    ) -> RetrievalResult:
        """The most relevant sections under ``budget_tokens`` (budget tokens; default from settings).

        Raises:
            InvalidRequest: empty or over-long query, or a budget below 1.
            NotFound: a named ``doc_id`` does not exist.
        """
        query = _check_query(query)
        budget = self.settings.default_budget_tokens if budget_tokens is None else _check_budget(budget_tokens)
        ns = self._ns(namespace)
        for d in doc_ids or ():
            self.get_document(d, ns)
        return _retrieve(self.ctx, ns, query, budget, doc_ids=list(doc_ids) if doc_ids else None, explain=explain)

    def read(self, doc_id: str, *, start: str | int | None = None, budget_tokens: int | None = None,
             namespace: str | None = None) -> ReadResult:
        """A contiguous window of one document; see :func:`retrieval.read.read_document`."""
        ns = self._ns(namespace)
        record = self.get_document(doc_id, ns)
        budget = self.settings.default_budget_tokens if budget_tokens is None else _check_budget(budget_tokens)
        return read_document(self.ctx, ns, record, start=start, budget_tokens=budget)


def _check_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidRequest("'query' must be a non-empty string.", code="invalid_argument")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidRequest(f"'query' is {len(query)} characters; the limit is {MAX_QUERY_CHARS}.", code="invalid_argument")
    return query.strip()


def _check_budget(budget: object) -> int:
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget != budget:
        raise InvalidRequest("'budget_tokens' must be a number of tokens.", code="invalid_argument")
    if budget < 1:
        raise InvalidRequest(f"'budget_tokens' must be at least 1; got {budget}.", code="invalid_argument")
    return int(min(budget, 1_000_000))
