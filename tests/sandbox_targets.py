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


_reserved: list = []


def reserve_address_space(n_bytes: int) -> int:
    """Reserve ``n_bytes`` of address space without memory behind it (an inaccessible anonymous
    mapping, as glibc reserves for each thread's malloc arena), kept for the worker's life;
    returns the worker's pid."""
    import mmap

    _reserved.append(mmap.mmap(-1, n_bytes, flags=mmap.MAP_PRIVATE, prot=0))  # PROT_NONE (no name before 3.13)
    return os.getpid()


def allocate(n_bytes: int) -> int:
    """Allocate and touch ``n_bytes``; returns how many."""
    return len(bytearray(n_bytes))
