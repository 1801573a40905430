"""The command line's way into a data dir no server holds: the Python API in this process.

It answers as :class:`plugin.cli.remote.Server` does (the JSON shapes of the HTTP API), so each
command has one way to print. Building it loads nothing; the model loads only when a command
embeds (ingest of new bytes, search), and reading commands never create a data dir.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Any, Callable, Iterable, Iterator

from docanchor.errors import DocAnchorError
from plugin.api import DocAnchor, document_summary, ingest_answer

log = logging.getLogger("docanchor.cli")


class Local:
    """A :class:`DocAnchor` on this process's data dir, answering in the HTTP API's shapes.

    Args:
        da: the instance (built by the CLI, or injected by a test).
        namespace: the namespace to work in (``None``: the configured one).
        exists: False when the data dir holds no index yet (then lists are empty and nothing opens).
    """

    def __init__(self, da: DocAnchor, namespace: str | None, exists: bool = True) -> None:
        self.da = da
        self.namespace = namespace
        self.exists = exists

    @property
    def where(self) -> str:
        return f"the data dir {self.da.settings.data_dir}"

    def list_documents(self) -> list[dict]:
        if not self.exists:
            return []
        return [document_summary(d) for d in self.da.list_documents(self.namespace)]

    def anchor(self, doc_id: str) -> str:
        return self.da.anchor(doc_id, self.namespace)

    def retrieve(self, query: str, budget_tokens: int | None, doc_ids: list[str] | None, explain: bool) -> dict:
        return self.da.retrieve(query, budget_tokens, doc_ids=doc_ids, namespace=self.namespace,
                                explain=explain).to_dict()

    def read(self, doc_id: str, start: str | None, budget_tokens: int | None) -> dict:
        return self.da.read(doc_id, start=start, budget_tokens=budget_tokens, namespace=self.namespace).to_dict()

    def status(self) -> dict:
        return self.da.status(self.namespace)

    def delete(self, doc_id: str) -> int:
        return self.da.delete_document(doc_id, self.namespace)

    def forget_source(self, doc_id: str, source: str) -> dict:
        return self.da.forget_source(doc_id, source, self.namespace)

    def context(self, route: str, body: dict[str, Any]) -> dict:
        """``POST /v1/context/{route}`` (``assemble`` or ``compact``) on this data dir; evidence
        comes from this namespace."""
        body = dict(body)
        model, messages = body.pop("model", None), body.pop("messages", None)
        if route == "assemble":
            return self.da.assemble_context(model, messages, namespace=self.namespace, **body).to_dict()
        return self.da.compact_context(model, messages, **body).to_dict()

    def ingest(self, items: Iterable[Any], read: Callable[[Any], tuple[bytes, str, str]],
               progress: Callable[[Any, str, int, int], None],
               finished: Callable[[Any, dict | None, DocAnchorError | None], None]) -> None:
        """Ingest ``items`` through :meth:`DocAnchor.ingest_many`: the next files are read and
        parsed while the current ones embed. ``finished`` is called once per item (in order, except
        that a file that cannot be read is reported when its turn to be read comes); see
        :meth:`plugin.cli.remote.Server.ingest`."""
        from ingest.pipeline import Source

        sent: list[Any] = []  # the items given to the stream, by its index

        def sources() -> Iterator[Source]:
            for item in items:
                try:
                    data, filename, source = read(item)
                except DocAnchorError as err:
                    finished(item, None, err)
                    continue
                except Exception:  # one bad file never stops the rest; -v logs the traceback
                    log.exception("reading %s crashed", item)
                    finished(item, None, DocAnchorError())
                    continue
                sent.append(item)
                yield Source(data=data, filename=filename, origin=source)

        with _ctrl_c_between_steps() as pressed:

            def step(i: int, stage: str, done: int, total: int) -> None:
                if pressed() and stage in _STOPPABLE:
                    raise KeyboardInterrupt
                progress(sent[i], stage, done, total)

            for outcome in self.da.ingest_many(sources(), namespace=self.namespace, progress=step):
                item = sent[outcome.index]
                if outcome.result is None:
                    finished(item, None, outcome.error or DocAnchorError())
                else:
                    answer = ingest_answer(outcome.result.record, outcome.result.duplicate)
                    finished(item, self.da.named_answer(answer, self.namespace), None)
            if pressed():
                raise KeyboardInterrupt


_STOPPABLE = ("parsing", "ocr", "loading", "chunking", "embedding", "storing")
"""Stages at which a Ctrl-C stops bulk ingest: before anything of that file is written, or between
two steps of its write (``ingest.stream.WRITE_STEP_CHUNKS`` chunks each), after which the stream
removes what it wrote without a record; so every file stored has been reported (its outcome was
handed out before the next step began) and a file in progress is not stored."""


@contextlib.contextmanager
def _ctrl_c_between_steps() -> Iterator[Callable[[], bool]]:
    """While bulk ingest runs, a first Ctrl-C is held until the stream's next stoppable step
    (:data:`_STOPPABLE`) instead of landing while stored files are being reported; a second one
    interrupts at once. Yields whether Ctrl-C was pressed. Off the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    pressed = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:
        if pressed.is_set():
            raise KeyboardInterrupt
        pressed.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield pressed.is_set
    finally:
        signal.signal(signal.SIGINT, previous)
