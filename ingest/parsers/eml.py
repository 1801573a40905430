"""E-mail messages (RFC 5322 ``.eml``, MIME per RFC 2045-2049), read with the standard library's
:mod:`email` package (``policy.default``: decoded headers, transfer encodings and charsets).

- Title: the ``Subject`` (else "E-mail from <sender>"); a ``header`` block with From, To, Cc
  and Date opens the text, and ``flags["email"]`` keeps them as metadata.
- Body: the ``text/plain`` alternative when there is one, paragraphs split at blank lines; else
  the ``text/html`` one through :func:`ingest.parsers.html.parse_html`.
- Attachments (and forwarded messages) are listed in a last block and in
  ``flags["attachments"]`` (name, MIME type, bytes, and the DocAnchor format when it is one
  DocAnchor reads); their content is not part of the message's text.
"""

from __future__ import annotations

import re
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import PurePath

from docanchor import formats
from docanchor.errors import DocAnchorError, DocumentError
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder

MAX_ATTACHMENTS = 200
"""Attachments listed at most (the rest are counted)."""
HEADER_FIELDS = ("from", "to", "cc", "date")
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")


def parse_eml(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse one e-mail message.

    Returns:
        A :class:`ParsedDocument` of ``doc_type="eml"``.

    Raises:
        DocumentError: ``empty_file``; ``malformed`` when the bytes are not an e-mail (no
            header fields); ``no_text`` when it has neither body text nor attachments.
    """
    if not data.strip():
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    try:
        msg = BytesParser(policy=policy.default).parsebytes(data)
        headers = {k: " ".join(str(msg.get(k, "")).split()) for k in ("subject",) + HEADER_FIELDS}
    except (ValueError, TypeError, LookupError, IndexError) as exc:
        raise DocumentError("The e-mail's header fields cannot be read; save the message again as .eml.",
                            code="malformed") from exc
    if not any(headers.values()):
        raise DocumentError("The file has no e-mail header fields (From, To, Date, Subject); upload it as text.",
                            code="malformed")
    title = headers["subject"] or (f"E-mail from {headers['from']}" if headers["from"] else "")
    b = DocumentBuilder("eml", title=(title or (PurePath(filename).stem if filename else ""))[:200])
    b.add("\n".join(f"{k.capitalize()}: {headers[k]}" for k in HEADER_FIELDS if headers[k]), "header", raw=True)
    _body(b, msg)
    listed = _attachments(msg)
    if listed:
        b.add("Attachments:\n" + "\n".join(_line(a) for a in listed), "list", raw=True)
    parsed = b.build()
    parsed.flags["email"] = {k: v for k, v in headers.items() if v}
    if listed:
        parsed.flags["attachments"] = listed
    if len(parsed.blocks) <= 1 and not listed:
        raise DocumentError("The e-mail has no body text and no attachments.", code="no_text")
    return parsed


def _body(b: DocumentBuilder, msg: EmailMessage) -> None:
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
        content = part.get_content() if part is not None else ""
    except (LookupError, ValueError, KeyError, AssertionError) as exc:
        raise DocumentError("The e-mail's body cannot be decoded (unknown charset or broken encoding).",
                            code="malformed") from exc
    if part is None or not str(content).strip():
        return
    if part.get_content_subtype() == "html":
        from ingest.parsers.html import parse_html

        try:
            html = parse_html(str(content).encode("utf-8"), None)
        except DocumentError:
            return
        for block in html.blocks:
            text = html.text[block.start:block.end]
            if block.kind == "heading":
                b.heading(text, level=block.level + 1)
            else:
                b.add(text, block.kind, raw=block.kind in ("table", "list", "code"))
        return
    for paragraph in _PARAGRAPHS.split(str(content).replace("\r\n", "\n")):
        b.add(paragraph)


def _attachments(msg: EmailMessage) -> list[dict]:
    """Attachments and forwarded messages, depth first: ``{name, type, bytes, format?}``."""
    from ingest.detect import detect_type

    out: list[dict] = []
    for part in msg.walk():
        if part is msg or part.is_multipart() and part.get_content_type() != "message/rfc822":
            continue
        if part.get_content_disposition() != "attachment" and part.get_content_type() != "message/rfc822":
            continue
        if len(out) >= MAX_ATTACHMENTS:
            break
        payload = part.get_payload(decode=True) or b""
        name = " ".join(str(part.get_filename() or "").split())[:200] or "(no name)"
        entry = {"name": name, "type": part.get_content_type(), "bytes": len(payload)}
        try:
            entry["format"] = detect_type(payload, name) if payload else ""
        except DocAnchorError:
            entry["format"] = ""
        if not entry["format"]:
            entry.pop("format")
        out.append(entry)
    return out


def _line(a: dict) -> str:
    kind = formats.label_of(a["format"]) if a.get("format") else a["type"]
    return f"- {a['name']} ({kind}, {a['bytes']:,} bytes)"
