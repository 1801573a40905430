"""A namespace's documents as a library: tags, metadata, filters and pages with an opaque cursor.

Tags and metadata live in each document's record (:class:`docanchor.types.DocumentRecord`), so
changing them rewrites one record and never re-embeds a chunk. Filters are resolved against the
records to the ``doc_id``s they match; retrieval then searches only those documents, inside the
dense and the BM25 search (never by dropping results after a top-k was cut).

Rules (each checked by :func:`check_tags` / :func:`check_metadata`; README.md documents them):

- a tag is 1 to :data:`MAX_TAG_CHARS` printable characters, no commas (a form field may list
  several tags separated by commas), spaces collapsed,
  compared case-insensitively and stored lower-cased; at most :data:`MAX_TAGS` per document.
- metadata is a flat JSON object: at most :data:`MAX_METADATA_KEYS` keys of 1 to
  :data:`MAX_METADATA_KEY_CHARS` characters, values strings (at most
  :data:`MAX_METADATA_VALUE_CHARS` characters), finite numbers or booleans; at most
  :data:`MAX_METADATA_BYTES` bytes as JSON.
- ``where`` conditions use Chroma's ``where`` vocabulary on metadata keys: ``{"key": value}``
  (equal) or ``{"key": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}}`` or
  ``{"key": {"$in"|"$nin": [values]}}``; several keys must all hold.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from docanchor import formats
from docanchor.display import as_sent
from docanchor.errors import InvalidRequest
from docanchor.types import DocumentRecord

MAX_TAGS = 20
"""Most tags on one document."""
MAX_TAG_CHARS = 40
"""Longest tag, in characters."""
MAX_METADATA_KEYS = 32
"""Most keys of one document's metadata."""
MAX_METADATA_KEY_CHARS = 64
"""Longest metadata key, in characters."""
MAX_METADATA_VALUE_CHARS = 500
"""Longest metadata string value, in characters."""
MAX_METADATA_BYTES = 4096
"""Largest metadata object, in bytes of compact UTF-8 JSON."""
MAX_PAGE_SIZE = 200
"""Most documents one page of a list may hold."""
DEFAULT_PAGE_SIZE = 50
"""Documents per page when the caller gives no ``limit``."""
SORT_KEYS = ("title", "added", "doc_type", "n_pages", "n_tokens")
"""What a list may be sorted by (``added`` is when the document was stored)."""
WHERE_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
"""The operators of a ``where`` condition (Chroma's names)."""

Scalar = str | int | float | bool


def now_iso() -> str:
    """The current UTC time as ISO 8601 with seconds (``2026-05-01T12:00:00Z``): a record's ``added_at``."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------- tags and metadata
def check_tags(tags: object, field: str = "tags") -> list[str]:
    """``tags`` (a list, or a tuple from Python) as a clean list: lower-cased, trimmed, each once,
    in the order given.

    Raises:
        InvalidRequest: ``invalid_argument`` naming ``field``: not a list of strings, an empty or
            over-long tag, one with control characters, or more than :data:`MAX_TAGS`.
    """
    if isinstance(tags, tuple):
        tags = list(tags)
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidRequest(f"'{field}' must be a list of short strings such as [\"finance\", \"2026\"].",
                             code="invalid_argument", field=field)
    out: list[str] = []
    for raw in tags:
        tag = " ".join(raw.split()).lower()
        if not tag or len(tag) > MAX_TAG_CHARS or not tag.isprintable() or "," in tag:
            raise InvalidRequest(f"Each tag of '{field}' must be 1 to {MAX_TAG_CHARS} printable characters without "
                                 f"commas; got {raw[:60]!r}.", code="invalid_argument", field=field)
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidRequest(f"'{field}' has {len(out)} tags; a document takes at most {MAX_TAGS}.",
                             code="invalid_argument", field=field)
    return out


def check_metadata(metadata: object, field: str = "metadata") -> dict[str, Scalar]:
    """``metadata`` checked against the rules of this module's docstring.

    Raises:
        InvalidRequest: ``invalid_argument`` naming ``field`` and what is wrong.
    """
    if not isinstance(metadata, dict):
        raise InvalidRequest(f"'{field}' must be a flat JSON object of strings, numbers and booleans.",
                             code="invalid_argument", field=field)
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidRequest(f"'{field}' has {len(metadata)} keys; the limit is {MAX_METADATA_KEYS}.",
                             code="invalid_argument", field=field)
    for key, value in metadata.items():
        _check_key(key, field)
        if not _is_scalar(value):
            raise InvalidRequest(f"'{field}.{key[:40]}' must be a string, a number or a boolean (metadata is flat); "
                                 f"got {type(value).__name__ if value is not None else 'null'}.",
                                 code="invalid_argument", field=field)
        if isinstance(value, str) and len(value) > MAX_METADATA_VALUE_CHARS:
            raise InvalidRequest(f"'{field}.{key[:40]}' is {len(value)} characters; the limit is "
                                 f"{MAX_METADATA_VALUE_CHARS}.", code="invalid_argument", field=field)
    size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidRequest(f"'{field}' is {size:,} bytes as JSON; the limit is {MAX_METADATA_BYTES:,}.",
                             code="invalid_argument", field=field)
    return dict(metadata)


def merge_metadata(current: dict[str, Scalar], patch: object) -> dict[str, Scalar]:
    """``current`` changed by a JSON merge patch (RFC 7386): a key set to ``null`` is removed,
    any other value set; the result is checked by :func:`check_metadata`.

    Raises:
        InvalidRequest: the patch is not an object, or the result breaks a rule.
    """
    if not isinstance(patch, dict):
        raise InvalidRequest("'metadata' must be a JSON object; a key set to null is removed.",
                             code="invalid_argument", field="metadata")
    merged = dict(current)
    for key, value in patch.items():
        _check_key(key, "metadata")
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return check_metadata(merged)


def _check_key(key: object, field: str) -> None:
    if not isinstance(key, str) or not 1 <= len(key.strip()) <= MAX_METADATA_KEY_CHARS or key.startswith("$"):
        raise InvalidRequest(f"Each '{field}' key must be 1 to {MAX_METADATA_KEY_CHARS} characters, not starting "
                             f"with '$'; got {str(key)[:60]!r}.", code="invalid_argument", field=field)


def _is_scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool))


# ---------------------------------------------------------------------------- filters
def check_doc_type(value: object, field: str = "type") -> str:
    """``value`` if it is a format's name (:func:`docanchor.formats.names`, the registry), the
    ``doc_type`` a filter compares with.

    Raises:
        InvalidRequest: ``invalid_argument`` naming ``field`` and every valid type: a filter on a
            type no format has (``text``, ``PDF``) would match nothing and look like an empty library.
    """
    if isinstance(value, str) and formats.get(value) is not None:
        return value
    valid = ", ".join(json.dumps(name) for name in formats.names())
    scalar = value is None or isinstance(value, (str, int, float, bool))
    shown = json.dumps(value)[:40] if scalar else type(value).__name__
    raise InvalidRequest(f"'{field}' must be one of {valid}; got {shown}.", code="invalid_argument", field=field)


@dataclass(frozen=True)
class Filter:
    """Which documents a list or a search covers; every part that is set must hold.

    Attributes:
        tags: the document has any of these tags (already clean, see :func:`check_tags`).
        where: conditions on metadata (see :func:`check_where`).
        doc_types: the document's type is any of these (``pdf``, ``md``...; checked with
            :func:`check_doc_type`).
        title: a substring of the title, compared case-insensitively.
    """

    tags: tuple[str, ...] = ()
    where: tuple[tuple[str, str, Any], ...] = ()
    doc_types: tuple[str, ...] = ()
    title: str | None = None

    def __bool__(self) -> bool:
        return bool(self.tags or self.where or self.doc_types or self.title)

    def matches(self, record: DocumentRecord) -> bool:
        if self.tags and not set(self.tags) & set(record.tags):
            return False
        if self.doc_types and record.doc_type not in self.doc_types:
            return False
        if self.title and self.title.casefold() not in record.title.casefold():
            return False
        return all(_holds(record.metadata, key, op, value) for key, op, value in self.where)

    def describe(self) -> str:
        """The filter in words, for messages (``tags finance or legal, metadata year >= 2020``)."""
        parts = []
        if self.tags:
            parts.append("tags " + " or ".join(self.tags))
        if self.where:
            parts.append("metadata " + " and ".join(f"{k} {op.lstrip('$')} {json.dumps(v)}" for k, op, v in self.where))
        if self.doc_types:
            parts.append("type " + " or ".join(self.doc_types))
        if self.title:
            parts.append(f"title containing {self.title!r}")
        return ", ".join(parts) or "no filter"


def check_where(where: object) -> tuple[tuple[str, str, Any], ...]:
    """``where`` as ``(key, operator, value)`` triples, in the order given.

    Raises:
        InvalidRequest: ``invalid_argument`` (``details.field`` = ``where``) with what was expected.
    """
    if where is None:
        return ()
    if not isinstance(where, dict):
        raise InvalidRequest(_WHERE_HELP, code="invalid_argument", field="where")
    out = []
    for key, cond in where.items():
        _check_key(key, "where")
        if not isinstance(cond, dict):
            cond = {"$eq": cond}
        if len(cond) != 1:
            raise InvalidRequest(f"'where.{key[:40]}' must hold one operator; {_WHERE_HELP}", code="invalid_argument",
                                 field="where")
        [(op, value)] = cond.items()
        if op not in WHERE_OPERATORS:
            raise InvalidRequest(f"'where.{key[:40]}' uses {str(op)[:20]!r}; the operators are "
                                 f"{', '.join(WHERE_OPERATORS)}.", code="invalid_argument", field="where")
        listed = op in ("$in", "$nin")
        values = value if listed and isinstance(value, list) else [value]
        if (listed and not isinstance(value, list)) or not values or not all(_is_scalar(v) for v in values):
            want = "a non-empty list of strings, numbers or booleans" if listed else "a string, number or boolean"
            raise InvalidRequest(f"'where.{key[:40]}' {op} takes {want}.", code="invalid_argument", field="where")
        out.append((key, op, value))
    return tuple(out)


_WHERE_HELP = ("'where' must be an object of metadata conditions, e.g. {\"year\": {\"$gte\": 2020}, \"team\": \"legal\"} "
               f"(operators {', '.join(WHERE_OPERATORS)}; a plain value means $eq).")


def _holds(metadata: dict[str, Any], key: str, op: str, want: Any) -> bool:
    """Chroma's semantics: a document without ``key`` matches only ``$ne`` and ``$nin``; an order
    comparison holds only between two numbers or two strings."""
    if key not in metadata:
        return op in ("$ne", "$nin")
    have = metadata[key]
    if op in ("$in", "$nin"):
        return any(_same(have, w) for w in want) == (op == "$in")
    if op in ("$eq", "$ne"):
        return _same(have, want) == (op == "$eq")
    if not _comparable(have, want):
        return False
    return {"$gt": have > want, "$gte": have >= want, "$lt": have < want, "$lte": have <= want}[op]


def _same(a: Any, b: Any) -> bool:
    """Equal values; a boolean equals only a boolean (``True`` is not ``1`` here, as in Chroma)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _comparable(a: Any, b: Any) -> bool:
    number = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return (isinstance(a, number) and isinstance(b, number)) or (isinstance(a, str) and isinstance(b, str))


def matching(records: Iterable[DocumentRecord], flt: Filter) -> list[DocumentRecord]:
    """The records ``flt`` matches, in the order given."""
    return [r for r in records if flt.matches(r)]


# ---------------------------------------------------------------------------- pages
@dataclass
class Page:
    """One page of a list.

    Attributes:
        documents: the page's records, in the list's order.
        total: how many documents match the filter (all pages).
        next_cursor: the cursor of the next page; ``None`` on the last one.
        remaining: how many matching documents come after this page (0 on the last one).
    """

    documents: list[DocumentRecord]
    total: int
    next_cursor: str | None
    remaining: int = 0


def _sort_value(record: DocumentRecord, sort: str) -> tuple:
    value = {"title": record.title.casefold(), "added": record.added_at or "", "doc_type": record.doc_type,
             "n_pages": record.n_pages or 0, "n_tokens": record.n_tokens}[sort]
    return (value, record.doc_id)


def page(records: Sequence[DocumentRecord], flt: Filter, *, namespace: str, limit: int = DEFAULT_PAGE_SIZE,
         cursor: str | None = None, sort: str = "title", order: str = "asc") -> Page:
    """One page of the records ``flt`` matches, sorted by ``sort`` then ``doc_id``; ``records`` are
    the documents of ``namespace`` (resolved: the name the store uses).

    The cursor names the last document of the previous page (its ``doc_id``) and how many came
    up to it: the next page starts after that document wherever it now sits, so a document added
    or deleted between two requests neither repeats nor skips another; when that document itself
    was deleted, the next page starts where it stood. It is short (``title.asc.640213.25.083114.doc_…``: a
    few tokens, whatever the titles and the namespace's name, for answers under a token budget),
    opaque to callers, and carries the sort it was made for and a mark of its namespace
    (:func:`_namespace_mark`), so a cursor listed in one namespace is refused in another instead of
    starting there at the same offset; a check over its fields (:func:`_cursor_check`) refuses one
    edited or made up.

    Raises:
        InvalidRequest: ``invalid_argument`` for a ``limit`` outside 1..:data:`MAX_PAGE_SIZE`
            (:func:`check_limit`), an unknown ``sort`` or ``order``; ``invalid_cursor`` for a cursor
            this function did not make, or made for another namespace or another sort.
    """
    check_limit(limit, MAX_PAGE_SIZE)
    if sort not in SORT_KEYS:
        raise InvalidRequest(f"'sort' must be one of {', '.join(SORT_KEYS)}; got {str(sort)[:30]!r}.",
                             code="invalid_argument", field="sort")
    if order not in ("asc", "desc"):
        raise InvalidRequest(f"'order' must be asc or desc; got {str(order)[:30]!r}.", code="invalid_argument",
                             field="order")
    chosen = sorted(matching(records, flt), key=lambda r: _sort_value(r, sort), reverse=order == "desc")
    start = _resume_at(chosen, _read_cursor(cursor, namespace, sort, order)) if cursor else 0
    shown = chosen[start:start + limit]
    more = start + limit < len(chosen)
    next_cursor = _make_cursor(shown[-1].doc_id, start + len(shown), namespace, sort, order) if more else None
    return Page(shown, len(chosen), next_cursor, len(chosen) - start - len(shown))


def sent_number(value: object) -> float | None:
    """``value`` as a number when a caller sent one: an int or float (not a boolean, NaN or
    infinity), or text of one (a model may send ``"10"``); else ``None``. The one reading of a
    number sent to a tool (``limit``, ``budget_tokens``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)) and value == value and abs(value) != float("inf"):
        return float(value)
    return None


def check_limit(limit: object, most: int) -> int:
    """``limit`` (documents per page) when it is a whole number from 1 to ``most``, the one rule of
    every door that lists documents: a number or text of one (:func:`sent_number`) with a whole
    value; never a boolean.

    Raises:
        InvalidRequest: ``invalid_argument`` (``field="limit"``) for anything else, showing the value
            as it was sent (:func:`docanchor.display.as_sent`): refused, never clamped.
    """
    value = sent_number(limit)
    if value is None or not value.is_integer() or not 1 <= value <= most:
        raise InvalidRequest(f"'limit' must be a whole number from 1 to {most}; got {as_sent(limit, 20)}.",
                             code="invalid_argument", field="limit")
    return int(value)


NAMESPACE_MARK_DIGITS = 6
"""Decimal digits of a namespace's mark in a list cursor (:func:`_namespace_mark`): two namespaces
share a mark about once in a million pairs (a cursor then starts at its offset there, as every
cursor did before the mark). Digits, because cl100k_base splits a run of digits into tokens of
three: the mark costs a cursor the same few tokens whatever the namespace."""


def _namespace_mark(namespace: str) -> str:
    """``namespace`` (UTF-8) as :data:`NAMESPACE_MARK_DIGITS` decimal digits of its SHA-256."""
    digest = hashlib.sha256(namespace.encode("utf-8", "surrogatepass")).digest()
    return str(int.from_bytes(digest[:8], "big") % 10 ** NAMESPACE_MARK_DIGITS).zfill(NAMESPACE_MARK_DIGITS)


CURSOR_CHECK_DIGITS = 6
"""Decimal digits of a list cursor's check (:func:`_cursor_check`): an edited or made-up cursor
passes it about once in a million tries."""


def _cursor_check(fields: str) -> str:
    """The check of a list cursor's other fields (``fields``: them as the cursor writes them): the
    first :data:`CURSOR_CHECK_DIGITS` decimal digits of their SHA-256. It catches a cursor edited or
    made up by hand; it is no secret (anyone with this code can compute it), and needs none: a cursor
    only says where a list resumes and grants nothing the caller's key does not."""
    digest = hashlib.sha256(f"docanchor list cursor:{fields}".encode("utf-8", "surrogatepass")).digest()
    return str(int.from_bytes(digest[:8], "big") % 10 ** CURSOR_CHECK_DIGITS).zfill(CURSOR_CHECK_DIGITS)


def _make_cursor(last_id: str, shown: int, namespace: str, sort: str, order: str) -> str:
    """``SORT.ORDER.MARK.SHOWN.CHECK.DOC_ID`` (``title.asc.640213.25.083114.doc_…``): MARK is the
    namespace's (:func:`_namespace_mark`), CHECK the check of the other five (:func:`_cursor_check`)."""
    fields = f"{sort}.{order}.{_namespace_mark(namespace)}.{shown}"
    return f"{fields}.{_cursor_check(f'{fields}.{last_id}')}.{last_id}"


def _digits(text: str, n: int | None = None) -> bool:
    """``text`` is ASCII digits (``n`` of them when given; else with no leading zero)."""
    if not (text.isascii() and text.isdecimal()):
        return False
    return len(text) == n if n is not None else text == str(int(text))


def _read_cursor(cursor: str, namespace: str, sort: str, order: str) -> tuple[int, str]:
    """``(documents before the next page, doc_id of the last one)`` from a cursor of
    :func:`_make_cursor`, checked field by field and by its check, so a cursor edited by even one
    character is refused rather than read as another position.

    Raises:
        InvalidRequest: ``invalid_cursor``: not such a cursor (its format or its check fails), or made
            for another namespace, sort or order.
    """
    parts = cursor.split(".", 5)
    if (len(cursor) > 200 or len(parts) != 6 or parts[0] not in SORT_KEYS or parts[1] not in ("asc", "desc")
            or not _digits(parts[2], NAMESPACE_MARK_DIGITS) or not _digits(parts[3])
            or not _digits(parts[4], CURSOR_CHECK_DIGITS) or not parts[5] or not parts[5].isprintable()
            or any(ch.isspace() for ch in parts[5])  # doc ids hold neither control characters nor spaces
            or parts[4] != _cursor_check(".".join(parts[:4] + parts[5:]))):
        raise InvalidRequest("'cursor' is not one this server gave out; send the cursor the previous page gave, "
                             "exactly, or start again without it.", code="invalid_cursor", field="cursor")
    if parts[2] != _namespace_mark(namespace):
        raise InvalidRequest(f"'cursor' was made for another namespace than {namespace[:60]!r}; send it with the "
                             "namespace whose list gave it, or start again without a cursor.", code="invalid_cursor",
                             field="cursor")
    if (parts[0], parts[1]) != (sort, order):
        raise InvalidRequest(f"'cursor' was made for sort={parts[0][:20]} order={parts[1][:20]}; send the same sort "
                             "and order with it, or start again without a cursor.", code="invalid_cursor",
                             field="cursor")
    return int(parts[3]), parts[5]


def _resume_at(chosen: list[DocumentRecord], after: tuple[int, str]) -> int:
    """Where the page after ``after`` (:func:`_read_cursor`) starts in ``chosen``: after its last
    document, else (that document was deleted) where it stood."""
    shown, last_id = after
    at = next((i for i, r in enumerate(chosen) if r.doc_id == last_id), None)
    return at + 1 if at is not None else min(max(shown - 1, 0), len(chosen))
