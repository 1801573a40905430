"""Documents whose chunks are being written and whose record is not yet: one marker file each.

The store marks a document when it starts writing its chunks and clears the mark when the
document's record is written or the document deleted (:class:`docanchor.store.ChromaStore`). A
mark still there when a process starts names an ingest that died halfway; start-up clean-up
(:func:`docanchor.integrity.clean_up`) removes what it wrote, without scanning every chunk. Marks
live in this process's data dir (``<data_dir>/pending/``), so with a Chroma server each process
cleans up only its own ingests, never another's that is still running.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


class PendingMarks:
    """Marker files under ``<data_dir>/pending``."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = Path(data_dir) / "pending"

    def _path(self, namespace: str, doc_id: str) -> Path:
        digest = hashlib.sha256(f"{namespace}\0{doc_id}".encode("utf-8")).hexdigest()[:32]
        return self.folder / f"{digest}.json"

    def mark(self, namespace: str, doc_id: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._path(namespace, doc_id).write_text(json.dumps({"namespace": namespace, "doc_id": doc_id}))

    def has(self, namespace: str, doc_id: str) -> bool:
        return self._path(namespace, doc_id).exists()

    def clear(self, namespace: str, doc_id: str) -> None:
        self._path(namespace, doc_id).unlink(missing_ok=True)

    def all(self) -> list[tuple[str, str]]:
        """``(namespace, doc_id)`` of every mark (unreadable marks are skipped and removed)."""
        out = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.exists() else []:
            try:
                data = json.loads(path.read_text())
                out.append((str(data["namespace"]), str(data["doc_id"])))
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
        return out
