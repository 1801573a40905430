"""docanchor.memory: what a finished ingest job freed goes back to the system (bench/serve_rss.py
measures how much; no memory figure is asserted here)."""

from __future__ import annotations

import platform

import pytest

from docanchor import memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_release_freed_finds_glibc_malloc_trim_and_runs() -> None:
    assert memory._malloc_trim() is not None
    blocks = [bytearray(256 * 1024) for _ in range(64)]  # 16 MiB in blocks below the mmap threshold
    del blocks
    assert isinstance(memory.release_freed(), bool)
