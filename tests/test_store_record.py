"""A data dir remembers the store it belongs to (docanchor/store_record.py).

The real CLI on a data dir first written with a real ``chroma run``: later commands without the
Chroma settings use that server, and settings naming another store are refused before anything
is written; a data dir of embedded Chroma refuses a Chroma server the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docanchor.settings import Settings
from plugin.api import DocAnchor
from tests.conftest import CORPUS, REPO
from tests.fakes import HashEmbedder
from tests.live_server import free_port
from tests.waiting import BACKSTOP_S

pytestmark = [pytest.mark.server]

RECORD_NAME = "store.json"
"""The record's name in the data dir (docanchor.store_record.RECORD_NAME, spelt out so that the tests run on
earlier versions too)."""
OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"
NOTE = "# Quarry note\n\nThe quarry foreman logs each zephyrite cart in a green ledger.\n"


def cli(data_dir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The real CLI on ``data_dir`` with no ``DOCANCHOR_*`` variable but ``env``'s."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    full.update({"HF_HUB_OFFLINE": "1", **env})
    return subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(data_dir), *args], cwd=REPO,
                          env=full, input="", capture_output=True, text=True, timeout=BACKSTOP_S)


def chroma_env(host: str, port: int) -> dict[str, str]:
    return {"DOCANCHOR_CHROMA_HOST": host, "DOCANCHOR_CHROMA_PORT": str(port)}


@pytest.mark.e2e
def test_a_data_dir_used_with_a_chroma_server_remembers_it(chroma_server, tmp_path: Path) -> None:
    """Without the settings, ``status`` said "no index yet" and ``ingest`` made an embedded
    ``chroma/`` beside the Chroma server's BM25 index and job log: two stores in one data dir."""
    data = tmp_path / "data"
    namespace = {"DOCANCHOR_NAMESPACE": f"record {tmp_path.name}"}  # the session's server is shared
    first = cli(data, {**namespace, **chroma_env(chroma_server.host, chroma_server.port)}, "ingest", str(OWNERSHIP))
    assert first.returncode == 0 and first.stdout.startswith("ok doc_"), (first.stdout, first.stderr)

    status = cli(data, namespace, "status")
    assert status.returncode == 0, (status.stdout, status.stderr)
    assert "no index" not in status.stdout and "documents:  1\n" in status.stdout, status.stdout
    assert f"chroma server {chroma_server.host}:{chroma_server.port}" in status.stdout, status.stdout
    note = tmp_path / "quarry.md"
    note.write_text(NOTE)
    second = cli(data, namespace, "ingest", str(note))
    assert second.returncode == 0 and second.stdout.startswith("ok doc_"), (second.stdout, second.stderr)
    found = cli(data, namespace, "search", "who logs the zephyrite carts", "--budget", "300", "--json")
    assert found.returncode == 0, found.stderr
    assert "green ledger" in json.loads(found.stdout)["context"]
    assert not (data / "chroma").exists()  # no second store
    assert json.loads((data / RECORD_NAME).read_text()) == {
        "store": "chroma server", "chroma_host": chroma_server.host, "chroma_port": chroma_server.port}

    elsewhere = free_port()  # settings naming another Chroma server are refused before anything is written
    refused = cli(data, {**namespace, **chroma_env(chroma_server.host, elsewhere)}, "ingest", str(note))
    assert refused.returncode == 1 and refused.stdout == "", (refused.stdout, refused.stderr)
    assert refused.stderr == (
        f"error config_error: The data dir {data} belongs to the Chroma server at {chroma_server.host}:"
        f"{chroma_server.port} (recorded in {data / RECORD_NAME}), and this command is configured for the Chroma "
        f"server at {chroma_server.host}:{elsewhere}. Set DOCANCHOR_CHROMA_HOST={chroma_server.host} and "
        f"DOCANCHOR_CHROMA_PORT={chroma_server.port} (or unset both), or use another data dir (DOCANCHOR_DATA_DIR "
        f"or --data-dir); if that Chroma server moved, write its host and port into {data / RECORD_NAME}.\n")
    listed = cli(data, namespace, "list", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 2, listed.stdout


def test_an_embedded_data_dir_refuses_a_chroma_server(chroma_server, tmp_path: Path) -> None:
    """A data dir of embedded Chroma is not silently indexed anew on a Chroma server (its BM25
    index and job log describe the embedded documents): the CLI and the Python API say so."""
    data = tmp_path / "data"
    with DocAnchor(Settings(data_dir=data), embedder=HashEmbedder()) as da:
        da.ingest_text(NOTE, title="Quarry")
    server = chroma_env(chroma_server.host, chroma_server.port)
    for args in (("status",), ("list",), ("check",)):
        refused = cli(data, server, *args)
        assert refused.returncode == 1 and refused.stdout == "", (args, refused.stdout, refused.stderr)
        assert refused.stderr.startswith(
            f"error config_error: The data dir {data} keeps its index in embedded Chroma ({data / 'chroma'}), and "
            f"this command is configured for the Chroma server at {chroma_server.host}:{chroma_server.port}. Unset "
            "DOCANCHOR_CHROMA_HOST"), (args, refused.stderr)
    with pytest.raises(Exception) as refused:
        DocAnchor(Settings(data_dir=data, chroma_host=chroma_server.host, chroma_port=chroma_server.port))
    assert getattr(refused.value, "code", None) == "config_error", refused.value
    listed = cli(data, {}, "list")  # without the settings the data dir works as before
    assert listed.returncode == 0 and "Quarry" in listed.stdout, (listed.stdout, listed.stderr)
    assert json.loads((data / RECORD_NAME).read_text()) == {"store": "embedded"}


def test_a_data_dir_from_before_records_keeps_its_store(tmp_path: Path) -> None:
    """A data dir written before records existed: embedded Chroma there counts as its record, which
    the next writer writes down; a data dir never written gets its first writer's store."""
    data = tmp_path / "old"
    with DocAnchor(Settings(data_dir=data), embedder=HashEmbedder()) as da:
        da.ingest_text(NOTE, title="Quarry")
    (data / RECORD_NAME).unlink(missing_ok=True)
    with pytest.raises(Exception) as refused:
        DocAnchor(Settings(data_dir=data, chroma_host="127.0.0.1", chroma_port=free_port()))
    assert getattr(refused.value, "code", None) == "config_error", refused.value
    with DocAnchor(Settings(data_dir=data), embedder=HashEmbedder()) as da:
        da.ingest_text(NOTE + "More.\n", title="Quarry 2")
    assert json.loads((data / RECORD_NAME).read_text()) == {"store": "embedded"}
    fresh = tmp_path / "fresh"
    assert cli(fresh, {}, "status").returncode == 0
    assert not fresh.exists()  # reading commands create nothing, the record neither


@pytest.mark.parametrize("text", ["", "{", '{"store": "chroma server", "chroma_host": "h"}', "[]"])
def test_a_record_that_does_not_parse_is_a_config_error(tmp_path: Path, text: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / RECORD_NAME).write_text(text)
    refused = cli(data, {}, "status")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert refused.stderr.startswith(f"error config_error: {data / RECORD_NAME} does not say which store"), refused.stderr


def _record(data: Path, host: str, port: int) -> None:
    data.mkdir(parents=True, exist_ok=True)
    (data / RECORD_NAME).write_text(json.dumps({"store": "chroma server", "chroma_host": host, "chroma_port": port}))


@pytest.mark.parametrize(("recorded", "configured"), [("localhost", "127.0.0.1"), ("127.0.0.1", "LocalHost")])
def test_loopback_names_of_the_recorded_server_are_the_same_server(chroma_server, tmp_path: Path, recorded: str,
                                                                   configured: str) -> None:
    """Before (the trial of 3df9211, its defect 6): hosts were compared as text, so a data dir
    recorded with ``localhost`` refused ``127.0.0.1`` for the same ``chroma run`` (config_error)."""
    data = tmp_path / "data"
    _record(data, recorded, chroma_server.port)
    env = {"DOCANCHOR_NAMESPACE": f"loopback {tmp_path.name}", **chroma_env(configured, chroma_server.port)}
    status = cli(data, env, "status")
    assert status.returncode == 0, (status.stdout, status.stderr)
    assert f"chroma server {configured}:{chroma_server.port}" in status.stdout, status.stdout
    assert json.loads((data / RECORD_NAME).read_text())["chroma_host"] == recorded  # the record is kept as written


def test_a_port_set_without_a_host_is_a_port_of_the_recorded_host(chroma_server, tmp_path: Path) -> None:
    """Before (the trial of 3df9211, its defect 6): DOCANCHOR_CHROMA_PORT without
    DOCANCHOR_CHROMA_HOST was ignored on a data dir that records a server, whatever port it named.
    Now it names a port of the recorded host: the recorded port works, another one is refused with
    config_error before anything is written, as a whole other address is."""
    data = tmp_path / "data"
    _record(data, chroma_server.host, chroma_server.port)
    namespace = {"DOCANCHOR_NAMESPACE": f"port {tmp_path.name}"}
    same = cli(data, {**namespace, "DOCANCHOR_CHROMA_PORT": str(chroma_server.port)}, "status")
    assert same.returncode == 0, (same.stdout, same.stderr)
    assert f"chroma server {chroma_server.host}:{chroma_server.port}" in same.stdout, same.stdout
    elsewhere = free_port()
    note = tmp_path / "quarry.md"
    note.write_text(NOTE)
    for args in (("status",), ("ingest", str(note))):
        refused = cli(data, {**namespace, "DOCANCHOR_CHROMA_PORT": str(elsewhere)}, *args)
        assert refused.returncode == 1 and refused.stdout == "", (args, refused.stdout, refused.stderr)
        assert refused.stderr.startswith(
            f"error config_error: The data dir {data} belongs to the Chroma server at {chroma_server.host}:"
            f"{chroma_server.port} (recorded in {data / RECORD_NAME}), and this command is configured for the Chroma "
            f"server at {chroma_server.host}:{elsewhere}."), (args, refused.stderr)


def test_hosts_are_compared_as_addresses_without_a_lookup() -> None:
    from docanchor.store_record import same_host

    for a, b in [("localhost", "127.0.0.1"), ("::1", "[::1]"), ("0:0::1", "localhost"), ("127.0.0.1", "127.0.0.1."),
                 ("Chroma.Example.org.", "chroma.example.org"), ("fe80::1", "FE80:0::1")]:
        assert same_host(a, b) and same_host(b, a), (a, b)
    for a, b in [("10.0.0.1", "10.0.0.2"), ("chroma", "127.0.0.1"), ("chroma.example.org", "chroma.example.com"),
                 ("localhost", "10.0.0.1")]:
        assert not same_host(a, b), (a, b)


@pytest.mark.parametrize("configured", ["recorded", "localhost"])
def test_a_host_set_without_a_port_is_the_recorded_host_at_its_recorded_port(chroma_server, tmp_path: Path,
                                                                             configured: str) -> None:
    """Before (the trial of 3d88e0c, its defect 5): DOCANCHOR_CHROMA_HOST alone on a data dir
    recorded with another port than 8000 was refused as HOST:8000, while a port alone was taken as
    the recorded host's. Now the host alone, when it is the recorded host (by :func:`same_host`),
    uses the recorded port; another host alone is Chroma's default port, refused before anything
    is written."""
    data = tmp_path / "data"
    _record(data, chroma_server.host, chroma_server.port)
    if chroma_server.port == 8000:  # the default port would be the right one by chance
        pytest.skip("the session's chroma run listens on Chroma's default port")
    host = chroma_server.host if configured == "recorded" else "localhost"
    namespace = {"DOCANCHOR_NAMESPACE": f"host {tmp_path.name}"}
    note = tmp_path / "quarry.md"
    note.write_text(NOTE)
    for args in (("status",), ("ingest", str(note))):
        used = cli(data, {**namespace, "DOCANCHOR_CHROMA_HOST": host}, *args)
        assert used.returncode == 0, (args, used.stdout, used.stderr)
    status = cli(data, {**namespace, "DOCANCHOR_CHROMA_HOST": host}, "status")
    assert f"chroma server {host}:{chroma_server.port}" in status.stdout and "documents:  1\n" in status.stdout, \
        status.stdout
    refused = cli(data, {**namespace, "DOCANCHOR_CHROMA_HOST": "chroma.invalid"}, "ingest", str(note))
    assert refused.returncode == 1 and refused.stdout == "", (refused.stdout, refused.stderr)
    assert refused.stderr.startswith(
        f"error config_error: The data dir {data} belongs to the Chroma server at {chroma_server.host}:"
        f"{chroma_server.port} (recorded in {data / RECORD_NAME}), and this command is configured for the Chroma "
        "server at chroma.invalid:8000."), refused.stderr


def test_a_port_set_without_a_host_where_no_server_is_recorded_is_refused(tmp_path: Path) -> None:
    """Before (hdf's leftover, the trial of 3d88e0c): DOCANCHOR_CHROMA_PORT alone on an embedded
    data dir, or on one with nothing recorded, was ignored silently (the index went to embedded
    Chroma). A port names no server without a host: config_error, saying to set the host too or
    unset the port, before anything is written; the CLI and the Python API alike."""
    port = {"DOCANCHOR_CHROMA_PORT": "9123"}
    fresh = tmp_path / "fresh"
    note = tmp_path / "quarry.md"
    note.write_text(NOTE)
    for args in (("status",), ("ingest", str(note))):
        refused = cli(fresh, port, *args)
        assert refused.returncode == 1 and refused.stdout == "", (args, refused.stdout, refused.stderr)
        assert refused.stderr == (
            f"error config_error: DOCANCHOR_CHROMA_PORT=9123 is set without DOCANCHOR_CHROMA_HOST, and the data dir "
            f"{fresh} records no Chroma server, so the port names none. Set DOCANCHOR_CHROMA_HOST too to use the "
            "Chroma server at that port, or unset DOCANCHOR_CHROMA_PORT to keep the index in embedded Chroma.\n")
    assert not fresh.exists()
    with pytest.raises(Exception) as raised:
        DocAnchor(Settings(data_dir=fresh, chroma_port=9123), embedder=HashEmbedder())
    assert getattr(raised.value, "code", None) == "config_error", raised.value

    embedded = tmp_path / "embedded"
    with DocAnchor(Settings(data_dir=embedded), embedder=HashEmbedder()) as da:
        da.ingest_text(NOTE, title="Quarry")
    refused = cli(embedded, port, "list")
    assert refused.returncode == 1 and refused.stdout == "", (refused.stdout, refused.stderr)
    assert refused.stderr == (
        f"error config_error: DOCANCHOR_CHROMA_PORT=9123 is set without DOCANCHOR_CHROMA_HOST, and the data dir "
        f"{embedded} keeps its index in embedded Chroma ({embedded / 'chroma'}), which has no port. Unset "
        "DOCANCHOR_CHROMA_PORT to use it, or set DOCANCHOR_CHROMA_HOST too and use another data dir "
        "(DOCANCHOR_DATA_DIR or --data-dir) with the Chroma server.\n")
    listed = cli(embedded, {}, "list")
    assert listed.returncode == 0 and "Quarry" in listed.stdout, (listed.stdout, listed.stderr)
