"""Releasing resources: a closed DocAnchor gives back its Chroma files, and reopens on use."""

from __future__ import annotations

import os

from plugin.api import DocAnchor
from tests.fakes import HashEmbedder


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_close_releases_file_descriptors_and_reopens(settings):
    with DocAnchor(settings, embedder=HashEmbedder()) as da:
        doc = da.ingest_text("# Closing\n\nResources are released on close.").record
    baseline = open_fds()
    for _ in range(5):
        da = DocAnchor(settings, embedder=HashEmbedder())
        assert [d.doc_id for d in da.list_documents()] == [doc.doc_id]
        da.close()
    assert open_fds() <= baseline + 2
    da = DocAnchor(settings, embedder=HashEmbedder())
    da.close()
    assert da.get_document(doc.doc_id).title == "Closing"  # reconnects after close
    da.close()
