"""Low input defects a fresh-user trial found (2026-12-04), each at the door it came through: a real
waitress server on a loopback port (fake embedder, real Chroma on disk), spoken to byte for byte
with http.client so that bytes no client library would send arrive as sent."""

from __future__ import annotations

import http.client
import json
import struct
import zlib

import pytest

from docanchor.settings import Settings
from tests.live_server import serving_fake
from tests.waiting import BACKSTOP_S


@pytest.fixture
def served(tmp_path):
    with serving_fake(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S)) as (base, da):
        yield int(base.rsplit(":", 1)[1]), da


def _send(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=BACKSTOP_S)
    try:
        conn.putrequest(method, path)
        for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            conn.putheader(name, value)  # bytes values go out as they are
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _error(answer: tuple[int, bytes], status: int, code: str) -> dict:
    got, body = answer
    assert got == status, (got, body[:500])
    error = json.loads(body)["error"]
    assert error["code"] == code, error
    return error


def _multipart(parts: list[tuple[bytes, bytes]]) -> tuple[bytes, dict]:
    """A multipart body of ``(Content-Disposition parameters, value)`` parts."""
    body = b"".join(b"--B\r\nContent-Disposition: form-data; " + head + b"\r\n\r\n" + value + b"\r\n"
                    for head, value in parts) + b"--B--\r\n"
    return body, {"Content-Type": "multipart/form-data; boundary=B"}


NOTE = (b'name="file"; filename="note.txt"', b"A short note about teapots.")


# ---------------------------------------------------------------------------- 1. namespaces not UTF-8
def test_a_namespace_that_is_not_utf8_is_refused_at_every_door(served):
    """Before: a multipart namespace of the bytes FF FE answered 201 and stored the document in the
    namespace "\\ufffd\\ufffd"; ?namespace=%ff listed the namespace "%FF" (werkzeug keeps bytes that
    are not UTF-8 percent-encoded); the header's bytes were read as latin-1 ("ÿ"). Each is refused
    now with the sentence every bad namespace gets, naming U+FFFD."""
    port, da = served
    body, headers = _multipart([(b'name="namespace"', b"\xff\xfe"), NOTE])
    answers = {
        "multipart": _send(port, "POST", "/v1/documents", body, headers),
        "query": _send(port, "GET", "/v1/documents?namespace=%ff"),
        "header": _send(port, "GET", "/v1/documents", headers={"X-DocAnchor-Namespace": b"team\xff"}),
        "JSON": _send(port, "POST", "/v1/documents", json.dumps({"text": "A note.", "namespace": "\ufffd"}).encode(),
                      {"Content-Type": "application/json"}),
    }
    for door, answer in answers.items():
        error = _error(answer, 400, "invalid_namespace")
        assert error["details"] == {"field": "namespace"}, door
        assert "U+FFFD" in error["message"] and "sent as UTF-8" in error["message"], (door, error)
        assert error["message"].startswith("A namespace is a name and cannot hold control"), (door, error)
    assert da.list_documents("default") == []  # the refused upload stored nothing
    ok = _send(port, "GET", "/v1/documents?namespace=%E5%9B%A2%E9%98%9F")  # 团队: UTF-8 still reads
    assert ok[0] == 200 and json.loads(ok[1])["namespace"] == "团队"


# ---------------------------------------------------------------------------- 2. image pixel bombs
def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` pixels (greyscale) with no pixel data: what
    Pillow reads before it decodes anything."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("side", [9_000, 10_000, 20_000])
def test_an_image_over_the_pixel_limit_is_too_large_however_large(served, side):
    """Before: 20000 x 20000 (over twice Pillow's bomb limit, DecompressionBombError) answered 422
    malformed "could not be decoded (it is damaged ...)"; 10000 x 10000 (over Pillow's limit,
    DecompressionBombWarning) passed only where warnings are not errors. Every one is 413 too_large
    with the limit's sentence, as 9000 x 9000 (under Pillow's limit, over ours) always was."""
    from ingest.ocr import MAX_IMAGE_PIXELS

    port, _ = served
    body, headers = _multipart([(b'name="file"; filename="big.png"', _png_header(side, side))])
    error = _error(_send(port, "POST", "/v1/documents", body, headers), 413, "too_large")
    assert f"DocAnchor reads images up to {MAX_IMAGE_PIXELS:,} pixels. Scale it down" in error["message"], error


# ---------------------------------------------------------------------------- 3. list cursors
def _page(port: int, query: str) -> tuple[int, bytes]:
    return _send(port, "GET", f"/v1/documents?limit=1&{query}")


def test_an_edited_or_made_up_list_cursor_is_refused_at_every_door(served):
    """Before: the real next_cursor with "x" appended answered 200 with a page repeating the last
    document (the doc id not found, the page resumed where it stood), and the made-up
    "title.asc.297149.999999.zzz" answered 200 with an empty page. A cursor carries a check of its
    fields now (docanchor.library._cursor_check), and every door lists through library.page."""
    port, da = served
    for n in range(3):
        da.ingest_text(f"Note {n} on teapots.", title=f"note {n}")
    status, body = _page(port, "")
    assert status == 200
    cursor = json.loads(body)["next_cursor"]
    sort, order, mark, shown, check, last = cursor.split(".", 5)
    flipped = str((int(check[-1]) + 1) % 10)
    edited = [cursor + "x", "title.asc.297149.999999.zzz", f"{sort}.{order}.{mark}.{int(shown) + 1}.{check}.{last}",
              f"{sort}.{order}.{mark}.{shown}.{check[:-1]}{flipped}.{last}", f"{sort}.{order}.{mark}.0{shown}.{check}.{last}",
              f"{sort}.{order}.{mark}.{shown}.{last}"]
    for bad in edited:
        error = _error(_page(port, f"cursor={bad}"), 400, "invalid_cursor")
        assert error["message"].startswith("'cursor' is not one this server gave out"), (bad, error)
    second = json.loads(_page(port, f"cursor={cursor}")[1])
    assert [d["title"] for d in second["documents"]] == ["note 1"]
    lobechat = _send(port, "POST", "/lobechat/listDocuments", json.dumps({"cursor": cursor + "x"}).encode(),
                     {"Content-Type": "text/plain"})
    assert lobechat[0] == 200 and b"not one this server gave out" in lobechat[1], lobechat
    assert b"note 2" not in lobechat[1]
    from docanchor.errors import InvalidRequest

    with pytest.raises(InvalidRequest) as refused:  # the MCP resources list and the Python API
        da.page_documents(limit=1, cursor=cursor + "x")
    assert refused.value.code == "invalid_cursor"


# ---------------------------------------------------------------------------- 4. loose typing
def test_a_json_key_sent_twice_is_refused_naming_it(served):
    """Before: {"doc_id": ..., "doc_id": ...} read the last one silently, at every JSON door."""
    port, da = served
    doc_id = da.ingest_text("A note on teapots.", title="t").record.doc_id
    body = f'{{"doc_id": "doc_0000000000000000", "doc_id": "{doc_id}"}}'.encode()
    error = _error(_send(port, "POST", "/v1/read", body, {"Content-Type": "application/json"}), 400, "invalid_json")
    assert error["message"] == ("'doc_id' appears twice in one JSON object, and only one can be read; send each key "
                                "once."), error
    nested = b'{"query": "teapots", "where": {"year": 1, "year": 2}}'
    error = _error(_send(port, "POST", "/v1/retrieve", nested, {"Content-Type": "application/json"}), 400, "invalid_json")
    assert "'year' appears twice" in error["message"]
    lobechat = _send(port, "POST", "/lobechat/readDocument", body, {"Content-Type": "text/plain"})
    assert lobechat[0] == 200 and b"'doc_id' appears twice" in lobechat[1], lobechat
    once = _send(port, "POST", "/v1/read", json.dumps({"doc_id": doc_id}).encode(), {"Content-Type": "application/json"})
    assert once[0] == 200


def test_a_file_part_without_a_filename_is_told_so(served):
    """Before: 'Send the document in a multipart field named 'file'' -- to a caller who had sent one
    (without a filename werkzeug reads the part as a text field)."""
    port, da = served
    body, headers = _multipart([(b'name="file"', b"A short note about teapots.")])
    error = _error(_send(port, "POST", "/v1/documents", body, headers), 400, "missing_file")
    assert error["message"].startswith("The multipart field 'file' has no filename"), error
    assert "curl -F file=@PATH" in error["message"]
    none, headers = _multipart([(b'name="title"', b"T")])
    error = _error(_send(port, "POST", "/v1/documents", none, headers), 400, "missing_file")
    assert error["message"] == "Send the document in a multipart field named 'file'."
    assert da.list_documents("default") == []


def test_a_file_part_without_a_filename_beside_one_with_a_filename_is_not_dropped(served):
    """Before: 201, beta stored and the filename-less 'file' part ("hello alpha doc") lost without a
    word. Now the same missing_file as a lone such part gets, counting the parts, and nothing stored."""
    port, da = served
    body, headers = _multipart([(b'name="file"', b"hello alpha doc"),
                                (b'name="file"; filename="beta.txt"', b"hello beta doc")])
    error = _error(_send(port, "POST", "/v1/documents", body, headers), 400, "missing_file")
    assert error["message"].startswith("1 of the 2 multipart 'file' parts has no filename"), error
    assert "nothing was stored" in error["message"] and "curl -F file=@PATH" in error["message"]
    assert da.list_documents("default") == []


def test_a_filename_that_is_not_utf8_is_refused_as_such_not_as_a_body_cut_short(served):
    """Before: 400 incomplete_body ("cut short") for a whole body, because werkzeug decodes a part's
    headers as strict UTF-8 and its UnicodeDecodeError is a ValueError (curl -F
    "file=@x.txt;filename=caf\\xe9.txt" from a latin-1 shell). Now the refusal says what is wrong
    and nothing is stored; the same for a field name that is not UTF-8."""
    port, da = served
    for part in (b'name="file"; filename="caf\xe9.txt"', b'name="tag\xe9"'):
        body, headers = _multipart([(part, b"A short note about teapots."), NOTE])
        error = _error(_send(port, "POST", "/v1/documents", body, headers), 400, "invalid_argument")
        assert "not UTF-8" in error["message"] and "filename" in error["message"], error
    assert da.list_documents("default") == []


def test_mcp_refuses_a_json_key_sent_twice_as_a_parse_error(served):
    """Before: /mcp read the last of a repeated key silently (tools/call searched "ferry" for
    {"query": "Ohio handgun", "query": "ferry"}; an envelope with "id": 1, "id": 2 was answered as
    id 2), though /v1 and the LobeChat doors refuse it. Now the JSON-RPC parse error (-32700, as
    the SDK answers a body that is not JSON), naming the key, and the tool is never called."""
    port, _ = served
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    call = (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "searchDocuments", '
            b'"arguments": {"query": "Ohio handgun", "query": "ferry", "budget_tokens": 200}}}')
    envelope = b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}'
    for body, key in ((call, "query"), (envelope, "id")):
        status, raw = _send(port, "POST", "/mcp", body, headers)
        assert status == 400, (status, raw[:500])
        answer = json.loads(raw)
        assert answer["jsonrpc"] == "2.0" and answer["id"] is None, answer
        assert answer["error"]["code"] == -32700, answer
        assert answer["error"]["message"] == (f"Parse error: '{key}' appears twice in one JSON object, and only one "
                                              "can be read; send each key once."), answer
    once = _send(port, "POST", "/mcp", b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}', headers)
    assert once[0] == 200 and json.loads(once[1])["id"] == 3, once
