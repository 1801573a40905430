"""``docanchor serve``: the app under waitress, a production WSGI server — one process, a pool of
threads, so embedded Chroma is opened by exactly one process (held by :mod:`plugin.lock`). With a
Chroma server, ``--workers N`` runs N such processes on one port (:mod:`plugin.workers`)."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import signal
import socket
import threading
from typing import Any, Callable, Iterator

from docanchor.errors import DiskFull, DocAnchorError, InvalidRequest
from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.http_errors import upload_too_large
from plugin.lock import hold, inherit
from plugin.observe import REQUEST_ID_HEADER, request_id_from

log = logging.getLogger("docanchor.serve")


def make_server(settings: Settings, docanchor: DocAnchor, *, host: str, port: int, threads: int,
                sockets: list | None = None, worker: int | None = None, counts: Any = None):
    """A waitress server for the app, bound but not yet running (``port=0`` picks a free port), or
    on ``sockets`` already listening (then ``host`` and ``port`` are not used); ``worker``: see
    :func:`plugin.app.create_app`. With ``counts`` (a :class:`plugin.balance.ConnectionCounts`),
    worker ``worker`` on the one socket of ``sockets`` takes its share of the connections
    (:class:`plugin.balance.BalancedServer`).

    Returns:
        The waitress server: ``.run()`` serves until ``.close()``; ``.effective_port`` is the port.
    """
    from waitress import create_server

    # waitress's own body limit stays above Flask's, so an upload somewhat over the limit gets
    # Flask's 413; a body over waitress's limit never reaches the app and gets the same JSON body
    # from json_error_channel.
    app = create_app(settings, docanchor, worker)
    adjustments: dict[str, Any] = {"threads": threads, "ident": "docanchor",
                                   "max_request_body_size": 2 * settings.max_upload_bytes + 1024 * 1024}
    if counts is not None:
        from waitress.adjustments import Adjustments

        from plugin.balance import BalancedServer

        (sock,) = sockets or []
        server = BalancedServer(app, sock, Adjustments(sockets=[sock], **adjustments), counts, worker or 0)
    else:
        where: dict[str, Any] = {"sockets": sockets} if sockets else {"host": host, "port": port}
        server = create_server(app, **adjustments, **where)
    server.channel_class = json_error_channel(settings)
    return server


def json_error_channel(settings: Settings) -> Any:
    """A waitress channel class whose own error answers (a body over ``max_request_body_size``,
    headers too large, a request it cannot parse) carry the service's one JSON error body
    instead of waitress's plain text. Such requests never reach the app."""
    from waitress.channel import HTTPChannel
    from waitress.task import ErrorTask

    class JsonErrorTask(ErrorTask):
        def execute(self) -> None:
            err = waitress_error(self.request.error, settings)
            body = json.dumps(err.to_body(), ensure_ascii=False).encode("utf-8")
            self.status = f"{err.http_status} {self.request.error.reason}"
            self.response_headers.append(("Content-Type", "application/json"))
            rid = request_id_from({"HTTP_X_REQUEST_ID": self.request.headers.get("X_REQUEST_ID", "")})
            self.response_headers.append((REQUEST_ID_HEADER, rid))
            log.info("request refused before the app: %s", err.code, extra={"request_id": rid, "status": err.http_status})
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class JsonErrorChannel(HTTPChannel):
        error_task_class = JsonErrorTask

    return JsonErrorChannel


def waitress_error(error: Any, settings: Settings) -> DocAnchorError:
    """The DocAnchor error for one of waitress's own (``waitress.utilities.Error``: ``code``,
    ``reason``, ``body``)."""
    code = int(getattr(error, "code", 500))
    if code == 413:
        return upload_too_large(settings)
    if code == 400:
        return InvalidRequest(f"The request could not be read ({error.body}); check its headers and body.",
                              code="bad_request")
    reason = str(getattr(error, "reason", "Error"))
    err = DocAnchorError(f"The request was refused: {reason} ({error.body}).", code=reason.lower().replace(" ", "_"))
    return err.with_status(code)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (``port=0`` picks a free port).

    Raises:
        DocAnchorError: ``address_in_use`` when the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise DocAnchorError(f"docanchor serve cannot listen on {host}:{port} ({exc.strerror}); pick another "
                             "--port or stop what uses it.", code="address_in_use") from exc
    sock.listen(1024)
    return sock


def serve(settings: Settings, docanchor: DocAnchor | None = None, *, host: str, port: int, threads: int,
          warm_up: bool = True, sockets: list | None = None, resume_jobs: bool = True,
          ready: Callable[[], None] | None = None, worker: int | None = None, counts: Any = None) -> None:
    """Hold the data-dir lock, load the model, resume unfinished ingest jobs, and serve forever.

    Once bound, the server writes its address into the lock file, so CLI commands on the same
    data dir go through its API (see :mod:`plugin.lock`).

    Args:
        sockets: listening sockets to serve on instead of binding ``host:port`` (a worker of
            :mod:`plugin.workers`).
        resume_jobs: resume the job log's unfinished jobs at start-up; ``False`` for a worker
            other than the first, which leaves the shared job log to it (see
            :meth:`plugin.api.DocAnchor.start_up`).
        ready: called once the server takes requests.
        worker: this process's index among the workers (named by ``/healthz``); a worker leaves
            the data dir's lock and address to its supervisor.
        counts: the workers' shared connection counts (:mod:`plugin.balance`), for a worker.

    Raises:
        Conflict: ``store_locked`` when another process uses the data dir.
        DocAnchorError: ``address_in_use`` when ``host:port`` cannot be bound (before the model loads).
        DiskFull: the store cannot be opened because the data dir's disk is full.
        DocAnchorError: the model or the store cannot be opened.
    """
    # this process's share; the instance's own writes share the same lock. A worker's supervisor
    # holds it for all of them (plugin.workers): the worker's writes share that one.
    held = hold(settings, "server") if worker is None else inherit(settings)
    if sockets is None:  # bound before the model loads, so a port in use is said at once
        try:
            sockets = [listening_socket(host, port)]
        except DocAnchorError:
            held.release()
            raise
        port = sockets[0].getsockname()[1]
    da = docanchor or DocAnchor(settings)
    try:
        if warm_up:  # the first plugin call must not wait for the model (hosts cut calls at 25-60 s)
            log.info("loading the embedding model and opening the store")
            try:
                with da.disk.guard():  # a store that cannot open on a full disk says so, not "try again"
                    resumed = da.start_up(resume_jobs=resume_jobs)
            except DiskFull as exc:
                free = exc.details.get("free_bytes")
                shown = f"{free:,} bytes free" if isinstance(free, int) else "its free space cannot be read"
                raise DiskFull(
                    f"DocAnchor cannot open its data dir ({settings.data_dir}): the disk holding it is full "
                    f"({shown}). Free space on that disk (or move the data dir to a larger one), then "
                    "start DocAnchor again; the stored documents are kept.", **exc.details) from exc
            if resumed:
                log.info("resumed %d unfinished ingest job(s)", len(resumed))
            problem = da.disk.health()
            if problem:
                log.warning("%s", problem["message"])
        gc.freeze()  # start-up's objects (the model, the store's handles) leave the collector's full passes
        server = make_server(settings, da, host=host, port=port, threads=threads, sockets=sockets,
                             worker=worker, counts=counts)
        base = f"http://{host}:{getattr(server, 'effective_port', port)}"
        if worker is None:
            held.advertise(local_address(host, getattr(server, "effective_port", port)))
        log.info("DocAnchor serving on %s with %d threads (Ctrl+C stops); LobeChat manifest: %s/manifest.json",
                 base, threads, settings.public_base_url)
        if ready is not None:
            ready()
        try:
            with _stop_signals(worker is None, da.stop_jobs_soon):
                server.run()  # returns on Ctrl+C: waitress's loop takes the KeyboardInterrupt itself
        except KeyboardInterrupt:  # one that came outside waitress's loop
            pass
        finally:
            log.info("stopping: running ingest jobs stop at their next step and resume at the next start")
            da.interrupt_jobs()  # before the requests finish: those waiting for a job answer at once
            close_server(server)
            log.info("stopped")
    finally:
        held.release()


@contextlib.contextmanager
def _stop_signals(own: bool, stopping: Callable[[], None]) -> Iterator[None]:
    """While serving, SIGINT (Ctrl+C) and SIGTERM first call ``stopping`` -- it only sets flags
    (:meth:`plugin.api.DocAnchor.stop_jobs_soon`): no job starts, running ones stop at their next
    step, and requests waiting for a job answer at once -- and then stop the server as Ctrl+C
    does. waitress's loop ends on that KeyboardInterrupt and waits up to 5 s for its request
    threads before :func:`serve` goes on, so a request waiting for a job, told only afterwards,
    held the stop that long. Only the main thread can set handlers; elsewhere nothing changes.

    Args:
        stopping: called first, in the signal handler.
        own: this process serves alone, and SIGTERM (a service manager's, a container's stop)
            stops it as Ctrl+C does instead of killing it between two writes; a worker of
            :mod:`plugin.workers` keeps its supervisor's handling as the step after ``stopping``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[int, tuple[Any, Callable]] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        then = signal.default_int_handler if own and signum == signal.SIGTERM else previous
        if not callable(then):  # ignored, or the system's default action: left as it is
            continue
        installed[signum] = (previous, _calling_first(stopping, then))
        signal.signal(signum, installed[signum][1])
    try:
        yield
    finally:
        for signum, (previous, ours) in installed.items():
            if signal.getsignal(signum) is ours:  # a worker's stop ignores later signals: left so
                signal.signal(signum, previous)


def _calling_first(first: Callable[[], None], handler: Callable) -> Callable:
    """A signal handler that calls ``first()`` and then ``handler`` (which may raise KeyboardInterrupt)."""
    def both(signum: int, frame: Any) -> None:
        first()
        handler(signum, frame)

    return both


def local_address(host: str, port: int) -> str:
    """The base URL a process on this machine reaches a server bound to ``host:port`` at
    (a wildcard address is reached on loopback)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


CLOSE_WAIT_S = 60.0
"""Longest wait, in seconds, for the requests being answered when a server stops; a backstop (a
request still running then is left to its daemon thread), not a figure anything is tuned to."""


def close_server(server: Any, loop_thread: threading.Thread | None = None, wait_s: float = CLOSE_WAIT_S) -> None:
    """Stop a waitress server from :func:`make_server` quietly.

    The handler threads finish the requests they are answering (at most ``wait_s`` seconds;
    queued requests are cancelled) while the server's wake-up pipe is still open; then every
    socket of the server closes -- in the server's own loop when ``loop_thread`` runs
    ``server.run()``, which then ends (joined for at most ``wait_s`` seconds). waitress's own
    ``close()`` closes the pipe at once, and a handler thread that finishes afterwards logs
    ``OSError: [Errno 9] Bad file descriptor`` writing to it.

    Args:
        server: the waitress server.
        loop_thread: the thread running ``server.run()``; ``None`` when the loop has ended (after
            Ctrl-C in :func:`serve`).
        wait_s: the backstop, in seconds.
    """
    from waitress import wasyncore

    server.task_dispatcher.shutdown(timeout=wait_s)
    if loop_thread is None or not loop_thread.is_alive():
        wasyncore.close_all(server._map)
        return
    try:
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))  # run by the loop, which then ends
    except OSError:  # the wake-up pipe is closed already: the loop is ending; close what is left here
        wasyncore.close_all(server._map, ignore_all=True)
    loop_thread.join(wait_s)
