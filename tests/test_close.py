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
    def cycles(n: int) -> int:
        for _ in range(n):
            inst = DocAnchor(settings, embedder=HashEmbedder())
            assert [d.doc_id for d in inst.list_documents()] == [doc.doc_id]
            inst.close()
        return open_fds()

    cycles(2)  # warm-up: lazily opened process-wide files (tokenizer data, shared libraries)
    after_10 = cycles(10)
    after_30 = cycles(20)
    # a leak grows with the cycles (20 more fds for one per instance); other threads of the test
    # process (a server fixture, the parse worker, job threads of earlier tests) may open or close
    # a few meanwhile: the fresh-clone CI of 1bcd8b4 saw +4 over 10 cycles in a loaded full run
    assert after_30 - after_10 < 10
    da = DocAnchor(settings, embedder=HashEmbedder())
    da.close()
    assert da.get_document(doc.doc_id).title == "Closing"  # reconnects after close
    da.close()
