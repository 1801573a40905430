"""Bulk ingest (:mod:`ingest.stream`): outcomes in input order, one bad file never stops the
others, parsing overlaps embedding, embedding batches span documents, writes are batched, and a
failed write leaves nothing half-visible, a caller's progress callback can stop it (a cancelled
job) and a chunking under way stops with it. Real corpus files and Chroma on disk, the fake embedder."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from docanchor.errors import StoreUnavailable
from ingest.pipeline import Source
from ingest.stream import EMBED_WINDOW_BATCHES, ingest_document, ingest_stream
from tests.conftest import CASES, CORPUS, REPO
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S

SMALL = [CORPUS / "md" / "ch04-01-what-is-ownership.md", CORPUS / "txt" / "sample-french-1.txt",
         CORPUS / "csv" / "country-codes.csv", CORPUS / "html" / "example-with-scripts.html",
         CORPUS / "md" / "umlauts-non-utf8.md"]


class CountingEmbedder(HashEmbedder):
    """Records the texts of every embed() call."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def embed(self, texts):
        self.batches.append(list(texts))
        return super().embed(texts)


def _notes(n: int) -> list[Source]:
    """``n`` small Markdown documents of two chunks' worth of text each."""
    body = " ".join(f"Sentence {i} about a topic worth a few tokens." for i in range(30))
    return [Source(data=f"# Note {k}\n\n{body}\n\n## Part two of {k}\n\n{body}".encode(), filename=f"n{k}.md")
            for k in range(n)]


def test_outcomes_come_in_order_and_bad_sources_do_not_stop_the_others(ctx, tmp_path: Path):
    missing = tmp_path / "gone.pdf"
    sources = [Source(path=SMALL[0]), Source(data=b"   \n", filename="blank.txt"), Source(path=SMALL[1]),
               Source(data=b"\x7fELF\x02\x01\x01" + b"\0" * 64, filename="x.so"), Source(path=missing),
               Source(data=SMALL[0].read_bytes(), filename="copy.md"),  # same bytes as the first
               Source(path=CASES / "a05_pdf_encrypted_empty_password_aes256.pdf")]
    out = list(ingest_stream(ctx, sources, namespace="ns"))
    assert [o.index for o in out] == list(range(len(sources)))
    assert [o.source for o in out] == sources
    codes = [o.error.code if o.error else "ok" for o in out]
    assert codes == ["ok", "empty_file", "ok", "unsupported_type", "unreadable_file", "ok", "ok"]
    first, copy = out[0].result, out[5].result
    assert not first.duplicate and copy.duplicate and copy.record.doc_id == first.record.doc_id
    stored = {r.doc_id for r in ctx.store.list_documents("ns")}
    assert stored == {out[i].result.record.doc_id for i in (0, 2, 6)}
    assert ctx.store.count_chunks("ns") == sum(out[i].result.record.n_chunks for i in (0, 2, 6))


def test_the_stream_stores_what_one_at_a_time_stores(ctx, settings, tmp_path: Path):
    from docanchor.context import Context

    alone = Context(settings.with_(data_dir=tmp_path / "alone"), embedder=HashEmbedder())
    many = list(ingest_stream(ctx, [Source(path=p) for p in SMALL], namespace="ns"))
    for path, outcome in zip(SMALL, many):
        single = ingest_document(alone, path.read_bytes(), namespace="ns", filename=path.name)
        assert replace(outcome.result.record, added_at="") == replace(single.record, added_at="")  # all but the time
        assert ctx.store.get_chunks("ns", single.record.doc_id) == alone.store.get_chunks("ns", single.record.doc_id)
        assert np.allclose(ctx.store.get_chunk_embeddings("ns", single.record.doc_id),
                           alone.store.get_chunk_embeddings("ns", single.record.doc_id), atol=1e-6)


def test_embedding_batches_span_documents(settings):
    from docanchor.context import Context

    embedder = CountingEmbedder()
    ctx = Context(settings, embedder=embedder)
    out = list(ingest_stream(ctx, _notes(12), namespace="ns"))
    n_chunks = sum(o.result.record.n_chunks for o in out)
    assert n_chunks >= 24
    assert sum(len(c) for c in embedder.batches) == n_chunks  # every chunk embedded once
    assert len(embedder.batches) < len(out)  # fewer embed calls than documents
    assert max(len(c) for c in embedder.batches) <= 64 * EMBED_WINDOW_BATCHES  # one call: 4 batches of 64


def test_writes_are_batched_across_documents(ctx):
    calls = {"chunks": 0, "lexical": 0}
    store_add, lexical_add = ctx.store.add_chunks, ctx.lexical.add

    def count(kind, fn):
        def wrapped(*args, **kwargs):
            calls[kind] += 1
            return fn(*args, **kwargs)
        return wrapped

    ctx.store.add_chunks = count("chunks", store_add)
    ctx.lexical.add = count("lexical", lexical_add)
    out = list(ingest_stream(ctx, _notes(12), namespace="ns"))
    assert all(o.result and not o.result.duplicate for o in out)
    assert 1 <= calls["chunks"] < len(out) and 1 <= calls["lexical"] < len(out)
    assert len(ctx.store.list_documents("ns")) == 12


@dataclass(frozen=True)
class SignallingSource(Source):
    """A source that says when it is read (that is, when its preparation started)."""

    started: threading.Event | None = None

    def read(self, limit_bytes: int) -> bytes:
        self.started.set()
        return super().read(limit_bytes)


class WaitingEmbedder(HashEmbedder):
    """On its first call, waits until the second source is being prepared, and records whether
    that happened while it was embedding (a sequential pipeline would prepare it only after)."""

    def __init__(self, second_started: threading.Event) -> None:
        super().__init__()
        self.second_started = second_started
        self.overlapped: bool | None = None

    def embed(self, texts):
        if self.overlapped is None:
            self.overlapped = self.second_started.wait(BACKSTOP_S)
        return super().embed(texts)


def test_the_next_source_is_prepared_while_the_current_one_embeds(settings):
    from docanchor.context import Context

    second = threading.Event()
    embedder = WaitingEmbedder(second)
    ctx = Context(settings, embedder=embedder)
    sources = [Source(path=SMALL[0]), SignallingSource(path=SMALL[1], started=second)]
    out = list(ingest_stream(ctx, sources, namespace="ns"))
    assert [o.error for o in out] == [None, None]
    assert embedder.overlapped is True


@dataclass(frozen=True)
class SlowSource(Source):
    """A source whose reading waits until ``go`` is set (a scan whose OCR takes minutes)."""

    go: threading.Event | None = None

    def read(self, limit_bytes: int) -> bytes:
        self.go.wait(BACKSTOP_S)
        return super().read(limit_bytes)


class ReleasingEmbedder(CountingEmbedder):
    """Sets ``go`` at its first call (with ``marker``: its first call given a text holding it),
    after noting whether it was still unset then."""

    def __init__(self, go: threading.Event, marker: str = "") -> None:
        super().__init__()
        self.go, self.marker = go, marker
        self.before_go: bool | None = None

    def embed(self, texts):
        if self.before_go is None and any(self.marker in t for t in texts):
            self.before_go = not self.go.is_set()
            self.go.set()
        return super().embed(texts)


def test_a_slow_parse_does_not_hold_up_the_files_after_it(settings):
    """The first source's preparation waits until something is embedded: the second source is
    parsed and embedded meanwhile (on main it waited behind the first), and the outcomes still
    come in input order."""
    from docanchor.context import Context

    go = threading.Event()
    embedder = ReleasingEmbedder(go)
    ctx = Context(settings, embedder=embedder)
    out = list(ingest_stream(ctx, [SlowSource(path=SMALL[0], go=go), Source(path=SMALL[1])], namespace="ns"))
    assert [o.index for o in out] == [0, 1] and [o.error for o in out] == [None, None]
    assert embedder.before_go is True
    second = {c.embedding_text for c in out[1].result.chunks}
    assert set(embedder.batches[0]) <= second  # the first embedding was the second file's


def test_same_bytes_parsed_out_of_order_are_stored_by_the_earlier_source(settings):
    """Two sources with the same bytes, the earlier one prepared last (after the later one's
    chunks were embedded): the earlier one is the stored document (its source recorded) and the
    later one its duplicate, as in input order."""
    from docanchor.context import Context

    go = threading.Event()
    embedder = ReleasingEmbedder(go, marker="Boileau")  # a word of SMALL[1], not of SMALL[0]
    ctx = Context(settings, embedder=embedder)
    slow = SlowSource(path=SMALL[1], go=go, filename="first.txt", origin="first")
    copy = Source(data=SMALL[1].read_bytes(), filename="second.txt", origin="second")
    out = list(ingest_stream(ctx, [slow, Source(path=SMALL[0]), copy], namespace="ns"))
    assert [o.error for o in out] == [None, None, None] and embedder.before_go is True
    assert not out[0].result.duplicate and out[2].result.duplicate
    assert out[0].result.record.sources == ["first"] and out[0].result.record.source_name == "first.txt"
    assert ctx.store.get_document("ns", out[0].result.record.doc_id).source_name == "first.txt"


def test_progress_reports_each_source_on_the_iterating_thread(ctx):
    events: list[tuple[int, str, int, int]] = []
    threads: set[int] = set()

    def progress(index: int, stage: str, done: int, total: int) -> None:
        events.append((index, stage, done, total))
        threads.add(threading.get_ident())

    out = list(ingest_stream(ctx, [Source(path=p) for p in SMALL[:3]], namespace="ns", progress=progress))
    assert threads == {threading.get_ident()}
    for o in out:
        mine = [e for e in events if e[0] == o.index]
        assert [e[1] for e in mine][0] == "parsing" and mine[-1][1:] == ("anchoring", 1, 1)
        n = o.result.record.n_chunks
        assert ("embedding", n, n) in [e[1:] for e in mine]


def test_ocr_page_progress_reaches_the_iterating_thread(ctx):
    scan = REPO / "tests" / "fixtures" / "formats" / "scan_en.png"
    events: list[tuple[int, str, int, int]] = []
    threads: set[int] = set()

    def progress(index: int, stage: str, done: int, total: int) -> None:
        events.append((index, stage, done, total))
        threads.add(threading.get_ident())

    out = list(ingest_stream(ctx, [Source(path=scan), *_notes(1)], namespace="ns", progress=progress))
    assert [o.error for o in out] == [None, None]
    assert threads == {threading.get_ident()}
    stages = [e[1:] for e in events if e[0] == 0]
    first_chunking = [e[0] for e in stages].index("chunking")
    assert stages[:first_chunking] == [("parsing", 0, 1), ("ocr", 0, 1), ("ocr", 1, 1)]


def test_a_failed_write_leaves_no_document_visible_and_the_stream_goes_on(ctx):
    real_add = ctx.lexical.add
    failures = []

    def failing_once(namespace, chunks):
        if not failures:
            failures.append(len(chunks))
            raise StoreUnavailable("The lexical index could not be written; check the data dir.")
        return real_add(namespace, chunks)

    ctx.lexical.add = failing_once
    first = list(ingest_stream(ctx, _notes(3), namespace="ns"))
    failed = [o for o in first if o.error]
    assert failed and {o.error.code for o in failed} == {"store_unavailable"}
    listed = {r.doc_id for r in ctx.store.list_documents("ns")}
    assert listed == {o.result.record.doc_id for o in first if o.result}  # the failed ones are not half-visible
    stored = sum(o.result.record.n_chunks for o in first if o.result)
    assert ctx.store.count_chunks("ns") == stored  # nor do their chunks wait in Chroma for a retry
    assert set(ctx.lexical.doc_counts("ns")) <= listed
    again = list(ingest_stream(ctx, _notes(3), namespace="ns"))
    assert [o.result.duplicate for o in again] == [o.error is None for o in first]
    assert ctx.store.count_chunks("ns") == sum(o.result.record.n_chunks for o in again)  # no leftovers


def test_a_path_over_the_upload_limit_is_refused_before_it_is_read(ctx, settings):
    from docanchor.context import Context

    small = Context(settings.with_(max_upload_bytes=1000), embedder=HashEmbedder())
    [out] = ingest_stream(small, [Source(path=CORPUS / "txt" / "norwich-city.txt")], namespace="ns")
    assert out.error.code == "too_large" and out.error.details["limit_bytes"] == 1000


def test_the_python_api_ingests_many_paths_and_sources(da):
    sources = [SMALL[0], str(SMALL[1]), Source(data=b"# Hi\n\nA tiny note about teapots.", filename="hi.md",
                                               title="Teapots")]
    out = list(da.ingest_many(sources, namespace="bulk"))
    assert [o.error for o in out] == [None, None, None]
    assert out[2].result.record.title == "Teapots" and out[1].result.record.source_name == SMALL[1].name
    assert {r.doc_id for r in da.list_documents("bulk")} == {o.result.record.doc_id for o in out}
    # Found by its words, not necessarily first. Asked with all three of them, the query is a
    # strong match by term coverage (retrieval.stages.cutoff.strong_match), so the whole budget is
    # used: with the fake embedder's similarities a dense-only chunk of the ownership chapter can
    # rank above the note (CI of stop 24: "teapots" alone was no strong match, and the weak
    # budget's one passage was such a chunk whenever Chroma's approximate HNSW search left the note
    # out of the dense top-k).
    found = da.retrieve("a tiny note about teapots", 1000, namespace="bulk")
    assert not found.no_strong_match
    assert out[2].result.record.doc_id in {s.doc_id for s in found.sections}, found.sections
    assert da.retrieve("teapots", 200, namespace="bulk", doc_ids=[out[2].result.record.doc_id]).sections


def test_bulk_ingest_records_each_documents_sources_as_one_at_a_time_does(da, tmp_path: Path):
    from docanchor.types import path_source

    copy = tmp_path / "copy-of-ownership.md"
    copy.write_bytes(SMALL[0].read_bytes())
    sources = [SMALL[0], copy, Source(data=b"# Hi\n\nA note about teapots.", filename="hi.md"),
               Source(data=b"# Mugs\n\nA note about mugs.", filename="m.md", origin="https://example.org/m.md")]
    out = list(da.ingest_many(sources))
    assert [o.error for o in out] == [None] * 4 and out[1].result.duplicate  # same bytes: one document
    own = da.get_document(out[0].result.record.doc_id)
    assert own.sources == [path_source(SMALL[0]), path_source(copy)]  # and it remembers both places
    assert out[1].result.record.sources == own.sources
    assert da.get_document(out[2].result.record.doc_id).sources == ["hi.md"]
    assert da.get_document(out[3].result.record.doc_id).sources == ["https://example.org/m.md"]


def test_the_cli_ingests_a_folder_through_the_stream(settings, tmp_path: Path):
    """``docanchor ingest FOLDER`` without a server: one stream, so embedding batches span files
    (file by file, each file was its own embed call) and each file still gets its line."""
    from click.testing import CliRunner

    from plugin.api import DocAnchor
    from plugin.cli import main

    embedder = CountingEmbedder()
    da = DocAnchor(settings, embedder=embedder)
    folder = tmp_path / "notes"
    folder.mkdir()
    for src in _notes(12):
        (folder / src.filename).write_bytes(src.data)
    (folder / "blank.md").write_bytes(b"  \n")
    try:
        result = CliRunner().invoke(main, ["ingest", str(folder)], obj=da, catch_exceptions=False)
        assert result.exit_code == 1, result.output  # the blank file fails, the others are stored
        assert "empty_file" in result.output and result.output.count("\nok ") + result.output.startswith("ok ") == 12
        docs = da.list_documents()
        assert len(docs) == 12 and all(d.sources == [str(folder / d.source_name)] for d in docs)
        assert len(embedder.batches) < 12
    finally:
        da.close()


def test_a_caller_that_stops_early_leaves_only_whole_documents(ctx):
    stream = ingest_stream(ctx, _notes(6), namespace="ns")
    first = next(stream)
    stream.close()  # e.g. the CLI interrupted
    listed = {r.doc_id for r in ctx.store.list_documents("ns")}
    assert first.result.record.doc_id in listed
    for record in ctx.store.list_documents("ns"):  # whatever was written is complete
        assert len(ctx.store.get_chunks("ns", record.doc_id)) == record.n_chunks


class Stop(Exception):
    """What a caller's progress callback raises to stop the stream (as a cancelled job does)."""


@pytest.mark.parametrize("stage", ["embedding", "storing", "anchoring"])
def test_a_progress_callback_that_raises_stops_the_stream_and_nothing_of_it_stays(ctx, stage):
    """A cancelled job's progress raises: the stream stops at that step and the caller gets the
    exception; chunks written before the record (storing, anchoring) are removed again."""

    def progress(index: int, at: str, done: int, total: int) -> None:
        if index == 1 and at == stage and (done == 0 or at == "storing"):
            raise Stop(at)

    with pytest.raises(Stop):
        list(ingest_stream(ctx, _notes(1) + _notes(2)[1:], namespace="ns", progress=progress))
    listed = {r.doc_id for r in ctx.store.list_documents("ns")}
    assert ctx.store.count_chunks("ns") == sum(r.n_chunks for r in ctx.store.list_documents("ns"))
    assert set(ctx.lexical.doc_counts("ns")) <= listed


def test_stopping_the_stream_stops_a_chunking_under_way(ctx, monkeypatch):
    """A cancel while a huge one-line text is chunked (on the parse thread, one window at a time)
    stops that chunking at its next progress report instead of letting it run to the end."""
    from ingest import stream

    ended: list[object] = []
    finished = threading.Event()
    real_prepare = stream.prepare

    def watched_prepare(*args, **kwargs):
        try:
            ended.append(real_prepare(*args, **kwargs))
        except BaseException as exc:
            ended.append(exc)
            raise
        finally:
            finished.set()

    monkeypatch.setattr(stream, "prepare", watched_prepare)
    real_queue_event = stream._Run._queue_event

    def queue_then_wait_for_the_stop(run, index: int, stage: str, done: int, total: int) -> None:
        real_queue_event(run, index, stage, done, total)
        if stage == "chunking" and done > 0:  # the chunking goes on only once the stream has stopped,
            run.stopped.wait(BACKSTOP_S)  # however late a busy machine relays this report

    monkeypatch.setattr(stream._Run, "_queue_event", queue_then_wait_for_the_stop)
    huge = "Words about nothing in particular go on and on. " * 40_000  # ~2 MB, no break but sentences

    def progress(index: int, stage: str, done: int, total: int) -> None:
        if stage == "chunking" and done > 0:
            raise Stop(stage)

    with pytest.raises(Stop):
        list(ingest_stream(ctx, [Source(data=huge.encode(), filename="huge.txt")], namespace="ns", progress=progress))
    assert finished.wait(BACKSTOP_S)
    assert [type(e).__name__ for e in ended] == ["_Stopped"]  # not a finished Prepared
    assert not ctx.store.list_documents("ns") and ctx.store.count_chunks("ns") == 0


class _Clock:
    """A stand-in for the stream's clock (``ingest.stream.monotonic``): seconds that pass only when
    the embedder says so, so a delay is measured without the wall clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _ParseAhead:
    """Counts the sources the stream has taken from its input and the preparations that finished,
    so an embedder can wait until the parse thread is idle (always ahead of the embedder)."""

    def __init__(self, sources: list[Source]) -> None:
        self.cond = threading.Condition()
        self.handed = self.finished = 0
        self.sources = sources

    def __iter__(self):
        for src in self.sources:
            with self.cond:
                self.handed += 1
            yield src

    def watched(self, prepare):
        def run(*args, **kwargs):
            try:
                return prepare(*args, **kwargs)
            finally:
                with self.cond:
                    self.finished += 1
                    self.cond.notify_all()
        return run

    def wait_idle(self) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.finished >= self.handed, timeout=BACKSTOP_S)


class _SlowEmbedder(HashEmbedder):
    """Each call waits until every source taken so far is prepared, then takes one clock second."""

    def __init__(self, clock: _Clock, ahead: _ParseAhead) -> None:
        super().__init__()
        self.clock, self.ahead, self.batch_size = clock, ahead, 2

    def embed(self, texts):
        self.ahead.wait_idle()
        self.clock.now += 1.0
        return super().embed(texts)


def test_a_document_is_stored_within_a_bounded_delay_of_its_embedding(settings, monkeypatch):
    """Small files, the parse always ahead: each file's chunks are written (and its line can be
    printed) at most ``STORE_DELAY_S`` plus one embedding call after its last chunk was embedded,
    not once 512 chunks have gathered. Time is a fake clock the embedder advances."""
    import ingest.stream as stream
    from docanchor.context import Context

    clock, ahead = _Clock(), _ParseAhead(_notes(40))
    monkeypatch.setattr(stream, "monotonic", clock, raising=False)
    monkeypatch.setattr(stream, "prepare", ahead.watched(stream.prepare))
    ctx = Context(settings, embedder=_SlowEmbedder(clock, ahead))
    embedded: dict[int, float] = {}
    stored: dict[int, float] = {}

    def progress(index: int, stage: str, done: int, total: int) -> None:
        if stage == "embedding" and done == total:
            embedded[index] = clock.now
        if stage == "anchoring" and done == total:
            stored[index] = clock.now

    out = list(ingest_stream(ctx, ahead, namespace="ns", progress=progress))
    assert all(o.result and not o.result.duplicate for o in out) and len(out) == 40
    assert clock.now >= 8  # many embedding calls: the delay could grow
    delays = [stored[i] - embedded[i] for i in range(40)]
    assert max(delays) <= getattr(stream, "STORE_DELAY_S", 0.0) + 1.0, delays


def test_a_path_over_the_source_limit_fails_that_file_alone(da, tmp_path: Path):
    """A path longer than a recorded source may be (4,096 characters) is refused with a clear
    error for that file; the files before and after it are stored."""
    deep = tmp_path.joinpath(*["d" * 200] * 21) / "note.md"
    assert len(str(deep)) > 4096
    out = list(da.ingest_many([SMALL[0], deep, SMALL[1]]))
    assert [o.index for o in out] == [0, 1, 2]
    assert out[0].error is None and out[2].error is None
    assert out[1].result is None and out[1].error.code == "invalid_argument"
    assert "path" in out[1].error.message and "4,096" in out[1].error.message
    assert len(da.list_documents()) == 2
