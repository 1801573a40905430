"""LobeChat's own code accepts DocAnchor (issue 6, "Checked by LobeChat's own code").

A real ``docanchor serve`` (real model, real Chroma) runs on a loopback port; Node runs LobeChat's
own npm packages against it (installed by ``scripts/test-deps/node.sh``):

- ``tests/node/manifest_check.mjs`` fetches ``/manifest.json`` and ``/ui/manifest.json`` cross-origin like LobeChat's
  browser (preflight included) and validates it with the SDK's ``pluginManifestSchema`` (zod);
- ``tests/node/gateway_calls.mjs`` makes every plugin call the way LobeChat does: the browser's
  request (payload + manifest, ``X-Lobe-Plugin-Settings`` from ``createHeadersWithPluginSettings``)
  handed to the gateway's ``createGatewayOnEdgeRuntime`` handler, which runs
  ``Gateway.execute(...)``: schema checks on the manifest, the settings and the arguments, then
  the raw argument string POSTed as ``text/plain`` to ``api[].url``.

A second server runs with ``DOCANCHOR_API_KEYS`` to try missing, empty, wrong and right keys.
Every call, its argument and settings kind, status, answer length and milliseconds go into a
table, printed (``-s``) and written to ``tests/artifacts/gateway_calls.md``. The milliseconds are
not asserted: LOBECHAT.md's "well under 20 s" is a target printed by ``bench/time_targets.py``.

Run alone: ``./scripts/test.sh tests/test_lobechat_contract.py -s``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CORPUS
from tests.live_server import REPO, LiveServer
from tests.waiting import BACKSTOP_S, job_ended

pytestmark = [pytest.mark.e2e, pytest.mark.server]

NODE_DIR = REPO / os.environ.get("DOCANCHOR_NODE_DEPS", ".cache/lobechat-node")
SCRIPTS = REPO / "tests" / "node"
ARTIFACT = REPO / "tests" / "artifacts" / "gateway_calls.md"
MD = CORPUS / "md" / "ch04-01-what-is-ownership.md"
PDF = CORPUS / "pdf" / "dmca.pdf"
API_KEY = "contract-test-key-5d1e"
LIMIT_CHARS = 8000
"""Longest answer the model may get, in characters (../shared/LOBECHAT.md)."""
NOT_SET = "<not set>"
"""``settings`` value for a user who never opened the plugin's settings."""
IDENTIFIER_API_MAX = 64
"""LobeChat replaces ``identifier + "____" + api.name`` by a hash at 64 characters or more."""


# ------------------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One plugin call and what must come back.

    ``arguments`` is the raw string the model wrote (``None``: no arguments at all); ``{md}``,
    ``{pdf}``, ``{base}`` and ``{cursor}`` are filled in at run time. ``expect`` is ``"answer"``
    (content for the model), ``"sentence"`` (a recoverable problem: 200 with what to do), or the
    LobeChat ``errorType`` with which LobeChat's gateway refuses the call before DocAnchor sees it.
    """

    id: str
    api: str
    args_kind: str
    arguments: str | None
    settings_kind: str = "{}"
    settings: Any = field(default_factory=dict)
    expect: str = "answer"
    contains: tuple[str, ...] = ()
    citations: bool = False
    server: str = "open"
    batch: int = 1
    defaults: dict | None = None


def j(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


REALISTIC = "realistic"
KEY = {"apiKey": API_KEY}
CASES: list[Case] = [
    # listDocuments
    Case("list-no-args", "listDocuments", "none", None, "never set", NOT_SET, contains=("{md}", "{pdf}")),
    Case("list-empty", "listDocuments", "empty string", "", contains=("{md}", "{pdf}")),
    Case("list-braces", "listDocuments", "{}", "{}", "budget 800", {"defaultBudgetTokens": 800}, contains=("{md}",)),
    Case("list-unknown-key", "listDocuments", "unknown key", j({"filter": "pdf"}), contains=("{pdf}",)),
    Case("list-other-namespace", "listDocuments", "{}", "{}", "namespace team-a", {"namespace": "team-a"},
         expect="sentence", contains=("no documents", "team-a")),
    Case("list-long-namespace", "listDocuments", "{}", "{}", "namespace 300 chars", {"namespace": "n" * 300},
         expect="sentence", contains=("namespace", "plugin's settings")),
    Case("list-garbage-settings", "listDocuments", "{}", "{}", "not JSON", "not json at all", contains=("{md}",)),
    # searchDocuments
    Case("search-one-doc", "searchDocuments", REALISTIC,
         j({"query": "What are the three ownership rules?", "doc_id": "{md}"}),
         contains=("{md}", "More:"), citations=True),
    Case("search-all-docs", "searchDocuments", REALISTIC,
         j({"query": "safe harbor for online service providers who remove infringing material"}),
         contains=("{pdf}", "p. "), citations=True),
    Case("search-budget-300", "searchDocuments", REALISTIC + " + budget 300",
         j({"query": "anti-circumvention exemptions for libraries", "doc_id": "{pdf}", "budget_tokens": 300}),
         contains=("of 300 tokens", "{pdf}"), citations=True),
    Case("search-budget-huge", "searchDocuments", "budget 100000",
         j({"query": "How do heap and stack differ?", "budget_tokens": 100000}),
         contains=("of 1500 tokens",), citations=True),
    Case("search-budget-setting", "searchDocuments", REALISTIC, j({"query": "What is a move?", "doc_id": "{md}"}),
         "budget 200", {"defaultBudgetTokens": 200}, contains=("of 200 tokens",), citations=True),
    Case("search-budget-zero", "searchDocuments", "budget 0", j({"query": "String type", "budget_tokens": 0}),
         expect="sentence", contains=("budget_tokens 0 cannot be used",)),
    Case("search-unknown-key", "searchDocuments", "unknown key", j({"query": "scope", "language": "en"}),
         citations=True),
    Case("search-no-args", "searchDocuments", "none", None, expect="sentence", contains=("needs a `query`",)),
    Case("search-empty", "searchDocuments", "empty string", "", expect="sentence", contains=("needs a `query`",)),
    Case("search-braces", "searchDocuments", "{}", "{}", expect="sentence", contains=("needs a `query`",)),
    Case("search-blank-query", "searchDocuments", "blank query", j({"query": "   "}), expect="sentence",
         contains=("needs a `query` (it was blank)",)),
    Case("search-wrong-id", "searchDocuments", "wrong doc_id",
         j({"query": "ownership", "doc_id": "doc_0000000000000000"}), expect="sentence",
         contains=("doc_0000000000000000", "listDocuments")),
    Case("search-path-id", "searchDocuments", "garbage doc_id", j({"query": "ownership", "doc_id": "../../etc"}),
         expect="sentence", contains=("listDocuments",)),
    Case("search-string-budget", "searchDocuments", "budget as string",
         j({"query": "ownership", "budget_tokens": "500"}),
         expect="PluginApiParamsError"),
    Case("search-number-query", "searchDocuments", "query as number", j({"query": 42}), expect="PluginApiParamsError"),
    Case("search-array-args", "searchDocuments", "JSON array", "[1, 2]", expect="PluginApiParamsError"),
    Case("search-not-json", "searchDocuments", "not JSON", "query: ownership", expect="PluginGatewayError"),
    # readDocument
    Case("read-start", "readDocument", REALISTIC, j({"doc_id": "{md}", "budget_tokens": 400}),
         contains=("{md}", "What Is Ownership?", 'from="'), citations=True),
    Case("read-page", "readDocument", REALISTIC + " page:3",
         j({"doc_id": "{pdf}", "from": "page:3", "budget_tokens": 500}),
         contains=("{pdf}", "p. 3"), citations=True),
    Case("read-heading", "readDocument", REALISTIC + " heading", j({"doc_id": "{md}", "from": "Ownership Rules"}),
         contains=("Ownership Rules",), citations=True),
    Case("read-cursor", "readDocument", "cursor from read-start", j({"doc_id": "{md}", "from": "{cursor}"}),
         contains=("{md}",), citations=True, batch=2),
    Case("read-no-args", "readDocument", "none", None, expect="sentence", contains=("needs a `doc_id`",)),
    Case("read-empty", "readDocument", "empty string", "", expect="sentence", contains=("needs a `doc_id`",)),
    Case("read-wrong-id", "readDocument", "wrong doc_id", j({"doc_id": "doc_0000000000000000"}), expect="sentence",
         contains=("No document has the id", "listDocuments")),
    Case("read-page-999", "readDocument", "page past the end", j({"doc_id": "{pdf}", "from": "page:999"}),
         expect="sentence", contains=("no page 999", "'page:18'", "no `from`")),
    Case("read-bad-from", "readDocument", "unknown heading", j({"doc_id": "{md}", "from": "No Such Heading Here"}),
         expect="sentence", contains=("from='No Such Heading Here'", "'Ownership Rules'")),
    # getDocumentAnchor
    Case("anchor-md", "getDocumentAnchor", REALISTIC, j({"doc_id": "{md}"}), contains=("What Is Ownership?", "{md}")),
    Case("anchor-pdf", "getDocumentAnchor", REALISTIC, j({"doc_id": "{pdf}"}),
         contains=("Digital Millennium Copyright Act", "{pdf}")),
    Case("anchor-empty", "getDocumentAnchor", "empty string", "", expect="sentence", contains=("needs a `doc_id`",)),
    Case("anchor-wrong-id", "getDocumentAnchor", "wrong doc_id", j({"doc_id": "doc_ffffffffffffffff"}),
         expect="sentence", contains=("No document has the id",)),
    # addDocument (the test machine is offline: public links cannot be fetched, local ones are refused)
    Case("add-loopback", "addDocument", "loopback URL", j({"url": "{base}/manifest.json", "title": "Mine"}),
         expect="sentence", contains=("upload",)),
    Case("add-metadata", "addDocument", "cloud metadata URL", j({"url": "http://169.254.169.254/latest/meta-data/"}),
         expect="sentence"),
    Case("add-unresolvable", "addDocument", "public URL, host unknown",
         j({"url": "https://docs.example.invalid/annual-report.pdf"}), expect="sentence", contains=("resolved",)),
    Case("add-not-url", "addDocument", "not a URL", j({"url": "the report I mentioned"}), expect="sentence"),
    Case("add-ftp", "addDocument", "ftp URL", j({"url": "ftp://example.com/report.pdf"}), expect="sentence"),
    Case("add-empty", "addDocument", "empty string", "", expect="sentence", contains=("needs a `url`",)),
    # API keys on (second server)
    Case("key-never-set", "listDocuments", "empty string", "", "never set", NOT_SET, server="auth",
         expect="PluginSettingsInvalid"),
    Case("key-missing", "listDocuments", "empty string", "", "{}", {}, server="auth", expect="PluginSettingsInvalid"),
    Case("key-blank", "listDocuments", "empty string", "", "apiKey blank", {"apiKey": ""}, server="auth",
         expect="sentence", contains=("needs an API key",)),
    Case("key-wrong-list", "listDocuments", "empty string", "", "wrong apiKey", {"apiKey": "nope"}, server="auth",
         expect="sentence", contains=("not valid",)),
    Case("key-wrong-search", "searchDocuments", REALISTIC, j({"query": "ownership rules"}), "wrong apiKey",
         {"apiKey": "nope"}, server="auth", expect="sentence", contains=("not valid",)),
    Case("key-wrong-add", "addDocument", "public URL, host unknown", j({"url": "https://docs.example.invalid/a.pdf"}),
         "wrong apiKey", {"apiKey": "nope"}, server="auth", expect="sentence", contains=("not valid",)),
    Case("key-right-list", "listDocuments", "empty string", "", "right apiKey", KEY, server="auth", contains=("{md}",)),
    Case("key-right-search", "searchDocuments", REALISTIC,
         j({"query": "What happens when a variable goes out of scope?", "doc_id": "{md}"}), "right apiKey", KEY,
         server="auth", contains=("{md}",), citations=True),
    Case("key-right-read", "readDocument", REALISTIC, j({"doc_id": "{md}", "budget_tokens": 300}), "right apiKey", KEY,
         server="auth", contains=("{md}",), citations=True),
    Case("key-right-anchor", "getDocumentAnchor", REALISTIC, j({"doc_id": "{md}"}), "right apiKey", KEY,
         server="auth", contains=("{md}",)),
    Case("key-operator-default", "listDocuments", "empty string", "", "never set + LobeChat PLUGIN_SETTINGS key",
         NOT_SET, server="auth", contains=("{md}",), defaults={"docanchor": KEY}),
]
APIS = ("addDocument", "searchDocuments", "readDocument", "getDocumentAnchor", "listDocuments")


def fill(template: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


# ------------------------------------------------------------------------------------- helpers
def run_node(script: str, *args: str) -> None:
    """Run one of tests/node/*.mjs with LobeChat's packages on its module path; fail with its stderr."""
    proc = subprocess.run(
        ["node", str(SCRIPTS / script), *args], cwd=REPO, capture_output=True, text=True, timeout=BACKSTOP_S,
        env={**os.environ, "LOBECHAT_NODE_MODULES": str(NODE_DIR)},
    )
    assert proc.returncode == 0, f"node {script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


def upload(server: LiveServer, path: Path, api_key: str | None = None) -> str:
    """Start an ingest of ``path`` over the HTTP API (multipart, ``wait_s=0``); return the job id."""
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"wait_s\"\r\n\r\n0\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{path.name}\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    status, raw = server.request("POST", "/v1/documents", body, headers)
    assert status in (201, 202), raw[:500]
    return json.loads(raw)["job_id"]


def wait_done(server: LiveServer, job_id: str, api_key: str | None = None) -> str:
    """Poll ``GET /v1/jobs/<id>`` until the ingest ends; return its doc id (it must be done)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    job = job_ended(lambda: server.job(job_id, headers))
    assert job["status"] == "done", job
    return job["result"]["doc_id"]


# ------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def node_deps() -> Path:
    """LobeChat's SDK and gateway on disk (the idempotent setup script runs in well under a second
    when they are already installed)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are needed for the LobeChat contract tests")
    proc = subprocess.run(["bash", str(REPO / "scripts/test-deps/node.sh")], cwd=REPO, capture_output=True,
                          text=True, timeout=BACKSTOP_S)
    assert proc.returncode == 0, f"scripts/test-deps/node.sh failed:\n{proc.stdout}\n{proc.stderr}"
    return NODE_DIR


@pytest.fixture(scope="module")
def servers(tmp_path_factory, node_deps):
    """Two real servers started together: ``open`` (no keys, holds the Markdown chapter and the
    DMCA PDF) and ``auth`` (``DOCANCHOR_API_KEYS`` set, holds the chapter)."""
    root = tmp_path_factory.mktemp("contract")
    (root / "open").mkdir()
    (root / "auth").mkdir()
    started = {
        "open": LiveServer(root / "open" / "data"),
        "auth": LiveServer(root / "auth" / "data", env={"DOCANCHOR_API_KEYS": API_KEY}),
    }
    try:
        for server in started.values():
            server.wait_ready()
        jobs = {
            "md": (started["open"], upload(started["open"], MD), None),
            "pdf": (started["open"], upload(started["open"], PDF), None),
            "auth_md": (started["auth"], upload(started["auth"], MD, API_KEY), API_KEY),
        }
        ids = {name: wait_done(server, job, key) for name, (server, job, key) in jobs.items()}
        yield started, ids
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture(scope="module")
def manifests(servers, tmp_path_factory) -> dict[str, dict]:
    """What LobeChat's browser sees when the user pastes each server's manifest URL: the main one
    (``open``, ``auth``) and the standalone library plugin's (``open-ui``, ``auth-ui``)."""
    started, _ = servers
    out = tmp_path_factory.mktemp("manifest")
    seen = {}
    for name, server in started.items():
        for key, path in ((name, "/manifest.json"), (f"{name}-ui", "/ui/manifest.json")):
            run_node("manifest_check.mjs", server.base + path, str(out / f"{key}.json"))
            seen[key] = json.loads((out / f"{key}.json").read_text())
    return seen


@dataclass
class Result:
    case: Case
    arguments: str | None
    status: int
    body: str
    ms: int

    @property
    def error_type(self) -> str | int | None:
        """The gateway's ``errorType`` for a refused call; a number means DocAnchor answered non-2xx."""
        if self.status == 200:
            return None
        try:
            return json.loads(self.body).get("errorType")
        except (ValueError, AttributeError):
            return None

    @property
    def reached_docanchor(self) -> bool:
        return self.status == 200 or isinstance(self.error_type, int)


@pytest.fixture(scope="module")
def results(servers, tmp_path_factory) -> dict[str, Result]:
    """Every case through LobeChat's gateway, in two batches (the second follows a read cursor)."""
    started, ids = servers
    out = tmp_path_factory.mktemp("gateway")
    values = {"open": {"md": ids["md"], "pdf": ids["pdf"], "base": started["open"].base},
              "auth": {"md": ids["auth_md"], "pdf": "", "base": started["auth"].base}}
    done: dict[str, Result] = {}
    for batch in (1, 2):
        for name, server in started.items():
            cases = [c for c in CASES if c.server == name and c.batch == batch]
            if not cases:
                continue
            calls = []
            for case in cases:
                call: dict[str, Any] = {"id": case.id, "apiName": case.api}
                if case.arguments is not None:
                    call["arguments"] = fill(case.arguments, values[name])
                if case.settings != NOT_SET:
                    call["settings"] = case.settings
                if case.defaults is not None:
                    call["defaultPluginSettings"] = case.defaults
                calls.append(call)
            src, dst = out / f"{name}-{batch}-in.json", out / f"{name}-{batch}-out.json"
            src.write_text(json.dumps({"manifestUrl": server.base + "/manifest.json", "calls": calls}))
            run_node("gateway_calls.mjs", str(src), str(dst))
            by_id = {c["id"]: c for c in calls}
            for row, case in zip(json.loads(dst.read_text())["results"], cases, strict=True):
                done[case.id] = Result(case, by_id[case.id].get("arguments"), row["status"], row["body"], row["ms"])
        if batch == 1:
            cursor = re.search(r'readDocument\(doc_id="[^"]+", from="([^"]+)"\)', done["read-start"].body)
            assert cursor, f"readDocument gave no cursor to continue: {done['read-start'].body[-300:]}"
            values["open"]["cursor"] = cursor.group(1)
    table = call_table([done[c.id] for c in CASES])
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(table, encoding="utf-8")
    print("\n" + table)
    return done


def call_table(rows: list[Result]) -> str:
    """The Markdown table of every call: api, arguments and settings kinds, status, answer length."""
    lines = [
        "# Every DocAnchor plugin call tried through LobeChat's gateway",
        "",
        "Made by tests/test_lobechat_contract.py: `@lobehub/chat-plugins-gateway` "
        "(`createGatewayOnEdgeRuntime` → `Gateway.execute`) calling a real `docanchor serve`. "
        "Answer lengths are in characters. \"refused by LobeChat\" = the gateway's own schema checks "
        "stopped the call before DocAnchor (LobeChat shows its settings form or an error card).",
        "",
        "| # | server | api | arguments | settings | status | outcome | answer chars | ms | answer begins |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(rows, 1):
        if r.reached_docanchor:
            outcome = r.case.expect if r.status == 200 else f"DocAnchor {r.error_type}"
        else:
            outcome = f"refused by LobeChat: {r.error_type}"
        begins = re.sub(r"\s+", " ", r.body if r.reached_docanchor else "")[:70].replace("|", "\\|")
        lines.append(f"| {n} | {r.case.server} | {r.case.api} | {r.case.args_kind} | {r.case.settings_kind} | "
                     f"{r.status} | {outcome} | {len(r.body) if r.reached_docanchor else '–'} | {r.ms} | {begins} |")
    reached = [r for r in rows if r.reached_docanchor]
    lines += ["", f"{len(rows)} calls, {len(reached)} answered by DocAnchor (longest answer "
              f"{max(len(r.body) for r in reached)} characters, slowest {max(r.ms for r in rows)} ms)."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------- install
@pytest.mark.parametrize("name", ["open", "auth", "open-ui", "auth-ui"])
def test_manifest_passes_the_sdk_schema(manifests, name):
    seen = manifests[name]
    assert seen["parseError"] is None
    assert seen["schema"]["success"], seen["schema"]["issues"]


@pytest.mark.parametrize("name", ["open", "auth", "open-ui", "auth-ui"])
def test_manifest_is_fetchable_cross_origin(manifests, name):
    seen = manifests[name]
    assert seen["get"]["status"] == 200
    assert seen["get"]["contentType"].startswith("application/json")
    assert seen["get"]["allowOrigin"] == "*"
    assert seen["preflight"]["status"] in (200, 204)
    assert seen["preflight"]["allowOrigin"] == "*"
    assert "GET" in seen["preflight"]["allowMethods"]
    allowed = seen["preflight"]["allowHeaders"].lower()
    assert allowed == "*" or "content-type" in allowed


def test_manifest_apis_point_at_this_server(servers, manifests):
    started, _ = servers
    manifest = manifests["open"]["manifest"]
    names = [api["name"] for api in manifest["api"]]
    assert sorted(names) == sorted(APIS)
    for api in manifest["api"]:
        assert api["url"] == f"{started['open'].base}/lobechat/{api['name']}"
        assert re.fullmatch(r"[A-Za-z0-9_]+", api["name"])
        assert len(api["description"]) <= 1024
        assert len(f"{manifest['identifier']}____{api['name']}") < IDENTIFIER_API_MAX
        assert api["parameters"]["type"] == "object"
        assert "additionalProperties" not in api["parameters"]
    assert re.fullmatch(r"[a-z0-9-]+", manifest["identifier"])
    assert "gateway" not in manifest and "openapi" not in manifest


def test_manifest_with_keys_asks_for_a_password_key(manifests):
    settings = manifests["auth"]["manifest"]["settings"]
    assert "apiKey" in settings["required"]
    assert settings["properties"]["apiKey"]["format"] == "password"
    assert "required" not in manifests["open"]["manifest"]["settings"]


# ------------------------------------------------------------------------------------- calls
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_call_through_the_gateway(results, servers, case):
    _, ids = servers
    r = results[case.id]
    values = {"md": ids["auth_md" if case.server == "auth" else "md"], "pdf": ids["pdf"]}
    if case.expect not in ("answer", "sentence"):
        assert not r.reached_docanchor and r.error_type == case.expect, (r.status, r.body[:500])
        return
    assert r.status == 200, f"{case.id}: {r.status} {r.body[:500]}"
    assert r.body.strip(), f"{case.id}: empty answer"
    assert len(r.body) <= LIMIT_CHARS, f"{case.id}: {len(r.body)} characters"
    for needle in case.contains:
        assert fill(needle, values) in r.body, f"{case.id}: {fill(needle, values)!r} not in {r.body[:600]!r}"
    cited = re.findall(r"^\*\*(?:\[\d+\] )?.+ — doc_[0-9a-f]{16}(?: — chars \d+–\d+ of \d+)?\*\*$", r.body, re.M)
    if case.citations:
        assert cited, f"{case.id}: no citation line in {r.body[:600]!r}"
    if case.expect == "sentence":
        assert not cited, f"{case.id}: a recoverable problem came back with passages"
        assert len(r.body) < 600 and r.body.rstrip().endswith((".", ")")), r.body
        assert not re.search(r"\bstart\b|next_cursor", r.body), f"{case.id} names a field the plugin has not: {r.body}"


def test_every_api_tried_every_way(results):
    """Each api: a realistic answer, empty arguments, and (when it takes one) a wrong doc id."""
    for api in APIS:
        kinds = {c.args_kind for c in CASES if c.api == api}
        assert any(k.startswith(REALISTIC) or k in ("none", "empty string") for k in kinds)
        assert "empty string" in kinds, api
        answered = [r for r in results.values() if r.case.api == api and r.case.expect == "answer"]
        if api != "addDocument":  # offline machine: no public link can be fetched
            assert answered and all(r.status == 200 for r in answered), api
        if api in ("searchDocuments", "readDocument", "getDocumentAnchor"):
            assert "wrong doc_id" in kinds, api
    assert ARTIFACT.read_text(encoding="utf-8").count("\n| ") == len(CASES) + 1
