"""A client generated from the served /openapi.json (openapi-python-client, the `test` extra) drives
a real ``docanchor serve`` (tests/live_server.py: subprocess on a loopback port, real model, real
Chroma on disk, an API key): upload -> job -> retrieve -> read -> delete, every answer parsed into
the generated models, and any status the description does not list raised by the client.

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
from pathlib import Path

import pytest

from tests.live_server import running
from tests.waiting import BACKSTOP_S, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.server]

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
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
        pytest.skip("openapi-python-client is not installed: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("generated-client-src")
    status, raw = live.request("GET", "/openapi.json")
    assert status == 200
    spec = out / "openapi.json"
    spec.write_bytes(raw)
    run = subprocess.run(
        [str(GENERATOR), "generate", "--path", str(spec), "--output-path", str(out / PACKAGE), "--meta", "none"],
        capture_output=True, text=True, timeout=BACKSTOP_S,
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


def test_generated_client_uploads_retrieves_reads_and_deletes(live, generated):
    models = _models()
    types = importlib.import_module(f"{PACKAGE}.types")
    client = generated.AuthenticatedClient(base_url=live.base, token=KEY, raise_on_unexpected_status=True,
                                           timeout=BACKSTOP_S)

    upload = models.CreateDocumentFilesBody(
        file=types.File(payload=io.BytesIO(BOOK), file_name="teapots.md"), tags="kitchen", wait_s="0")
    answer = _api("create_document").sync_detailed(client=client, body=upload)
    assert answer.status_code in (201, 202), answer.content
    doc = _stored(client, answer.parsed)
    assert doc.title == "Teapots" and doc.tags == ["kitchen"] and doc.doc_id in doc.anchor

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

    gone = _api("delete_document").sync(doc.doc_id, client=client)
    assert isinstance(gone, models.Deleted) and gone.deleted and gone.chunks_removed >= 1
    missing = _api("get_document").sync_detailed(doc.doc_id, client=client)
    assert missing.status_code == 404 and isinstance(missing.parsed, models.Error)
    assert missing.parsed.error.code == "document_not_found"

    anonymous = generated.Client(base_url=live.base, raise_on_unexpected_status=True, timeout=BACKSTOP_S)
    refused = _api("list_documents").sync_detailed(client=anonymous)
    assert refused.status_code == 401 and refused.parsed.error.code == "unauthorized", json.loads(refused.content)
