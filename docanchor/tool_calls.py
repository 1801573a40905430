"""How a model is told to call DocAnchor's tools for more of a document: the calls written into
anchors, context references and answers, in one place.

Tool names and arguments are the plugin APIs' (``manifest.json``: ``searchDocuments(query,
doc_id)``, ``readDocument(doc_id, from)``). ``namespace`` is named only where the document is not
in the caller's own namespace (a conversation's offloads): the ``/v1`` API and the MCP tools take
it under that name (see ``plugin.mcp_server.NAMESPACE_ARGUMENT``); a stored anchor read in a
named namespace gets its "More:" line rewritten so (:func:`naming_namespace`).
"""

from __future__ import annotations

import json

READ_FROM = '"<heading>"|"page:N"|"chunk:N"'
"""The ``from`` of a read call that may start anywhere, as the model reads it."""


def _namespace(namespace: str | None) -> str:
    return f", namespace={json.dumps(namespace, ensure_ascii=False)}" if namespace else ""


def search_call(doc_id: str, namespace: str | None = None) -> str:
    """``searchDocuments(query, doc_id="doc_…")``, with ``namespace="…"`` when given."""
    return f'searchDocuments(query, doc_id="{doc_id}"{_namespace(namespace)})'


def read_call(doc_id: str, start: str | None, namespace: str | None = None) -> str:
    """``readDocument(doc_id="doc_…", from=<start>)``, with ``namespace="…"`` when given; ``start`` is
    written as it is (quoted by the caller, e.g. ``'"Turns 2–5"'`` or :data:`READ_FROM`), and left
    out when ``None`` (from the beginning)."""
    start_arg = f", from={start}" if start is not None else ""
    return f'readDocument(doc_id="{doc_id}"{start_arg}{_namespace(namespace)})'


def how_to_line(doc_id: str, namespace: str | None = None) -> str:
    """The line telling the model how to get more of the document (an anchor's last line)."""
    return (f"More: {search_call(doc_id, namespace)} for cited passages; "
            f"{read_call(doc_id, READ_FROM, namespace)} to read on.")


def list_more_line(namespace: str | None = None) -> str:
    """The line under a list of documents telling the model how to look into one, naming
    ``namespace`` when given."""
    return (f"More: getDocumentAnchor(doc_id{_namespace(namespace)}) summarises one document; "
            f"searchDocuments(query, doc_id{_namespace(namespace)}) finds passages in it.")


def list_call(cursor: str, namespace: str | None = None) -> str:
    """``listDocuments(cursor="…")`` for the next page, with ``namespace="…"`` when given."""
    return f'listDocuments(cursor="{cursor}"{_namespace(namespace)})'


def short_how_to(doc_id: str, namespace: str | None = None) -> str:
    """:func:`how_to_line` without the read call, for an anchor with no room for it."""
    return f"More: {search_call(doc_id, namespace)}."


def naming_namespace(anchor: str, doc_id: str, namespace: str | None) -> str:
    """``anchor`` (a stored anchor's text, written without a namespace) with its "More:" lines
    naming ``namespace``, as a reference names it: :func:`how_to_line` where the line had a read
    call, else :func:`short_how_to`. Unchanged when ``namespace`` is ``None`` or empty (the
    reader's own namespace)."""
    if not namespace:
        return anchor

    def named(line: str) -> str:
        if not line.startswith("More:"):
            return line
        return how_to_line(doc_id, namespace) if "readDocument(" in line else short_how_to(doc_id, namespace)

    return "\n".join(named(line) for line in anchor.split("\n"))
