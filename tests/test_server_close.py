"""Stopping a real waitress server while a request is being answered (a loopback port, a WSGI app
that holds its request until the test lets it go): the request is answered, the server's loop
thread ends, and nothing is logged as an error -- waitress's own ``close()`` closed the wake-up
pipe under a handler thread, which then logged ``OSError: [Errno 9] Bad file descriptor``."""

from __future__ import annotations

import logging
import threading
import urllib.request

from tests.waiting import BACKSTOP_S, wait_until


def test_closing_a_server_while_a_handler_answers_is_quiet(caplog):
    from waitress import create_server

    from plugin.serve import close_server

    entered, release = threading.Event(), threading.Event()

    def app(environ, start_response):
        entered.set()
        release.wait(BACKSTOP_S)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"answered"]

    server = create_server(app, host="127.0.0.1", port=0, threads=2)
    loop = threading.Thread(target=server.run, daemon=True)
    loop.start()
    # both handler threads idle before the request: one still starting counts as busy, and waitress
    # then logs "Task queue depth is 1" on the request (seen on a loaded machine in CI)
    wait_until(lambda: server.task_dispatcher.active_count == 0, "the handler threads to be idle")
    answers: list[object] = []

    def get() -> None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.effective_port}/", timeout=BACKSTOP_S) as resp:
                answers.append((resp.status, resp.read()))
        except OSError as exc:  # the old close: the connection is cut
            answers.append(exc)

    client = threading.Thread(target=get, daemon=True)
    client.start()
    assert entered.wait(BACKSTOP_S)
    with caplog.at_level(logging.WARNING, logger="waitress"):
        closer = threading.Thread(target=close_server, args=(server, loop), daemon=True)
        closer.start()
        # the close has begun: no new handler threads (or, closed at once, no listening socket)
        wait_until(lambda: server.task_dispatcher.stop_count > 0 or not server.accepting, "the close to begin")
        release.set()
        closer.join(BACKSTOP_S)
        client.join(BACKSTOP_S)
        wait_until(lambda: server.task_dispatcher.active_count == 0, "the handler thread to finish its task")
    errors = [r.getMessage() for r in caplog.records if r.name.startswith("waitress") and r.levelno >= logging.WARNING]
    assert errors == []
    assert answers == [(200, b"answered")]
    loop.join(BACKSTOP_S)
    assert not loop.is_alive() and not closer.is_alive()
