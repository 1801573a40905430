"""Even connections among the workers of ``docanchor serve --workers N`` (:mod:`plugin.workers`).

The workers accept from one listening socket: the kernel gives a new connection to whichever worker
calls ``accept()`` first, and a kept-alive connection stays with that worker for its life. Each
worker's request threads share one interpreter lock, so a worker holding more connections than the
others caps the rate of all their clients. waitress limits only a process's own connections
(``connection_limit``, a fixed number); here each worker writes how many connections it holds into
an array the workers share, and leaves the listening socket out of its poll while it holds more
than another serving worker: the next connection waits in the kernel's backlog for a worker that
holds fewer. The worker holding the fewest always accepts, so connections are never refused; with
connections opened one after another, no worker holds more than one above another.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from waitress.server import TcpWSGIServer

NOT_SERVING = -1
"""A worker's count while it starts, after it has stopped or ended: the others do not wait for it."""
POLL_S = 0.05
"""Longest wait, in seconds, of a balanced worker's poll: a worker that stopped accepting sees
another's count rise at least this often (waitress's own loop wakes once a second, and a connection
would wait that long in the backlog while the only worker allowed to accept it sleeps)."""


class ConnectionCounts:
    """The open connections of each worker, in an array shared by the supervisor and its spawned
    workers (pass it to the worker process as an argument).

    Args:
        workers: how many workers.
    """

    def __init__(self, workers: int) -> None:
        # unsynchronised: each slot has one writer (its worker, or the supervisor while it does not run),
        # and a reader that sees a count one step old at worst lets a connection land one off
        self.slots = multiprocessing.get_context("spawn").Array("i", [NOT_SERVING] * workers, lock=False)

    def publish(self, worker: int, connections: int) -> None:
        self.slots[worker] = connections

    def retire(self, worker: int) -> None:
        """Worker ``worker`` takes no connections (it is starting again, or stopped)."""
        self.slots[worker] = NOT_SERVING

    def may_accept(self, worker: int, connections: int) -> bool:
        """Whether ``worker``, holding ``connections``, may take another: it holds no more than any
        other serving worker (so the one holding the fewest always may)."""
        others = [n for k, n in enumerate(self.slots[:]) if k != worker and n != NOT_SERVING]
        return not others or connections <= min(others)


class BalancedServer(TcpWSGIServer):
    """waitress's TCP server on an already listening socket that accepts only while
    :meth:`ConnectionCounts.may_accept` allows, and publishes its open connections.

    Args:
        app: the WSGI app.
        sock: the listening socket the workers share.
        adj: waitress's ``Adjustments`` (threads, limits...).
        counts: the workers' shared counts.
        worker: this worker's index into ``counts``.
    """

    def __init__(self, app: Any, sock: Any, adj: Any, counts: ConnectionCounts, worker: int) -> None:
        self.counts, self.worker = counts, worker
        sockinfo = (sock.family, sock.type, sock.proto, sock.getsockname())
        super().__init__(app, {}, True, sock, adj=adj, bind_socket=False, sockinfo=sockinfo)
        counts.publish(worker, 0)

    def readable(self) -> bool:
        """Called by the loop before each poll: waitress's own checks, then the balance."""
        accepting = super().readable()
        held = len(self.active_channels)
        self.counts.publish(self.worker, held)
        return accepting and self.counts.may_accept(self.worker, held)

    def handle_accept(self) -> None:
        super().handle_accept()
        self.counts.publish(self.worker, len(self.active_channels))  # before another worker's next look

    def run(self) -> None:
        try:
            self.asyncore.loop(timeout=POLL_S, map=self._map, use_poll=self.adj.asyncore_use_poll)
        except (SystemExit, KeyboardInterrupt):
            self.task_dispatcher.shutdown()

    def close(self) -> None:
        self.counts.retire(self.worker)
        super().close()
