"""Functions the sandbox tests run in a worker (imported there by module name)."""

from __future__ import annotations

import os
import time


def burn_cpu(cpu_s: float) -> int:
    """Compute until this process has used ``cpu_s`` more seconds of CPU time; returns its pid."""
    end = time.process_time() + cpu_s
    n = 0
    while time.process_time() < end:
        n = (n * 31 + 7) % 1_000_003
    return os.getpid()
