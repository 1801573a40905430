"""A client generated from the served /openapi.json (openapi-python-client, in a venv of its own:
scripts/test-deps/openapi.sh) drives
a real ``docanchor serve`` (tests/live_server.py: subprocess on a loopback port, real model, real
Chroma on disk, an API key) through EVERY operation the description lists, each with a valid
request: every answer parsed into the generated models, any status the description does not list
raised by the client. The operations are read from the spec (``operationId``), and every request
the client sends is matched to one by an httpx response hook: an operation added later without a
call here, or one answered only with an error, fails the test.

The generator must understand every operation: the only thing it may skip is the ``text/plain``
alternative of the LobeChat routes' bodies (LobeChat's gateway sends its JSON that way); their
``application/json`` alternative is generated.
"""

from __future__ import annotations

import importlib
import io
import json
import re
import subprocess
import sys

import pytest

from tests.live_server import REPO, running
from tests.waiting import BACKSTOP_S, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.server]

GENERATOR = REPO / ".cache" / "openapi-generator" / "bin" / "openapi-python-client"
"""scripts/test-deps/openapi.sh puts it there, outside .venv: it caps httpx and typer below the runtime's."""
PACKAGE = "docanchor_generated_client"
KEY, NS = "generated-client-key", "generated"
BOOK = b"# Teapots\n\n## Kettles\n\nA kettle boils the water before it goes into the teapot.\n\n" \
       b"## Cups\n\nCups are warmed with hot water so the tea stays hot.\n"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("generated-client") / "data"
    with running(data_dir, env={"DOCANCHOR_API_KEYS": f"{KEY}={NS}"}) as server:
        yield server


@pytest.fixture(scope="module")
def generated(live, tmp_path_factory):
    """The client package generated from the server's own /openapi.json, imported."""
    if not GENERATOR.exists():
        pytest.skip("openapi-python-client is not installed: run scripts/test-deps/openapi.sh")
    out = tmp_path_factory.mktemp("generated-client-src")
    status, raw = live.request("GET", "/openapi.json")
    assert status == 200
    spec = out / "openapi.json"
    spec.write_bytes(raw)
    run = subprocess.run(
        [str(GENERATOR), "generate", "--path", str(spec), "--output-path", str(out / PACKAGE), "--meta", "none"],
        check=False, capture_output=True, text=True, timeout=BACKSTOP_S,
        env={"PATH": f"{GENERATOR.parent}:/usr/bin:/bin"},  # its ruff formats the code
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log
    skipped = re.findall(r"WARNING parsing (\w+) (\S+) within \w+\.\s+(.+)", log)
    assert skipped, "the LobeChat routes' text/plain bodies are expected to be skipped"
    assert all(path.startswith("/lobechat/") and why == "Unsupported content type text/plain"
               for _, path, why in skipped), log
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _api(name: str):
    return importlib.import_module(f"{PACKAGE}.api.default.{name}")


def _models():
    return importlib.import_module(f"{PACKAGE}.models")


def _stored(client, answer):
    """The stored document (``Ingested``) of an upload answer: at once, or once its job is done."""
    models = _models()
    if isinstance(answer, models.Ingested):
        return answer
    assert isinstance(answer, models.Job), answer

    def ended():
        job = _api("get_job").sync(answer.job_id, client=client)
        assert isinstance(job, models.Job), job
        return job if job.status in ("done", "failed") else None

    job = wait_until(ended, f"the ingest job {answer.job_id} to end")
    assert job.status == "done", job.to_dict()
    return job.result


BIG = "\n\n".join(f"Paragraph {i} on the {i % 7}th kind of kettle, its spout, its lid and its handle." for i in range(4000))
"""A document whose ingest job runs long enough to be cancelled (thousands of chunks to embed)."""


class Calls:
    """The operations the generated client called, matched from each answer's method and path
    (the spec's path templates) and kept when the status is one the operation documents as success."""

    def __init__(self, spec: dict) -> None:
        self.operations: dict[tuple[str, re.Pattern], tuple[str, set[str]]] = {}
        for path, item in spec["paths"].items():
            pattern = re.compile("^" + "[^/]+".join(map(re.escape, re.split(r"\{[^}]+\}", path))) + "$")
            for method, op in item.items():
                ok = {status for status in op["responses"] if status.startswith("2")}
                self.operations[(method.upper(), pattern)] = (op["operationId"], ok)
        self.succeeded: set[str] = set()

    def hook(self, response) -> None:
        for (method, pattern), (operation_id, ok) in self.operations.items():
            if response.request.method == method and pattern.match(response.request.url.path):
                if str(response.status_code) in ok:
                    self.succeeded.add(operation_id)
                return
        raise AssertionError(f"{response.request.method} {response.request.url.path} is no operation of the spec")

    def ids(self) -> set[str]:
        return {operation_id for operation_id, _ in self.operations.values()}


def test_every_operation_in_the_spec_is_called_through_the_generated_client(live, generated):
    """Before: only createDocument, getJob, retrieve, readDocument, deleteDocument, getDocument (for a
    404) and listDocuments (for a 401) were called; 25 of the spec's 32 operations were never tried
    by a client. No operation needs an exception: each one's JSON (or text) alternative is generated."""
    _, raw = live.request("GET", "/openapi.json")
    calls = Calls(json.loads(raw))
    hooks = {"event_hooks": {"response": [calls.hook]}}
    client = generated.AuthenticatedClient(base_url=live.base, token=KEY, raise_on_unexpected_status=True,
                                           timeout=BACKSTOP_S, httpx_args=hooks)
    anonymous = generated.Client(base_url=live.base, raise_on_unexpected_status=True, timeout=BACKSTOP_S,
                                 httpx_args=hooks)
    _public_routes(anonymous)
    doc, notes = _documents(client)
    _search_and_read(client, doc)
    _several_files(client)
    _jobs(client)
    _context(client)
    _lobechat(anonymous, doc)
    _mcp(client, doc)
    _metrics(client)
    _deletes(client, doc, notes)
    refused = _api("list_documents").sync_detailed(client=anonymous)
    assert refused.status_code == 401 and refused.parsed.error.code == "unauthorized", json.loads(refused.content)
    assert calls.ids() - calls.succeeded == set(), "operations of /openapi.json no test call reached with success"


def _public_routes(anonymous) -> None:
    """Health, this document, the manifests, the pages and their assets: no key needed."""
    models = _models()
    health = _api("get_health").sync(client=anonymous)
    assert isinstance(health, models.Health) and health.status == "ok"
    spec = _api("get_open_api").sync(client=anonymous)
    assert isinstance(spec, models.GetOpenApiResponse200) and spec["openapi"] == "3.1.0"
    manifest = _api("get_manifest").sync(client=anonymous)
    assert isinstance(manifest, models.GetManifestResponse200) and manifest["api"], manifest.to_dict()
    upload_manifest = _api("get_upload_manifest").sync(client=anonymous)
    assert isinstance(upload_manifest, models.GetUploadManifestResponse200) and upload_manifest["ui"]
    assert "<html" in _api("get_library_page").sync(client=anonymous).lower()
    assert "<html" in _api("get_upload_page").sync(client=anonymous).lower()
    settings = json.dumps({"apiKey": KEY, "namespace": NS})  # its key comes as every LobeChat call's does
    assert "document library" in _api("call_upload_plugin").sync(client=anonymous, x_lobe_plugin_settings=settings)
    asset = _api("get_page_asset").sync_detailed("library.js", client=anonymous)
    assert asset.status_code == 200 and asset.content
    favicon = _api("get_favicon").sync_detailed(client=anonymous)
    assert favicon.status_code == 204 and not favicon.content


def _documents(client):
    """Upload (multipart and JSON), list and page, get, anchor, patch, replace: (the multipart
    document, the replaced JSON one)."""
    models, types = _models(), importlib.import_module(f"{PACKAGE}.types")
    upload = models.CreateDocumentFilesBody(file=[types.File(payload=io.BytesIO(BOOK), file_name="teapots.md")],
                                            tags="kitchen", source="kitchen/teapots.md", wait_s="0")
    answer = _api("create_document").sync_detailed(client=client, body=upload)
    assert answer.status_code in (201, 202), answer.content
    doc = _stored(client, answer.parsed)
    assert doc.title == "Teapots" and doc.tags == ["kitchen"] and doc.doc_id in doc.anchor
    notes = _stored(client, _api("create_document").sync(client=client, body=models.TextDocument.from_dict(
        {"text": "# Garden\n\nRoses want sun and water.", "title": "Garden.md", "tags": ["garden"], "wait_s": 30})))
    assert notes.tags == ["garden"]

    first = _api("list_documents").sync(client=client, limit=1)
    assert isinstance(first, models.DocumentList) and first.total == 2 and len(first.documents) == 1
    second = _api("list_documents").sync(client=client, limit=1, cursor=first.next_cursor)
    assert {first.documents[0].doc_id, second.documents[0].doc_id} == {doc.doc_id, notes.doc_id}
    tagged = _api("list_documents").sync(client=client, tag=["garden"])
    assert [d.doc_id for d in tagged.documents] == [notes.doc_id]

    record = _api("get_document").sync(doc.doc_id, client=client)
    assert isinstance(record, models.Document) and record.outline == ["Teapots", "Kettles", "Cups"], record.outline
    anchor = _api("get_anchor").sync(doc.doc_id, client=client)
    assert isinstance(anchor, models.Anchor) and anchor.anchor == doc.anchor
    patched = _api("update_document").sync(notes.doc_id, client=client, body=models.DocumentPatch.from_dict(
        {"tags": ["garden", "notes"], "metadata": {"year": 2024}}))
    assert isinstance(patched, models.Document) and patched.tags == ["garden", "notes"]
    assert patched.metadata["year"] == 2024
    replaced = _api("replace_document").sync_detailed(notes.doc_id, client=client, body=models.TextDocument.from_dict(
        {"text": "# Garden\n\nRoses want sun, water and a little shade.", "title": "Garden.md", "wait_s": 30}))
    assert replaced.status_code in (201, 202), replaced.content
    new = _stored(client, replaced.parsed)
    assert new.replaced == notes.doc_id and new.doc_id != notes.doc_id
    status = _api("get_status").sync(client=client)
    assert isinstance(status, models.Status) and status.documents == 2
    return doc, new


def _search_and_read(client, doc) -> None:
    models = _models()
    found = _api("retrieve").sync(client=client, body=models.RetrieveRequest(
        query="What boils the water?", budget_tokens=300, doc_id=doc.doc_id))
    assert isinstance(found, models.RetrievalResult), found
    assert 0 < found.context_tokens_used <= 300
    assert found.sections[0].doc_id == doc.doc_id and "kettle boils the water" in found.sections[0].text
    read = _api("read_document").sync(client=client, body=models.ReadRequest(
        doc_id=doc.doc_id, from_="Cups", budget_tokens=200))
    assert isinstance(read, models.ReadResult), read
    assert read.heading_path[-1] == "Cups" and "warmed with hot water" in read.text
    assert read.context_tokens_used <= 200


def _several_files(client) -> None:
    """Several 'file' parts in one upload: one job each (the Upload answer)."""
    models, types = _models(), importlib.import_module(f"{PACKAGE}.types")
    files = [types.File(payload=io.BytesIO(f"# Tea {i}\n\nTea number {i} steeps for {i} minutes.".encode()),
                        file_name=f"tea-{i}.md") for i in (3, 4)]
    answer = _api("create_document").sync_detailed(client=client, body=models.CreateDocumentFilesBody(
        file=files, tags="tea", wait_s="30"))
    assert answer.status_code in (200, 202) and isinstance(answer.parsed, models.Upload), answer.content
    assert answer.parsed.count == 2 and [job.filename for job in answer.parsed.jobs] == ["tea-3.md", "tea-4.md"]
    assert all(_stored(client, job).tags == ["tea"] for job in answer.parsed.jobs)


def _jobs(client) -> None:
    """A long ingest job: read, then cancelled (200 once it stopped, 202 while still stopping)."""
    models, types = _models(), importlib.import_module(f"{PACKAGE}.types")
    upload = models.CreateDocumentFilesBody(file=[types.File(payload=io.BytesIO(BIG.encode()), file_name="big.txt")],
                                            wait_s="0")
    job = _api("create_document").sync(client=client, body=upload)
    assert isinstance(job, models.Job) and job.status in ("queued", "running"), job.to_dict()
    seen = _api("get_job").sync(job.job_id, client=client)
    assert isinstance(seen, models.Job) and seen.job_id == job.job_id
    cancelled = _api("cancel_job").sync_detailed(job.job_id, client=client)
    assert cancelled.status_code in (200, 202) and isinstance(cancelled.parsed, models.Job), cancelled.content

    def stopped():
        now = _api("get_job").sync(job.job_id, client=client)
        return now if now.status != "running" else None

    assert wait_until(stopped, "the cancelled job to stop").status == "cancelled"


def _context(client) -> None:
    """Snapshot, assemble and compact one conversation (offloads go to the key's namespace)."""
    models = _models()
    messages = [{"role": "user", "content": f"Question {i}: how hot should the water be?"} if i % 2 == 0 else
                {"role": "assistant", "content": f"Answer {i}: just off the boil."} for i in range(12)]
    snapshot = _api("context_snapshot").sync(client=client, body=models.SnapshotRequest.from_dict(
        {"model": "gpt-4o", "messages": messages}))
    assert isinstance(snapshot, models.Snapshot) and snapshot.input_tokens > 0, snapshot
    assembled = _api("assemble_context").sync(client=client, body=models.ContextAssembleRequest.from_dict(
        {"model": "gpt-4o", "messages": messages, "query": "kettle", "conversation_id": NS}))
    assert isinstance(assembled, models.ContextAssembled) and assembled.messages, assembled
    compacted = _api("compact_context").sync(client=client, body=models.ContextCompactRequest.from_dict(
        {"model": "gpt-4o", "messages": messages, "keep_rounds": 1, "conversation_id": NS}))
    assert isinstance(compacted, models.ContextCompacted) and len(compacted.messages) < len(messages), compacted


def _lobechat(anonymous, doc) -> None:
    """The plugin APIs with their JSON bodies, the user's key in the plugin settings header."""
    models = _models()
    settings = json.dumps({"apiKey": KEY, "namespace": NS})

    def call(name: str, args: dict) -> str:
        body = getattr(models, f"Lobechat{name[0].upper()}{name[1:]}JsonBody").from_dict(args)
        module = "lobechat_" + re.sub(r"([A-Z])", r"_\1", name).lower()
        answer = _api(module).sync_detailed(
            client=anonymous, body=body, x_lobe_plugin_settings=settings)
        assert answer.status_code == 200 and isinstance(answer.parsed, str), answer.content
        return answer.parsed

    assert "kettle boils the water" in call("searchDocuments", {"query": "What boils the water?"})
    assert "warmed with hot water" in call("readDocument", {"doc_id": doc.doc_id, "from": "Cups"})
    assert doc.doc_id in call("getDocumentAnchor", {"doc_id": doc.doc_id})
    assert "Teapots" in call("listDocuments", {"limit": 5})
    # the live server may fetch only public addresses: a loopback URL is answered with that sentence
    assert "not loopback" in call("addDocument", {"url": "http://127.0.0.1:9/notes.md"})


def _mcp(client, doc) -> None:
    models = _models()
    answer = _api("mcp").sync(client=client, accept="application/json, text/event-stream",
                              body=models.McpBody.from_dict({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert isinstance(answer, models.McpResponse200), answer
    assert "searchDocuments" in {tool["name"] for tool in answer["result"]["tools"]}, answer.to_dict()
    called = _api("mcp").sync(client=client, accept="application/json, text/event-stream",
                              body=models.McpBody.from_dict({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                             "params": {"name": "getDocumentAnchor",
                                                                        "arguments": {"doc_id": doc.doc_id}}}))
    assert called["result"]["structuredContent"]["doc_id"] == doc.doc_id, called.to_dict()


def _metrics(client) -> None:
    text = _api("get_metrics").sync(client=client)
    assert isinstance(text, str) and 'docanchor_http_requests_total{method="POST",route="/v1/retrieve"' in text


def _deletes(client, doc, notes) -> None:
    """Forget the multipart document's only source (which deletes it) and delete the other one."""
    models = _models()
    forgotten = _api("forget_source").sync(doc.doc_id, client=client, source="kitchen/teapots.md")
    assert isinstance(forgotten, models.SourceForgotten) and forgotten.deleted, forgotten
    gone = _api("delete_document").sync(notes.doc_id, client=client)
    assert isinstance(gone, models.Deleted) and gone.deleted and gone.chunks_removed >= 1
    missing = _api("get_document").sync_detailed(notes.doc_id, client=client)
    assert missing.status_code == 404 and isinstance(missing.parsed, models.Error)
    assert missing.parsed.error.code == "document_not_found"
