"""``docanchor serve --workers N``: N serving processes sharing one port, for a Chroma server.

One process's threads share one interpreter lock, so a single ``docanchor serve`` uses little more
than one core however many clients it has. Here the first process (the supervisor) binds the port
once and starts N workers, each a fresh interpreter (spawned, not forked: nothing is copied from a
process holding threads, the model or Chroma's handles), each running :func:`plugin.serve.serve`
with its own threads on the shared listening socket; the kernel hands each new connection to a
worker that accepts it (a kept-alive connection stays with its worker), and a worker holding more
connections than another leaves the socket to the others (:mod:`plugin.balance`).

Each worker is a full DocAnchor process, which only a Chroma server allows (embedded Chroma is one
process per data dir, and a second process would answer without the first one's writes: chroma-core/chroma
#3792; :func:`serve_workers` refuses it with :func:`docanchor.settings.workers_need_server`'s message). What they share and what each keeps:

- the Chroma server: every document, chunk and vector, and the change log through which each
  worker's BM25 index catches up with the others' writes (:mod:`docanchor.lexical`);
- the data dir's job log and uploads (SQLite in WAL mode, :class:`docanchor.jobs.JobStore`): a job
  created by one worker is found and polled on any, and a cancel sent to another worker reaches it;
- each worker's own BM25 index and its marks of ingests under way (``process_dir``): worker 0 keeps
  them in the data dir itself (so going from one worker to N keeps that index), worker k in
  ``<data_dir>/workers/<k>``. A worker without an index of its own starts from a copy of worker
  0's, taken before any worker runs, and checks it against the store as any process does.

Worker 0 starts first: it cleans up and resumes the jobs a previous server left unfinished; the
others start once it answers, so none is handed a job that is being resumed. A worker that dies
after it has answered is started again (its running job stays ``running`` in the job log until the
whole server restarts and worker 0 resumes it); one that dies before it answers stops the server.
SIGINT (Ctrl+C) or SIGTERM to the supervisor stops every worker the way one server stops; a
supervisor that ends without stopping them (SIGKILL) leaves none behind: each worker sees it gone
and stops as on SIGTERM (running jobs resume at the next start).
The supervisor holds the data dir's lock (:mod:`plugin.lock`) as one server does and writes its
address there once worker 0 answers, so CLI commands on the data dir go through the workers' API.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import threading
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from docanchor.errors import ConfigError, DocAnchorError
from docanchor.settings import Settings, workers_need_server
from plugin.balance import ConnectionCounts
from plugin.lock import DataDirLock
from plugin.serve import listening_socket, local_address

log = logging.getLogger("docanchor.workers")

WORKERS_DIR = "workers"
"""The data dir's folder holding worker k's own files in ``<k>/`` (k >= 1)."""
STOP_WAIT_S = 90.0
"""Longest wait, in seconds, for a worker to finish its requests and queued jobs when the server
stops (a backstop above :data:`plugin.serve.CLOSE_WAIT_S`); a worker still running then is killed."""


def worker_settings(settings: Settings, k: int) -> Settings:
    """Worker ``k``'s settings: its own ``process_dir`` (worker 0: the data dir itself), the rest shared."""
    return settings.with_(process_dir=str(Path(settings.data_dir) / WORKERS_DIR / str(k)) if k else "")


def seed_indexes(settings: Settings, workers: int) -> None:
    """Give each worker k >= 1 without a BM25 index a copy of worker 0's (before any worker runs, so
    no writer changes it meanwhile); each checks its copy against the store when it opens it."""
    source = Path(settings.data_dir) / "lexical"
    for k in range(1, workers):
        target = worker_settings(settings, k).own_dir / "lexical"
        if source.is_dir() and not target.exists():
            log.info("worker %d starts from a copy of worker 0's BM25 index", k)
            shutil.copytree(source, target)


def run_worker(settings: Settings, sock: socket.socket, k: int, threads: int, resume_jobs: bool, ready: Any,
               log_level: int, counts: ConnectionCounts) -> None:
    """A worker process's body: serve on ``sock`` until SIGINT or SIGTERM, or until its supervisor ends."""
    from plugin.cli.app import configure_logging
    from plugin.serve import serve

    configure_logging(log_level, as_json=True)
    _thread_lock_for_progress_bars()
    for signum in (signal.SIGINT, signal.SIGTERM):  # stop as Ctrl+C does: requests and jobs finish
        signal.signal(signum, _interrupt_once)
    host, port = sock.getsockname()[:2]
    log.info("worker %d starting", k)
    try:
        _stop_when_supervisor_ends(k)
        serve(worker_settings(settings, k), host=host, port=port, threads=threads, sockets=[sock],
              resume_jobs=resume_jobs, ready=ready.set, worker=k, counts=counts)
    except KeyboardInterrupt:  # stopped while starting (serve itself takes it once serving): no traceback
        log.info("worker %d stopped before it answered", k)


def _stop_when_supervisor_ends(k: int) -> None:
    """SIGTERM to this worker once its supervisor has ended, however it ended.

    A supervisor killed without its stop path (SIGKILL, a bench's kill after its own wait) sends
    no SIGTERM, and its workers served on the shared socket forever. The supervisor's end is seen
    through multiprocessing's parent sentinel: the read end of a pipe whose only write end the
    supervisor holds, which the kernel closes when it ends. It is there from the worker's first
    instruction, so an end before this call is seen too, and it works wherever ``spawn`` does;
    Linux's ``prctl(PR_SET_PDEATHSIG)`` misses an end before the call (the parent pid has to be
    compared after it) and fires when the thread that started the worker ends, not the process."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not started by a supervisor
        return

    def watch() -> None:
        parent.join()
        log.warning("worker %d: its supervisor (pid %s) ended without stopping it; stopping as on SIGTERM",
                    k, parent.pid)
        os.kill(os.getpid(), signal.SIGTERM)  # the main thread's handler: the orderly stop of SIGTERM

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


def _thread_lock_for_progress_bars() -> None:
    """Give tqdm a thread lock before anything makes a bar (the model's encode makes a hidden one).

    tqdm's default lock holds a multiprocessing ``RLock``; in a spawned process that is a named
    semaphore registered with the resource tracker the workers share with their supervisor, and a
    worker killed (a crash, the out-of-memory killer, :meth:`Supervisor.stop`'s kill) never
    unregisters it: the supervisor then ended with ``resource_tracker: There appear to be 1 leaked
    semaphore objects``. A worker's bars are drawn by its own threads only."""
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def _interrupt_once(signum: int, frame: Any) -> None:
    """Stop a worker once: Ctrl+C reaches every process of the terminal and the supervisor sends
    SIGTERM too, and a second interrupt must not break the first one's orderly stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


class Supervisor:
    """Starts, watches and stops the workers of one ``docanchor serve --workers N``.

    Args:
        settings: the server's settings (``chroma_host`` set when ``workers`` > 1).
        sock: the listening socket every worker serves on.
        workers: how many worker processes.
        threads: threads of each worker.
    """

    def __init__(self, settings: Settings, sock: socket.socket, workers: int, threads: int) -> None:
        self.settings, self.sock, self.workers, self.threads = settings, sock, workers, threads
        self._mp = multiprocessing.get_context("spawn")
        self.procs: dict[int, Any] = {}
        self.ready: dict[int, Any] = {}
        self.counts = ConnectionCounts(workers)

    def start(self, k: int, resume_jobs: bool) -> None:
        self.ready[k] = self._mp.Event()
        self.counts.retire(k)  # a worker that ended held connections no more; the others take them until it serves
        proc = self._mp.Process(target=run_worker, name=f"docanchor-worker-{k}", args=(
            self.settings, self.sock, k, self.threads, resume_jobs, self.ready[k], logging.getLogger().level,
            self.counts))
        proc.start()
        self.procs[k] = proc

    def wait_ready(self, k: int) -> None:
        """Wait until worker ``k`` answers. Raises: DocAnchorError ``worker_failed`` when it ends first."""
        proc, ready = self.procs[k], self.ready[k]
        while not ready.wait(0.2):
            if not proc.is_alive():
                raise _failed(k, proc.exitcode)

    def watch(self) -> None:
        """Start again any worker that ends, until interrupted. Raises: DocAnchorError
        ``worker_failed`` when one ends before it has answered."""
        while True:
            wait([p.sentinel for p in self.procs.values()])
            for k, proc in list(self.procs.items()):
                if proc.is_alive():
                    continue
                if not self.ready[k].is_set():
                    raise _failed(k, proc.exitcode)
                log.warning("worker %d (pid %s) ended with exit code %s; starting it again", k, proc.pid,
                            proc.exitcode)
                self.start(k, resume_jobs=False)

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """SIGINT to every worker, then wait for each (at most ``wait_s`` seconds in all) and kill
        those still running."""
        import time

        for proc in self.procs.values():
            if proc.is_alive():
                proc.terminate()  # SIGTERM, which a worker takes as Ctrl+C
        deadline = time.monotonic() + wait_s
        for k, proc in self.procs.items():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.warning("worker %d (pid %s) did not stop in %.0f s; killed", k, proc.pid, wait_s)
                proc.kill()
                proc.join()


def _failed(k: int, exitcode: int | None) -> DocAnchorError:
    return DocAnchorError(f"Server worker {k} ended (exit code {exitcode}) before it could answer; its log lines "
                          "above say why.", code="worker_failed")


def serve_workers(settings: Settings, *, host: str, port: int, threads: int, workers: int) -> None:
    """Bind ``host:port``, start ``workers`` serving processes on it and watch them until SIGINT or
    SIGTERM (see the module's docstring).

    Raises:
        ConfigError: ``workers`` > 1 without a Chroma server (from the settings).
        Conflict: ``store_locked`` when another server holds the data dir (:mod:`plugin.lock`).
        DocAnchorError: ``address_in_use``; ``worker_failed`` when a worker ends before it answers.
    """
    if not settings.chroma_host:
        raise ConfigError(workers_need_server(workers))
    lock = DataDirLock(settings, "server").acquire()  # as one server: the CLI finds the address in it
    try:
        sock = listening_socket(host, port)
    except DocAnchorError:
        lock.release()
        raise
    seed_indexes(settings, workers)
    sup = Supervisor(settings, sock, workers, threads)
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        sup.start(0, resume_jobs=True)
        sup.wait_ready(0)
        lock.advertise(local_address(host, sock.getsockname()[1]))
        for k in range(1, workers):
            sup.start(k, resume_jobs=False)
        log.info("DocAnchor serving on %s:%d with %d workers of %d threads each (Ctrl+C stops)",
                 host, sock.getsockname()[1], workers, threads)
        sup.watch()
    except KeyboardInterrupt:
        log.info("stopping %d workers", workers)
    finally:
        signal.signal(signal.SIGTERM, previous)
        sup.stop()
        sock.close()
        lock.release()
