"""The same test bodies on embedded Chroma and on a real ``chroma run`` server (``backend_settings``):
ingest real files, retrieve, read, list, delete (counting what is left in Chroma and in the BM25
index), replace, namespace isolation (Python API and HTTP with two API keys), and two instances
sharing one server."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from docanchor.errors import DocumentError, NotFound
from docanchor.settings import Settings
from docanchor.store import collection_name
from plugin.api import DocAnchor
from plugin.app import create_app
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S, wait_until

OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"
FRENCH = CORPUS / "txt" / "sample-french-1.txt"


def version_text(n: int, marker: str) -> str:
    """A small Markdown document whose every section names ``marker``."""
    parts = [f"# Release notes {n}\n"]
    for i in range(6):
        parts.append(f"## Part {i}\n\nThe {marker} component changed in part {i} of version {n}. "
                     f"Operators should read the {marker} notes before upgrading. " * 3 + "\n")
    return "\n".join(parts)


@pytest.fixture
def da(backend_settings: Settings) -> DocAnchor:
    return DocAnchor(backend_settings, embedder=HashEmbedder())


def chroma_chunk_ids(da: DocAnchor, ns: str, doc_id: str) -> list[str]:
    """Chunk ids of ``doc_id`` straight from the Chroma collection (not through the records)."""
    coll = da.ctx.store.client.get_collection(collection_name(ns, "chunks"))
    return coll.get(where={"doc_id": doc_id}, include=[])["ids"]


def bm25_rows(da: DocAnchor, ns: str, doc_id: str) -> int:
    """Chunks of ``doc_id`` in the BM25 index (see docanchor.lexical)."""
    return da.ctx.lexical.doc_counts(ns).get(doc_id, 0)


def bm25_hits(da: DocAnchor, ns: str, query: str, doc_id: str) -> int:
    return sum(1 for cid, _ in da.ctx.lexical.search(ns, query, 50) if cid.startswith(doc_id))


def test_ingest_retrieve_read_list(da: DocAnchor):
    ns = da.settings.namespace
    own = da.ingest_file(OWNERSHIP).record
    fr = da.ingest_file(FRENCH).record
    assert {d.doc_id for d in da.list_documents()} == {own.doc_id, fr.doc_id}
    for rec in (own, fr):
        assert len(chroma_chunk_ids(da, ns, rec.doc_id)) == rec.n_chunks > 0
        assert bm25_rows(da, ns, rec.doc_id) == rec.n_chunks
    res = da.retrieve("ownership rules: each value has an owner, dropped when the owner goes out of scope",
                      budget_tokens=400)
    assert res.sections and res.sections[0].doc_id == own.doc_id
    assert res.context_tokens_used <= 400
    window = da.read(fr.doc_id, budget_tokens=200)
    assert window.context and window.context_tokens_used <= 200
    assert da.get_document(own.doc_id).title == own.title
    assert da.ingest_file(OWNERSHIP).duplicate  # same bytes: nothing written
    assert len(chroma_chunk_ids(da, ns, own.doc_id)) == own.n_chunks


def test_delete_leaves_nothing_in_chroma_or_bm25(da: DocAnchor):
    ns = da.settings.namespace
    own = da.ingest_file(OWNERSHIP).record
    fr = da.ingest_file(FRENCH).record
    assert bm25_hits(da, ns, "ownership borrow scope heap", own.doc_id) > 0
    assert da.delete_document(own.doc_id) == own.n_chunks
    assert chroma_chunk_ids(da, ns, own.doc_id) == []
    assert bm25_rows(da, ns, own.doc_id) == 0
    assert bm25_hits(da, ns, "ownership borrow scope heap", own.doc_id) == 0
    with pytest.raises(NotFound):
        da.get_document(own.doc_id)
    res = da.retrieve("ownership borrow scope heap", budget_tokens=500)
    assert all(s.doc_id != own.doc_id for s in res.sections)
    # the other document is untouched
    assert len(chroma_chunk_ids(da, ns, fr.doc_id)) == fr.n_chunks == bm25_rows(da, ns, fr.doc_id)
    assert da.ctx.store.count_chunks(ns) == fr.n_chunks
    with pytest.raises(NotFound):
        da.delete_document(own.doc_id)


def test_replace_removes_every_old_chunk(da: DocAnchor):
    ns = da.settings.namespace
    old = da.ingest_text(version_text(1, "frobnicator"), title="notes.md").record
    new = da.replace(old.doc_id, version_text(2, "quuxinator").encode(), filename="notes.md").record
    assert new.doc_id != old.doc_id
    assert {d.doc_id for d in da.list_documents()} == {new.doc_id}
    assert chroma_chunk_ids(da, ns, old.doc_id) == [] and bm25_rows(da, ns, old.doc_id) == 0
    assert len(chroma_chunk_ids(da, ns, new.doc_id)) == new.n_chunks == bm25_rows(da, ns, new.doc_id)
    assert da.ctx.store.count_chunks(ns) == new.n_chunks
    assert da.retrieve("frobnicator", budget_tokens=300).sections[0].doc_id == new.doc_id  # only new remains
    assert bm25_hits(da, ns, "frobnicator", old.doc_id) == 0

    # same bytes: nothing changes; unknown id: nothing written; bad bytes: the old version stays
    same = da.replace(new.doc_id, version_text(2, "quuxinator").encode(), filename="notes.md")
    assert same.duplicate and da.get_document(new.doc_id)
    with pytest.raises(NotFound):
        da.replace("doc_0000000000000000", b"# other\n\nnew text here", filename="x.md")
    assert [d.doc_id for d in da.list_documents()] == [new.doc_id]
    with pytest.raises(DocumentError):
        da.replace(new.doc_id, b"", filename="empty.md")
    assert len(chroma_chunk_ids(da, ns, new.doc_id)) == new.n_chunks


def test_readers_never_see_a_mix_during_replace(da: DocAnchor):
    """A reader polling while versions replace each other sees whole documents, never none."""
    ns = da.settings.namespace
    current = da.ingest_text(version_text(0, "widget"), title="v.md").record.doc_id
    stop = threading.Event()
    problems: list[str] = []
    observations = [0]

    def reader() -> None:
        store = da.ctx.store
        while not stop.is_set():
            records = store.list_documents(ns)
            observations[0] += 1
            if not records:
                problems.append("no version visible")
            for r in records:
                n = len(store.get_chunks(ns, r.doc_id))
                if n != r.n_chunks and store.get_document(ns, r.doc_id) is not None:
                    problems.append(f"{r.doc_id} visible with {n} of {r.n_chunks} chunks")

    t = threading.Thread(target=reader)
    t.start()
    try:
        for v in range(1, 5):
            current = da.replace(current, version_text(v, "widget").encode(), filename="v.md").record.doc_id
    finally:
        stop.set()
        t.join()
    assert observations[0] > 3
    assert problems == []
    assert [d.doc_id for d in da.list_documents()] == [current]


@pytest.mark.parametrize("ns_a, ns_b", [("团队 甲", "team b with spaces"), ("a", "A")])
def test_namespace_isolation_python_api(da: DocAnchor, ns_a: str, ns_b: str):
    for ns in (ns_a, ns_b):
        name = collection_name(ns, "chunks")
        assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]", name), name
    a = da.ingest_file(OWNERSHIP, namespace=ns_a).record
    job = da.submit(FRENCH.read_bytes(), filename=FRENCH.name, namespace=ns_a, wait_s=BACKSTOP_S)
    assert job.status == "done"
    assert da.list_documents(ns_b) == []
    for call in (lambda: da.get_document(a.doc_id, ns_b), lambda: da.read(a.doc_id, namespace=ns_b),
                 lambda: da.anchor(a.doc_id, ns_b), lambda: da.delete_document(a.doc_id, ns_b),
                 lambda: da.retrieve("ownership", doc_ids=[a.doc_id], namespace=ns_b),
                 lambda: da.replace(a.doc_id, b"# x\n\ntext", namespace=ns_b),
                 lambda: da.get_job(job.job_id, ns_b)):
        with pytest.raises(NotFound):
            call()
    assert da.retrieve("ownership owner scope drop", namespace=ns_b).sections == []
    assert da.ctx.lexical.search(ns_b, "ownership owner scope drop", 10) == []
    # B's own document with the same bytes is B's, and deleting it leaves A's untouched
    b = da.ingest_file(OWNERSHIP, namespace=ns_b)
    assert not b.duplicate and b.record.doc_id == a.doc_id
    da.delete_document(a.doc_id, ns_b)
    assert da.get_document(a.doc_id, ns_a).n_chunks == a.n_chunks
    assert len(chroma_chunk_ids(da, ns_a, a.doc_id)) == a.n_chunks == bm25_rows(da, ns_a, a.doc_id)
    assert da.retrieve("ownership owner scope drop", namespace=ns_a).sections[0].doc_id == a.doc_id


def test_namespace_isolation_http_two_keys(backend_settings: Settings):
    ns_a, ns_b = f"团队 甲 {backend_settings.namespace}", f"team b {backend_settings.namespace}"
    settings = backend_settings.with_(api_keys=(f"key-a={ns_a}", f"key-b={ns_b}"))
    client = create_app(settings, DocAnchor(settings, embedder=HashEmbedder())).test_client()
    A = {"Authorization": "Bearer key-a"}
    B = {"Authorization": "Bearer key-b"}
    with OWNERSHIP.open("rb") as f:
        resp = client.post("/v1/documents", data={"file": (f, OWNERSHIP.name)}, headers=A,
                           content_type="multipart/form-data")
    assert resp.status_code == 201, resp.get_json()
    doc_id, job_id = resp.get_json()["doc_id"], resp.get_json()["job_id"]
    listed = client.get("/v1/documents", headers=A).get_json()
    assert listed["namespace"] == ns_a and listed["count"] == 1

    assert client.get("/v1/documents", headers=B).get_json()["count"] == 0
    for method, path, body in [
        ("get", f"/v1/documents/{doc_id}", None), ("get", f"/v1/documents/{doc_id}/anchor", None),
        ("delete", f"/v1/documents/{doc_id}", None), ("post", "/v1/read", {"doc_id": doc_id}),
        ("post", "/v1/retrieve", {"query": "ownership", "doc_id": doc_id}),
        ("put", f"/v1/documents/{doc_id}", {"text": "# New\n\nreplacement text", "title": "n.md"}),
        ("get", f"/v1/jobs/{job_id}", None),
    ]:
        resp = getattr(client, method)(path, json=body, headers=B)
        assert resp.status_code == 404, (method, path, resp.get_json())
    res = client.post("/v1/retrieve", json={"query": "ownership owner scope drop"}, headers=B).get_json()
    assert res["sections"] == []
    # B may not name A's namespace; A may not name B's
    resp = client.get("/v1/documents", headers={**B, "X-DocAnchor-Namespace": ns_a})
    assert resp.status_code == 403 and resp.get_json()["error"]["code"] == "forbidden"
    resp = client.post("/v1/retrieve", json={"query": "ownership", "namespace": ns_a}, headers=B)
    assert resp.status_code == 403
    # A's document survived every attempt, whole
    assert client.get(f"/v1/documents/{doc_id}", headers=A).status_code == 200
    res = client.post("/v1/retrieve", json={"query": "ownership owner scope drop"}, headers=A).get_json()
    assert res["sections"][0]["doc_id"] == doc_id
    assert client.get(f"/v1/jobs/{job_id}", headers=A).get_json()["status"] == "done"


def test_replace_over_http(da: DocAnchor):
    client = create_app(da.settings, da).test_client()
    ns = da.settings.namespace
    v1 = client.post("/v1/documents", json={"text": version_text(1, "gizmo"), "title": "g.md"}).get_json()
    put = client.put(f"/v1/documents/{v1['doc_id']}", json={"text": version_text(2, "gadget"), "title": "g.md"})
    assert put.status_code == 201, put.get_json()
    v2 = put.get_json()
    assert v2["replaced"] == v1["doc_id"] and v2["chunks_removed"] == v1["n_chunks"]
    assert put.headers["Location"] == f"/v1/documents/{v2['doc_id']}"
    assert client.get(f"/v1/documents/{v1['doc_id']}").status_code == 404
    assert chroma_chunk_ids(da, ns, v1["doc_id"]) == [] and bm25_rows(da, ns, v1["doc_id"]) == 0

    with FRENCH.open("rb") as f:  # multipart PUT
        put = client.put(f"/v1/documents/{v2['doc_id']}", data={"file": (f, FRENCH.name)},
                         content_type="multipart/form-data")
    assert put.status_code == 201 and put.get_json()["replaced"] == v2["doc_id"]
    v3 = put.get_json()
    # replace=<doc_id> on POST (form field and query string)
    post = client.post("/v1/documents", json={"text": version_text(4, "doohickey"), "title": "g.md",
                                              "replace": v3["doc_id"]})
    assert post.status_code == 201 and post.get_json()["replaced"] == v3["doc_id"]
    v4 = post.get_json()
    post = client.post(f"/v1/documents?replace={v4['doc_id']}", json={"text": version_text(5, "thing"), "title": "g.md"})
    assert post.status_code == 201 and post.get_json()["replaced"] == v4["doc_id"]
    listed = client.get("/v1/documents").get_json()
    assert [d["doc_id"] for d in listed["documents"]] == [post.get_json()["doc_id"]]
    assert da.ctx.store.count_chunks(ns) == post.get_json()["n_chunks"]

    missing = client.put("/v1/documents/doc_0000000000000000", json={"text": "# x\n\ny", "title": "x.md"})
    assert missing.status_code == 404 and missing.get_json()["error"]["code"] == "document_not_found"
    clash = client.put(f"/v1/documents/{v4['doc_id']}", json={"text": "# x\n\ny", "replace": "doc_other"})
    assert clash.status_code == 400
    bad = client.put(f"/v1/documents/{post.get_json()['doc_id']}", data="a,b", content_type="text/csv")
    assert bad.status_code == 415
    assert client.get("/v1/documents").get_json()["count"] == 1


def test_two_instances_share_one_chroma_server(backend_settings: Settings, tmp_path: Path):
    """Two DocAnchor instances (as two processes would) with their own data dirs on one server."""
    if not backend_settings.chroma_host:
        pytest.skip("embedded Chroma is one process per data dir (plugin.lock); sharing needs the server")
    one = DocAnchor(backend_settings, embedder=HashEmbedder())
    two = DocAnchor(backend_settings.with_(data_dir=tmp_path / "second"), embedder=HashEmbedder())
    ns = backend_settings.namespace
    query = "ownership owner scope drop heap"
    assert two.retrieve(query).sections == []  # two's BM25 index exists, empty

    own = one.ingest_file(OWNERSHIP).record
    assert [d.doc_id for d in two.list_documents()] == [own.doc_id]
    assert bm25_hits(two, ns, query, own.doc_id) > 0  # caught up with one's write
    assert two.retrieve(query).sections[0].doc_id == own.doc_id
    assert bm25_rows(two, ns, own.doc_id) == own.n_chunks

    new = two.replace(own.doc_id, FRENCH.read_bytes(), filename=FRENCH.name).record
    assert [d.doc_id for d in one.list_documents()] == [new.doc_id]
    assert bm25_hits(one, ns, query, own.doc_id) == 0  # one dropped the replaced version
    assert bm25_rows(one, ns, own.doc_id) == 0
    assert one.retrieve("Paris", doc_ids=[new.doc_id]).sections
    one.delete_document(new.doc_id)
    assert two.list_documents() == []
    assert two.ctx.lexical.search(ns, "le la les", 10) == []
    assert bm25_rows(two, ns, new.doc_id) == 0


def test_instances_on_one_server_follow_the_change_log_not_every_id(backend_settings: Settings, tmp_path: Path):
    """With a Chroma server, a search reads only the change log since its cursor: no request
    reads every document id or record while nothing changed, and another instance's add and
    delete are seen at the next search."""
    if not backend_settings.chroma_host:
        pytest.skip("one process per embedded data dir: there is no other writer to follow")
    one = DocAnchor(backend_settings, embedder=HashEmbedder())
    two = DocAnchor(backend_settings.with_(data_dir=tmp_path / "second"), embedder=HashEmbedder())
    ns = backend_settings.namespace
    fr = one.ingest_file(FRENCH).record
    assert two.retrieve("Paris").sections  # opens two's index: built from the store once
    reads: list[str] = []
    store = two.ctx.store
    for name in ("list_documents", "document_ids", "get_chunks"):
        inner = getattr(store, name)
        setattr(store, name, lambda *a, _n=name, _f=inner, **k: reads.append(_n) or _f(*a, **k))
    for _ in range(5):
        assert two.retrieve("Paris").sections
    assert reads == []
    own = one.ingest_file(OWNERSHIP).record
    assert bm25_hits(two, ns, "ownership owner scope drop heap", own.doc_id) > 0
    assert two.retrieve("ownership owner scope drop heap").sections[0].doc_id == own.doc_id
    assert reads.count("get_chunks") == 1  # only the new document's chunks were read
    one.delete_document(fr.doc_id)
    assert bm25_hits(two, ns, "Paris", fr.doc_id) == 0  # the search caught up with the delete
    assert bm25_rows(two, ns, fr.doc_id) == 0
    assert all(s.doc_id != fr.doc_id for s in two.retrieve("Paris").sections)


def test_a_retrieve_reads_the_change_log_once(backend_settings: Settings):
    """With a Chroma server, one retrieve makes one read of the change log (the document records'
    catch-up; the BM25 search does not read it again) and one dense query."""
    if not backend_settings.chroma_host:
        pytest.skip("embedded Chroma has no change log")
    da = DocAnchor(backend_settings, embedder=HashEmbedder())
    da.ingest_file(OWNERSHIP)
    da.retrieve("warm up")
    calls: list[str] = []
    store = da.ctx.store
    for name in ("changes_since", "nearest", "nearest_in_documents", "query", "get_chunks_by_id"):
        inner = getattr(store, name)
        setattr(store, name, lambda *a, _n=name, _f=inner, **k: calls.append(_n) or _f(*a, **k))
    assert da.retrieve("ownership owner scope drop heap").sections
    assert sorted(calls) == ["changes_since", "nearest"]


def test_concurrent_catch_ups_share_a_read_of_the_change_log(backend_settings: Settings, tmp_path: Path):
    """Calls of LexicalIndex.refresh that wait while another thread reads the change log share one
    read begun after they were called, and still see a write made before they were called."""
    if not backend_settings.chroma_host:
        pytest.skip("embedded Chroma has no change log")
    one = DocAnchor(backend_settings, embedder=HashEmbedder())
    two = DocAnchor(backend_settings.with_(data_dir=tmp_path / "second"), embedder=HashEmbedder())
    ns = backend_settings.namespace
    one.ingest_file(FRENCH)
    two.retrieve("Paris")  # opens two's index
    lexical, store = two.ctx.lexical, two.ctx.store
    entered, release = threading.Event(), threading.Event()
    reads: list[int] = []
    inner_read = store.changes_since

    def read(*a, **k):
        reads.append(1)
        if len(reads) == 1:
            entered.set()
            assert release.wait(BACKSTOP_S)
        return inner_read(*a, **k)

    store.changes_since = read
    waiting: list[int] = []

    class Counted:  # the index's lock, counting the threads that have to wait for it
        def __init__(self, lock) -> None:
            self.lock = lock

        def __enter__(self):
            if not self.lock.acquire(blocking=False):
                waiting.append(1)
                self.lock.acquire()

        def __exit__(self, *exc):
            self.lock.release()

    lexical._lock = Counted(lexical._lock)
    first = threading.Thread(target=lexical.refresh, args=(ns,))
    first.start()
    assert entered.wait(BACKSTOP_S)
    own = one.ingest_file(OWNERSHIP).record  # complete before the later calls begin
    later = [threading.Thread(target=lexical.refresh, args=(ns,)) for _ in range(3)]
    for t in later:
        t.start()
    wait_until(lambda: len(waiting) == 3, "the three later calls to wait for the index's lock")
    release.set()
    for t in [first, *later]:
        t.join(BACKSTOP_S)
    assert len(reads) == 2  # the first call's read, and one read for the three later calls
    assert bm25_rows(two, ns, own.doc_id) == own.n_chunks


def test_reads_of_the_lexical_index_do_not_wait_for_another_requests_catch_up(backend_settings: Settings):
    """While one request's catch-up waits for the Chroma server's answer (holding the index's
    lock), another request's reads of the index -- chunks by id, term counts, a search that has
    caught up already -- answer."""
    if not backend_settings.chroma_host:
        pytest.skip("embedded Chroma has no change log")
    da = DocAnchor(backend_settings, embedder=HashEmbedder())
    own = da.ingest_file(OWNERSHIP).record
    ns = backend_settings.namespace
    lexical, store = da.ctx.lexical, da.ctx.store
    lexical.refresh(ns)
    entered, release, done = threading.Event(), threading.Event(), threading.Event()
    inner_read = store.changes_since

    def slow_read(*a, **k):
        entered.set()
        assert release.wait(BACKSTOP_S)
        return inner_read(*a, **k)

    store.changes_since = slow_read
    catching_up = threading.Thread(target=lexical.refresh, args=(ns,))
    catching_up.start()
    assert entered.wait(BACKSTOP_S)
    got: dict = {}

    def read() -> None:
        got["chunks"] = lexical.get_chunks(ns, [f"{own.doc_id}:000000"])
        got["freqs"] = lexical.doc_freqs(ns, ["owner"])
        got["hits"] = lexical.search(ns, "ownership owner scope", 5, catch_up=False)
        done.set()

    reader = threading.Thread(target=read)
    reader.start()
    finished = done.wait(BACKSTOP_S)
    release.set()
    catching_up.join(BACKSTOP_S)
    reader.join(BACKSTOP_S)
    assert finished, "the reads waited for the catch-up"
    assert got["chunks"] and got["freqs"][0] == own.n_chunks and got["hits"]
