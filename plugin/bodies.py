"""Bounded parsing of request bodies: a size cap (bytes) and a nesting cap (levels) for JSON.

Python's ``json`` module has no depth limit of its own and fails with ``RecursionError`` on very
deep input, so depth is checked here after parsing (and ``RecursionError`` is mapped too).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from docanchor.errors import InvalidRequest

MAX_JSON_BYTES = 1024 * 1024
"""Largest JSON body of a non-upload route, in bytes (a query, a doc id, a few numbers)."""

MAX_JSON_DEPTH = 20
"""Deepest nesting of objects/arrays accepted in any JSON body, in levels."""


def parse_json(raw: bytes | str, *, empty: Any = None) -> Any:
    """Parse a JSON body, bounded in depth.

    Args:
        raw: the body as received (UTF-8 bytes or text).
        empty: what an empty or all-whitespace body parses to; ``None`` means "refuse it".

    Returns:
        The parsed value (any JSON type).

    Raises:
        InvalidRequest: ``invalid_json`` (not UTF-8, not JSON, or nested deeper than
            :data:`MAX_JSON_DEPTH` levels) or ``empty_body``.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidRequest("The request body is not UTF-8 text; send JSON encoded as UTF-8.",
                                 code="invalid_json") from None
    if not raw.strip():
        if empty is None:
            raise InvalidRequest("The request body is empty; send a JSON object.", code="empty_body")
        return empty
    try:
        value = json.loads(raw)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        raise InvalidRequest(f"The request body is not valid JSON ({exc}); send a JSON object.",
                             code="invalid_json") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise _too_deep()
    return value


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
        f"Unknown field{'s' if len(unknown) > 1 else ''} {names}; {route} accepts {', '.join(accepted)}.",
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
