"""The command line's edges: closed pipes, data dirs that hold no index, ``status``, ``--version``.

Real subprocesses where the behaviour lives in the process (pipes, the working directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from docanchor.settings import Settings
from plugin.api import DocAnchor
from tests.conftest import CORPUS, REPO
from tests.fakes import ModelNamedEmbedder

OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str]:
    """A data dir holding one document (fake vectors under the real model's name: read commands never embed)."""
    data = tmp_path / "data"
    with DocAnchor(Settings(data_dir=data), embedder=ModelNamedEmbedder()) as da:
        doc_id = da.ingest_file(OWNERSHIP).record.doc_id
    return data, doc_id


def into_closed_pipe(args: list[str], env: dict[str, str], cwd: Path = REPO) -> tuple[int, str]:
    """Run the CLI with its stdout read by nobody (``docanchor ... | true``): exit status, stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command writes (it is still importing)
    err = proc.stderr.read().decode(errors="replace")
    return proc.wait(timeout=600), err


def test_a_closed_pipe_ends_every_command_quietly(stored):
    """Regression: `docanchor list | true` printed 'error internal ... report it if it repeats'."""
    data, doc_id = stored
    for args in (["list"], ["list", "--json"], ["anchor", doc_id], ["read", doc_id, "--budget", "2000"], ["--help"]):
        status, err = into_closed_pipe(["--data-dir", str(data), *args], cli_env())
        assert err == "", (args, err)
        assert status == 1, (args, status)  # click's convention for EPIPE; nothing is printed
