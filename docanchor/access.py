"""Who may see what: API keys and the namespaces each key may use.

``DOCANCHOR_API_KEYS`` is a comma-separated list of entries ``KEY`` or ``KEY=NS1|NS2|...``:
the first namespace listed is the key's own (where its documents go by default); the others are
namespaces it may also name explicitly; ``*`` allows any. A bare ``KEY`` owns the namespace named
after a hash of the key, so two bare keys never share documents. With no keys configured,
authentication is off and a request may name any namespace (default: ``settings.namespace``).
"""

from __future__ import annotations

import hashlib
import hmac
import unicodedata
from dataclasses import dataclass

from docanchor.errors import Forbidden, InvalidRequest, Unauthorized
from docanchor.settings import Settings

MAX_NAMESPACE_CHARS = 200
REFUSED_NAMESPACE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories a namespace may not hold: control characters (Cc: newlines, ESC, C1 controls),
format characters (Cf: the bidi overrides and isolates U+202A-202E and U+2066-2069, the marks
U+200E/200F/061C, zero-width spaces and joiners), lone surrogates (Cs) and the line and paragraph
separators U+2028/2029 (Zl, Zp). A namespace is an identifier that every door echoes (anchors'
More lines, MCP answers, ``docanchor list``): an invisible character would make two names that
look the same differ, and a bidi override would reorder what is printed after it."""

REPLACEMENT_CHARACTER = "\ufffd"
"""U+FFFD, refused in a namespace too: it is what bytes that are not UTF-8 become at every door that
reads bytes (werkzeug's form fields and, through :mod:`plugin.bodies`, the query string and
headers), so a namespace holding it was sent in another encoding and names nothing its sender meant."""


@dataclass(frozen=True)
class Grant:
    """What one API key may use: its own namespace first, then others (``*`` = any)."""

    namespaces: tuple[str, ...]

    def allows(self, namespace: str) -> bool:
        return "*" in self.namespaces or namespace in self.namespaces


def grants(settings: Settings) -> dict[str, Grant]:
    """Parse ``settings.api_keys`` into ``{key: Grant}``."""
    out: dict[str, Grant] = {}
    for entry in settings.api_keys:
        key, _, spaces = entry.partition("=")
        key = key.strip()
        names = tuple(n.strip() for n in spaces.split("|") if n.strip())
        if not names:
            names = ("key-" + hashlib.sha256(key.encode()).hexdigest()[:12],)
        out[key] = Grant(names)
    return out


def resolve_namespace(settings: Settings, api_key: str | None, requested: str | None) -> str:
    """The namespace a request acts in.

    Args:
        api_key: the key the caller presented (``None`` when none).
        requested: a namespace the caller named explicitly (``None`` for the default).

    Raises:
        Unauthorized: keys are configured and ``api_key`` is missing or unknown.
        Forbidden: the key may not use ``requested``.
        InvalidRequest: ``requested`` is not a namespace name (:func:`check_namespace`).
    """
    if requested is not None:
        requested = check_namespace(requested)
    table = grants(settings)
    if not table:
        return requested or settings.namespace
    grant = _match(table, api_key)
    if grant is None:
        raise Unauthorized() if not api_key else Unauthorized("That API key is not valid; check the key you send (Authorization: Bearer <key>).",
                                                        code="invalid_api_key")
    if requested is None:
        own = grant.namespaces[0]
        return settings.namespace if own == "*" else own
    if not grant.allows(requested):
        raise Forbidden(f"This API key may not use the namespace {requested!r}.", namespace=requested)
    return requested


def check_namespace(name: object) -> str:
    """``name`` trimmed, when it is a namespace name: a string of 1 to :data:`MAX_NAMESPACE_CHARS` characters
    with none of the characters of :data:`REFUSED_NAMESPACE_CATEGORIES` and no :data:`REPLACEMENT_CHARACTER`.
    The one rule every door applies;
    an empty or blank name (whitespace only) is told it is blank, not given the length rule: one
    sentence for both, since a door may not see the spaces typed (``curl -F 'namespace=  '`` sends
    the field empty).

    Raises:
        InvalidRequest: ``invalid_namespace`` for anything else, always with
            ``details == {"field": "namespace"}`` (the one shape every door answers).
    """
    if not isinstance(name, str):
        raise InvalidRequest("'namespace' must be a string.", code="invalid_namespace", field="namespace")
    name = name.strip()
    if not name:
        raise InvalidRequest("The namespace is blank (empty or only whitespace); name one, or leave the namespace out "
                             "for the default one.", code="invalid_namespace", field="namespace")
    if len(name) > MAX_NAMESPACE_CHARS:
        raise InvalidRequest(f"The namespace is {len(name):,} characters long; a namespace is at most "
                             f"{MAX_NAMESPACE_CHARS} characters: use a shorter name.",
                             code="invalid_namespace", field="namespace")
    hidden = next((ch for ch in name if unicodedata.category(ch) in REFUSED_NAMESPACE_CATEGORIES
                   or ch == REPLACEMENT_CHARACTER), None)
    if hidden is not None:  # named by its code point: echoing the character itself would do what it does
        raise InvalidRequest(
            "A namespace is a name and cannot hold control, formatting, text-direction or line-break characters, "
            f"nor U+FFFD (what bytes that are not UTF-8 become); this one holds U+{ord(hidden):04X} at position "
            f"{name.index(hidden) + 1}. Use letters, digits, spaces and punctuation only, sent as UTF-8.",
            code="invalid_namespace", field="namespace")
    return name


def _match(table: dict[str, Grant], api_key: str | None) -> Grant | None:
    if not api_key:
        return None
    for key, grant in table.items():  # constant-time compare against every key
        if hmac.compare_digest(key.encode(), api_key.encode()):
            return grant
    return None
