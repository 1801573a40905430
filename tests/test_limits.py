"""Hostile upload names and sizes: names reduced to safe display names (never paths); the 413 JSON
body on the replace route too. (Body size, JSON depth and parse wall clock: test_http, test_sandbox.)"""

from __future__ import annotations

import io
import os

import pytest

from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.v1 import display_name
from tests.fakes import HashEmbedder


@pytest.mark.parametrize("raw, shown", [
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\x\\..\\evil.md", "evil.md"),
    ("/abs/path/report.pdf", "report.pdf"),
    ("..", None),
    (".bashrc", "bashrc"),
    ("a\x00b\x1b[31mc\u202e.txt", "abc.txt"),  # the whole escape sequence goes
    ("", None),
    (None, None),
    ("x" * 500 + ".md", "x" * 200),
])
def test_display_name(raw, shown):
    assert display_name(raw) == shown


def test_upload_name_is_only_a_display_name(settings: Settings, tmp_path):
    da = DocAnchor(settings, embedder=HashEmbedder())
    client = create_app(settings, da).test_client()
    body = {"file": (io.BytesIO(b"# Notes\n\nSome text about teapots."), "../../../outside.md")}
    resp = client.post("/v1/documents", data=body, content_type="multipart/form-data")
    assert resp.status_code == 201, resp.get_json()
    assert da.get_document(resp.get_json()["doc_id"]).source_name == "outside.md"
    assert set(os.listdir(tmp_path)) == {settings.data_dir.name}  # nothing written next to the data dir
    assert not (tmp_path.parent / "outside.md").exists()


def test_replace_over_the_limit_is_413_json(tmp_path):
    small = Settings(data_dir=tmp_path / "d", max_upload_bytes=2000)
    da = DocAnchor(small, embedder=HashEmbedder())
    client = create_app(small, da).test_client()
    doc_id = client.post("/v1/documents", json={"text": "# a\n\nshort", "title": "a.md"}).get_json()["doc_id"]
    big = {"file": (io.BytesIO(b"word " * 100_000), "big.txt")}
    resp = client.put(f"/v1/documents/{doc_id}", data=big, content_type="multipart/form-data")
    assert resp.status_code == 413 and resp.get_json()["error"]["code"] == "too_large"
    resp = client.put(f"/v1/documents/{doc_id}", json={"text": "word " * 1000, "title": "t.txt"})
    assert resp.status_code == 413 and resp.get_json()["error"]["code"] == "too_large"
    assert da.get_document(doc_id)  # the old version stays


def test_413_quotes_the_file_limit_the_user_can_set(tmp_path):
    """The trial's 413 said 52,494,336 bytes (the HTTP cap: file limit plus multipart allowance)
    while DOCANCHOR_MAX_UPLOAD_BYTES was 52,428,800: an over-size upload names the file limit and
    its variable; other routes name their own body limit."""
    small = Settings(data_dir=tmp_path / "d", max_upload_bytes=2000)
    client = create_app(small, DocAnchor(small, embedder=HashEmbedder())).test_client()
    for resp in (client.post("/v1/documents", data={"file": (io.BytesIO(b"word " * 100_000), "big.txt")},
                             content_type="multipart/form-data"),
                 client.post("/v1/documents", json={"text": "word " * 100_000})):
        err = resp.get_json()["error"]
        assert resp.status_code == 413 and err["code"] == "too_large"
        assert "2,000 bytes" in err["message"] and "DOCANCHOR_MAX_UPLOAD_BYTES" in err["message"], err
        assert "67,536" not in err["message"] and err["details"]["limit_bytes"] == 2000
    err = client.post("/v1/read", json={"doc_id": "x" * 2_000_000}).get_json()["error"]
    assert "1,048,576 bytes" in err["message"] and "DOCANCHOR_MAX_UPLOAD_BYTES" not in err["message"], err
