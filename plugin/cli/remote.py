"""The command line's way into a running ``docanchor serve``: its HTTP API, with the standard library.

The server writes its address into the data dir's lock (see :mod:`plugin.lock`); commands then
send their work there instead of opening the index themselves (a cold start: Chroma, BM25, the
model). ``urllib`` keeps the command light: a third-party HTTP client costs more to import than a
warm search takes.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import deque
from typing import Any, Callable, Iterable

from docanchor.errors import DocAnchorError, StoreUnavailable, Unauthorized, sentences
from docanchor.library import MAX_PAGE_SIZE
from plugin.lock import Holder

API_KEY_ENV = "DOCANCHOR_API_KEY"
"""The variable that gives the command line its API key for a server that requires one."""
REQUEST_TIMEOUT_S = 600.0
"""Backstop for one HTTP request (seconds): a search or a read on a busy server, an upload."""
IN_FLIGHT_FILES = 4
"""Most files ``ingest`` has uploaded to a server and not yet seen finish: the server indexes one
at a time, so a few queued keep it busy while bounding what waits in its uploads folder."""
POLL_S = 0.25
"""How often (seconds) ``ingest`` asks a server how its jobs are doing."""
LIST_PAGE_SIZE = MAX_PAGE_SIZE
"""Documents per ``GET /v1/documents`` page when the command line lists a namespace (the most a
page may hold: fewest requests)."""


def api_key(environ: dict[str, str] | os._Environ = os.environ) -> str | None:
    """The key the command line sends: ``DOCANCHOR_API_KEY``, else the first key of
    ``DOCANCHOR_API_KEYS`` (the server's own list, when the command runs in the server's environment)."""
    key = environ.get(API_KEY_ENV, "").strip()
    if key:
        return key
    first = environ.get("DOCANCHOR_API_KEYS", "").split(",")[0]
    return first.partition("=")[0].strip() or None


class Server:
    """A running server's HTTP API, as the command line uses it.

    Args:
        holder: the lock's holder (its pid and address).
        namespace: sent as ``X-DocAnchor-Namespace`` when given, else the server picks (its default,
            or the key's own namespace).
        key: the API key, when the server requires one.

    Every method raises the server's error as a :class:`DocAnchorError` with its code and message;
    ``server_unreachable`` when the server does not answer.
    """

    def __init__(self, holder: Holder, namespace: str | None, key: str | None) -> None:
        self.holder = holder
        self.base = (holder.address or "").rstrip("/")
        self.namespace = namespace
        self.key = key

    @property
    def where(self) -> str:
        return f"the server at {self.base} (pid {self.holder.pid})"

    # ------------------------------------------------------------------ transport
    def call(self, method: str, path: str, body: dict | None = None, *, raw: bytes | None = None,
             content_type: str | None = None) -> Any:
        """One request; the decoded JSON answer. Raises the server's error (see the class)."""
        headers = {"Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        if self.namespace:  # sent as UTF-8 (http.client writes a str's code points as latin-1 bytes)
            headers["X-DocAnchor-Namespace"] = self.namespace.encode("utf-8").decode("latin-1")
        data = raw
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            content_type = "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raise self._error(err.code, err.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise StoreUnavailable(
                f"A server (pid {self.holder.pid}) holds the data dir and answers at {self.base}, but the request "
                f"failed ({reason}); try again, or stop the server to use the data dir directly.",
                code="server_unreachable") from exc

    def _error(self, status: int, raw: bytes) -> DocAnchorError:
        try:
            body = json.loads(raw)["error"]
            err = DocAnchorError(str(body["message"]), code=str(body["code"]), **(body.get("details") or {}))
        except (ValueError, KeyError, TypeError):
            err = DocAnchorError(f"The server answered HTTP {status} without DocAnchor's error body; check that "
                                 f"{self.base} is the DocAnchor server holding the data dir, and read its log.",
                                 code="server_error")
        if status == 401:
            hint = (f"Set {API_KEY_ENV} to a key the server accepts." if not self.key
                    else f"The key in {API_KEY_ENV} is not one the server accepts; set it to one that is.")
            err = Unauthorized(sentences(err.message, hint), code=err.code)
        return err.with_status(status)

    # ------------------------------------------------------------------ reading
    def list_documents(self) -> list[dict]:
        """Every document of the namespace, as the data dir's own list gives them: ``GET
        /v1/documents`` page after page (:data:`LIST_PAGE_SIZE` each), following ``next_cursor``
        to the last page."""
        docs: list[dict] = []
        cursor = None
        while True:
            query = {"limit": LIST_PAGE_SIZE, **({"cursor": cursor} if cursor else {})}
            page = self.call("GET", "/v1/documents?" + urllib.parse.urlencode(query))
            docs += page["documents"]
            cursor = page["next_cursor"]
            if not cursor:
                return docs

    def anchor(self, doc_id: str) -> str:
        return self.call("GET", f"/v1/documents/{_quote(doc_id)}/anchor")["anchor"]

    def retrieve(self, query: str, budget_tokens: int | None, doc_ids: list[str] | None, explain: bool) -> dict:
        body: dict[str, Any] = {"query": query, "explain": explain}
        if budget_tokens is not None:
            body["budget_tokens"] = budget_tokens
        if doc_ids:
            body["doc_ids"] = doc_ids
        return self.call("POST", "/v1/retrieve", body)

    def read(self, doc_id: str, start: str | None, budget_tokens: int | None) -> dict:
        body: dict[str, Any] = {"doc_id": doc_id}
        if start is not None:
            body["from"] = start
        if budget_tokens is not None:
            body["budget_tokens"] = budget_tokens
        return self.call("POST", "/v1/read", body)

    def status(self) -> dict:
        return self.call("GET", "/v1/status")

    # ------------------------------------------------------------------ writing
    def delete(self, doc_id: str) -> int:
        return int(self.call("DELETE", f"/v1/documents/{_quote(doc_id)}")["chunks_removed"])

    def context(self, route: str, body: dict[str, Any]) -> dict:
        """``POST /v1/context/{route}`` (``assemble`` or ``compact``)."""
        return self.call("POST", f"/v1/context/{route}", body)

    def forget_source(self, doc_id: str, source: str) -> dict:
        query = urllib.parse.urlencode({"source": source})
        return self.call("DELETE", f"/v1/documents/{_quote(doc_id)}/sources?{query}")

    def ingest(self, items: Iterable[Any], read: Callable[[Any], tuple[bytes, str, str]],
               progress: Callable[[Any, str, int, int], None],
               finished: Callable[[Any, dict | None, DocAnchorError | None], None]) -> None:
        """Upload ``items`` as ingest jobs, at most :data:`IN_FLIGHT_FILES` unfinished at a time.

        Args:
            read: ``item -> (bytes, file name, source)``; may raise a DocAnchorError for that item.
            progress: called with ``(item, stage, done, total)`` as the server reports its job.
            finished: called once per item with the job's result (the body of a finished upload)
                or its error.

        Ctrl-C (KeyboardInterrupt, raised again) cancels the jobs in flight (:meth:`_cancel`), so
        that, as in this process, the files in progress are not stored.
        """
        waiting, flying = deque(items), {}
        try:
            self._send(waiting, flying, read, progress, finished)
        except KeyboardInterrupt:
            self._cancel(flying, finished)
            raise

    def _send(self, waiting: deque, flying: dict, read: Callable, progress: Callable, finished: Callable) -> None:
        """The upload loop of :meth:`ingest`: ``flying`` holds the jobs sent and not yet ended, by id."""
        while waiting or flying:
            while waiting and len(flying) < IN_FLIGHT_FILES:
                item = waiting.popleft()
                try:
                    answer = self._upload(*read(item))
                except DocAnchorError as err:
                    finished(item, None, err)
                    continue
                if answer.get("status") in ("queued", "running"):
                    flying[answer["job_id"]] = item
                else:
                    finished(item, answer, None)
            for job_id, item in list(flying.items()):
                self._follow(job_id, item, flying, progress, finished)
            if flying:
                time.sleep(POLL_S)

    def _upload(self, data: bytes, filename: str, source: str) -> dict:
        boundary = uuid.uuid4().hex
        body = _multipart(boundary, {"source": source, "wait_s": "0"}, ("file", filename, data))
        return self.call("POST", "/v1/documents", raw=body, content_type=f"multipart/form-data; boundary={boundary}")

    def _follow(self, job_id: str, item: Any, flying: dict, progress: Callable, finished: Callable) -> None:
        try:
            job = self.call("GET", f"/v1/jobs/{_quote(job_id)}")
        except DocAnchorError as err:
            del flying[job_id]
            finished(item, None, err)
            return
        if job["status"] == "done":
            del flying[job_id]
            finished(item, {**job["result"], "job_id": job_id}, None)
        elif job["status"] in ("failed", "cancelled"):  # cancelled: by Ctrl-C (see _cancel) or through the API
            del flying[job_id]
            err = DocAnchorError(job.get("error_message"), code=job.get("error_code") or "internal", job_id=job_id)
            finished(item, None, err.with_status(job.get("error_status") or 500))
        elif job["status"] == "running":
            progress(item, job["stage"], job["done"], job["total"])

    def _cancel(self, flying: dict, finished: Callable) -> None:
        """Ctrl-C: ask the server to cancel every job in ``flying`` (``DELETE /v1/jobs/<id>``), then
        follow each until it ends. A job that ended before its cancel is reported through
        ``finished`` (a file stored is said to be); a cancelled one stores nothing and is left to the
        interruption's summary. A second Ctrl-C stops the wait (the cancels are sent)."""
        for job_id in list(flying):
            try:
                self.call("DELETE", f"/v1/jobs/{_quote(job_id)}")
            except DocAnchorError:  # job_finished: it ended first (followed below); or the server is gone
                pass

        def ended(item: Any, result: dict | None, err: DocAnchorError | None) -> None:
            if err is None or err.code != "cancelled":
                finished(item, result, err)

        while flying:
            for job_id, item in list(flying.items()):
                self._follow(job_id, item, flying, lambda *_: None, ended)
            if flying:
                time.sleep(POLL_S)


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _multipart(boundary: str, fields: dict[str, str], file: tuple[str, str, bytes]) -> bytes:
    """A ``multipart/form-data`` body (RFC 7578): text ``fields``, then one file part."""
    name, filename, data = file
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode("utf-8")
             for k, v in fields.items()]
    quoted = filename.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", " ")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{quoted}"\r\n'
                 "Content-Type: application/octet-stream\r\n\r\n".encode("utf-8") + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts)
