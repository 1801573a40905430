"""Bounded parsing of request bodies: a size cap (bytes) and a nesting cap (levels) for JSON, and
text that is Unicode.

Python's ``json`` module has no depth limit of its own and fails with ``RecursionError`` on very
deep input, so depth is checked here after parsing (and ``RecursionError`` is mapped too). It also
turns the escape ``"\\ud800"`` into a lone UTF-16 surrogate, a string that no UTF-8 encoder, hash
or store accepts (RFC 8259 section 8.2 leaves such strings to the parser); every JSON door of the
service parses here, so such a string is refused here, naming where it was, before anything
stores or hashes it.
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from typing import Any, Sequence
from urllib.parse import parse_qsl

import flask
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.exceptions import ClientDisconnected

from docanchor.display import plural
from docanchor.errors import InvalidRequest


def header_text(value: str) -> str:
    """A request header's value as the text its sender wrote: WSGI (PEP 3333) and ASGI servers hand
    header bytes over decoded as latin-1, and clients send UTF-8 (curl, browsers, ``docanchor``'s
    own requests), so the bytes are read again as UTF-8; bytes that are not UTF-8 become U+FFFD,
    as werkzeug reads form fields (a namespace holding one is then refused:
    :func:`docanchor.access.check_namespace`). A value that is no latin-1 (an ASGI server may
    hand over text) is kept as it came."""
    try:
        return value.encode("latin-1").decode("utf-8", "replace")
    except UnicodeError:
        return value


def query_args(query_string: bytes) -> Any:
    """A query string's parameters (werkzeug's ``MultiDict``), its percent-escapes read as UTF-8 and
    bytes that are not UTF-8 as U+FFFD, as werkzeug reads form fields. Werkzeug (2.3+) keeps such
    bytes percent-encoded instead, so ``?namespace=%ff`` named the namespace ``"%FF"``, which no
    rule could tell from one sent as ``%25FF``."""
    text = query_string.decode("utf-8", "replace")  # raw bytes a client did not percent-encode
    return ImmutableMultiDict(parse_qsl(text, keep_blank_values=True, errors="replace"))


class Request(flask.Request):
    """Flask's request whose query string is read as UTF-8 (:func:`query_args`) and whose form
    parser raises instead of answering an empty form (the app's ``request_class``). Werkzeug's parser is silent by default: a multipart body cut short (no
    closing boundary line) parses as no fields at all, which the upload route then refused as a
    body without a file although it had one. Only the upload route reads a form, through
    :func:`multipart_parts`, which says what is wrong instead."""

    @cached_property
    def args(self) -> Any:  # type: ignore[override]
        """The query string's parameters, read by :func:`query_args`."""
        return query_args(self.query_string)

    def make_form_data_parser(self):  # type: ignore[no-untyped-def]
        parser = super().make_form_data_parser()
        parser.silent = False
        return parser


def multipart_parts(req: flask.Request) -> tuple[Any, Any]:
    """A multipart/form-data request's ``(form, files)``, parsed whole.

    Raises:
        InvalidRequest: ``incomplete_body`` when the body ends before its closing boundary line
            (RFC 7578 section 4.1; a body cut short in sending, or a ``Content-Length`` larger
            than what was sent) or is no multipart body at all; ``invalid_argument`` when the
            ``Content-Type`` names no boundary, or a part's filename or field name is not UTF-8.
    """
    boundary = req.mimetype_params.get("boundary")
    if not boundary:
        raise InvalidRequest("The Content-Type multipart/form-data names no boundary, so the body cannot be split "
                             "into fields; let the HTTP client build the multipart body (curl -F file=@PATH).",
                             code="invalid_argument")
    try:
        return req.form, req.files
    except UnicodeDecodeError:  # werkzeug decodes a part's header lines as strict UTF-8
        raise InvalidRequest(
            "A part of the multipart body has a filename or field name that is not UTF-8, so it cannot be read; "
            "name the file in UTF-8 (rename it, or send it with curl -F 'file=@PATH;filename=NAME').",
            code="invalid_argument") from None
    except (ValueError, ClientDisconnected):  # werkzeug's parser (strict: Request) or the body's end
        raise InvalidRequest(
            f"The multipart body was cut short: it ends before its closing boundary line (--{boundary}--), so "
            "the document in it is incomplete. Send the whole body again (check that Content-Length is the size "
            "of what is sent).", code="incomplete_body") from None


MAX_JSON_BYTES = 1024 * 1024
"""Largest JSON body of a non-upload route, in bytes (a query, a doc id, a few numbers)."""

MAX_JSON_DEPTH = 20
"""Deepest nesting of objects/arrays accepted in any JSON body, in levels."""


def parse_json(raw: bytes | str, *, empty: Any = None, source: str | None = None) -> Any:
    """Parse a JSON body, bounded in depth.

    Args:
        raw: the body as received (UTF-8 bytes or text).
        empty: what an empty or all-whitespace body parses to; ``None`` means "refuse it".
        source: the file the JSON was read from (the CLI's FILE.json), named in the errors instead
            of "The request body".

    Returns:
        The parsed value (any JSON type).

    Raises:
        InvalidRequest: ``invalid_json`` (not UTF-8, not JSON -- the message says at which line and
            column, as :mod:`json` reports it --, an object with a key twice (:func:`unique_keys`), or
            nested deeper than :data:`MAX_JSON_DEPTH` levels) or ``empty_body``.
    """
    what, remedy = ((source, "correct the file: it must hold one JSON object") if source
                    else ("The request body", "send a JSON object"))
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidRequest(f"{what} is not UTF-8 text; {remedy}, encoded as UTF-8.",
                                 code="invalid_json") from None
    if not raw.strip():
        if empty is None:
            raise InvalidRequest(f"{what} is empty; {remedy}.", code="empty_body")
        return empty
    try:
        value = json.loads(raw, object_pairs_hook=unique_keys)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        raise InvalidRequest(f"{what} is not valid JSON ({exc}); {remedy}.", code="invalid_json") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise _too_deep()
    refuse_surrogates(value)
    return value


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, refusing a key sent twice: RFC 8259 section 4 says names
    SHOULD be unique and leaves duplicates to the parser (Python's keeps the last silently), so a
    caller who wrote a field twice would never learn which one was read. The one check of every
    JSON door: :func:`parse_json` and ``/mcp`` (:mod:`plugin.mcp_http`) parse with it as
    ``object_pairs_hook``.

    Raises:
        InvalidRequest: ``invalid_json`` naming the key (``details.field``).
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            shown = key[:60].encode("utf-8", "backslashreplace").decode()  # a lone surrogate, as its escape
            raise InvalidRequest(f"'{shown}' appears twice in one JSON object, and only one can be read; send "
                                 "each key once.", code="invalid_json", field=shown)
        out[key] = value
    return out


def refuse_surrogates(value: Any, where: str = "") -> None:
    """Refuse a lone UTF-16 surrogate (U+D800..U+DFFF) anywhere in a parsed JSON value.

    Args:
        value: a parsed JSON value (strings, numbers, lists, objects).
        where: the path of ``value`` in the body, for the message (``""`` for the whole body).

    Raises:
        InvalidRequest: ``invalid_argument`` naming the field (``details.field``, e.g.
            ``messages[0].content``); keys are checked as well as values.
    """
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise _surrogate_error(path)
        elif isinstance(item, dict):
            for key, child in item.items():
                name = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    raise _surrogate_error(path, key=True)
                stack.append((child, name))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone UTF-16 surrogate (it then cannot be encoded as UTF-8)."""
    return bool(_SURROGATE.search(text))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_error(field: str, key: bool = False) -> InvalidRequest:
    what = f"'{field[:80]}'" if field else "The body"
    if key:
        what = f"A field name in '{field[:80]}'" if field else "A field name"
    return InvalidRequest(
        f"{what} holds a lone UTF-16 surrogate (an escape such as \\ud800 without its pair), which is not "
        "Unicode text; send the text as valid UTF-8.", code="invalid_argument", field=field[:80])


def refuse_unknown_fields(body: dict[str, Any], accepted: Sequence[str], route: str) -> None:
    """Refuse a JSON object with a field outside ``accepted``, naming it and the accepted ones.

    A misspelt or wrong-name field (``start`` for ``from``) would otherwise be ignored silently
    and the request answered as if it had not been sent.

    Args:
        body: the parsed request body.
        accepted: the route's field names, in the order the message lists them.
        route: how the message names the route, e.g. ``"POST /v1/read"``.

    Raises:
        InvalidRequest: ``invalid_argument`` with ``details.unknown`` and ``details.accepted``.
    """
    unknown = [key for key in body if key not in accepted]
    if not unknown:
        return
    names = ", ".join(repr(key[:60]) for key in unknown[:10])
    raise InvalidRequest(
        f"Unknown {plural('field', len(unknown))} {names}; {route} accepts {', '.join(accepted)}.",
        code="invalid_argument", unknown=[key[:60] for key in unknown[:10]], accepted=list(accepted),
    )


def json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value: 0 for a scalar, 1 for a flat object or array."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _too_deep() -> InvalidRequest:
    return InvalidRequest(f"The JSON body is nested more than {MAX_JSON_DEPTH} levels deep; send a flat object.",
                          code="invalid_json")
