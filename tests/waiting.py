"""How tests wait: for a state, never for a duration.

Tests assert behaviour. How long something takes is a performance figure, measured and printed
by the scripts in ``bench/`` (``bench/time_targets.py``, ``bench/corpus_report.py``), never
asserted by a test. A test that has to wait for something -- a server answering, an ingest job
ending, a thread reaching a point -- polls for that state with :func:`wait_until` (or waits on an
event) and gives up only after :data:`BACKSTOP_S`: a backstop against hangs, long enough that a
2-core machine at load average 10 stays far inside it whenever nothing is stuck.

Every timeout in the suite is one of these: subprocess and socket timeouts, ``wait_s`` of an
upload, job waits, Playwright waits, the Node contract scripts, and pytest-timeout's per-test
limit (``[tool.pytest.ini_options] timeout`` in pyproject.toml, a few backstops long).
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

BACKSTOP_S = 600.0
"""Seconds one wait may last before the test fails as hung (10 minutes; not a performance figure)."""
BACKSTOP_MS = int(BACKSTOP_S * 1000)
""":data:`BACKSTOP_S` in milliseconds, for Playwright."""
POLL_S = 0.1
"""Seconds between two checks of :func:`wait_until`."""
ENDED = ("done", "failed", "cancelled")
"""Statuses of an ingest job that has ended."""


def wait_until(check: Callable[[], T], what: str, timeout_s: float = BACKSTOP_S, interval_s: float = POLL_S) -> T:
    """Call ``check()`` until it returns something truthy, and return that.

    Args:
        check: the state to wait for; called at once, then every ``interval_s`` seconds. An
            exception it raises ends the wait (a server that died is not going to answer).
        what: what is awaited, for the failure message ("the server to answer /healthz").
        timeout_s: the backstop, in seconds.
        interval_s: seconds between two calls.

    Raises:
        AssertionError: ``check()`` stayed falsy for ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"gave up after {timeout_s:g} s waiting for {what} (last seen: {value!r})")
        time.sleep(interval_s)


def job_ended(fetch: Callable[[], dict], what: str = "the ingest job to end") -> dict:
    """Poll ``fetch()`` -- a job's JSON, e.g. ``GET /v1/jobs/<job_id>`` -- until its ``status``
    is one of :data:`ENDED`; return that JSON.

    Raises:
        AssertionError: not ended after :data:`BACKSTOP_S`; the message holds the job as last seen.
    """
    seen: list[dict] = [{}]

    def ended() -> dict | None:
        seen[0] = fetch()
        return seen[0] if seen[0].get("status") in ENDED else None

    try:
        return wait_until(ended, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the job: {seen[0]}") from None
