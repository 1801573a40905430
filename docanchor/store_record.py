"""Which store a data dir belongs to, recorded once in ``<data_dir>/store.json``.

A data dir's BM25 index, job log and ingest marks describe the documents of one store: embedded
Chroma (``<data_dir>/chroma``) or one Chroma server. The first process that writes to a data dir
(it takes the data dir's lock, :mod:`plugin.lock`) records the store its settings name
(:func:`claim`). Later, settings that name no Chroma server follow the record (:func:`follow`:
a command without ``DOCANCHOR_CHROMA_HOST`` uses the recorded server), and settings that name
another store are refused with ``config_error``, so a data dir never gets a second store.

The record is one JSON object: ``{"store": "embedded"}`` or ``{"store": "chroma server",
"chroma_host": "127.0.0.1", "chroma_port": 8000}``; a Chroma server that moved is told to the data
dir by editing it. A data dir written before records existed holds none: an embedded ``chroma``
folder there counts as the record ``embedded``, and otherwise the next writer's settings are
recorded.

Hosts are compared as addresses, not as text (:func:`same_host`): every loopback name
(``localhost``, ``127.0.0.1``, ``::1``) is this machine; other names are compared without case and
never looked up (the Chroma client resolves them when it connects). One half of an address is
completed from the record, either way: ``DOCANCHOR_CHROMA_PORT`` without ``DOCANCHOR_CHROMA_HOST``
names a port of the recorded host, and ``DOCANCHOR_CHROMA_HOST`` without ``DOCANCHOR_CHROMA_PORT``
naming the recorded host means its recorded port (another host gets Chroma's default port); the
whole address is then checked like any other. A port alone where no server is recorded names no
server, and is refused rather than ignored.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from docanchor.disk import replaced_atomically
from docanchor.errors import ConfigError, sentences
from docanchor.settings import Settings

RECORD_NAME = "store.json"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreRecord:
    """A store: ``chroma_host`` and ``chroma_port`` of a Chroma server, or ``None`` and 0 for embedded Chroma."""

    chroma_host: str | None = None
    chroma_port: int = 0

    @classmethod
    def of(cls, settings: Settings) -> "StoreRecord":
        """The store ``settings`` name."""
        return cls(settings.chroma_host, settings.chroma_server_port) if settings.chroma_host else cls()

    def __str__(self) -> str:
        """``embedded`` or ``chroma server HOST:PORT`` (``GET /v1/status``'s ``store``)."""
        return f"chroma server {self.chroma_host}:{self.chroma_port}" if self.chroma_host else "embedded"

    def as_json(self) -> dict:
        if self.chroma_host is None:
            return {"store": "embedded"}
        return {"store": "chroma server", "chroma_host": self.chroma_host, "chroma_port": self.chroma_port}

    def same(self, other: "StoreRecord") -> bool:
        """Whether both name the same store: embedded both, or the same port of the same host (:func:`same_host`)."""
        if self.chroma_host is None or other.chroma_host is None:
            return self.chroma_host is other.chroma_host
        return self.chroma_port == other.chroma_port and same_host(self.chroma_host, other.chroma_host)


def same_host(a: str, b: str) -> bool:
    """Whether the host names ``a`` and ``b`` name one machine without a DNS lookup: both loopback
    (``localhost`` or a name under it, RFC 6761; an address of ``127.0.0.0/8`` or ``::1``,
    RFC 6890), the same IP address however written (``::1`` and ``0:0::1``, ``[::1]``), or the
    same name without case and without a final dot."""
    return _host_key(a) == _host_key(b)


def _host_key(host: str) -> str:
    name = host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback"
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name
    return "loopback" if address.is_loopback else address.compressed


def store_name(settings: Settings) -> str:
    """The store ``settings`` name, in words: ``embedded`` or ``chroma server HOST:PORT``."""
    return str(StoreRecord.of(settings))


def record_path(data_dir: Path) -> Path:
    return Path(data_dir) / RECORD_NAME


def recorded(data_dir: Path) -> StoreRecord | None:
    """The store ``data_dir`` belongs to: its record, else embedded when it holds embedded Chroma
    (written before records existed), else ``None`` (nothing written there yet). Creates nothing.

    Raises:
        ConfigError: the record is not one DocAnchor writes (naming the file and what to write).
    """
    path = record_path(data_dir)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return StoreRecord() if (Path(data_dir) / "chroma").is_dir() else None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror}); DocAnchor reads there which store the data dir "
                          "belongs to.", data_dir=str(data_dir)) from None
    try:
        body = json.loads(raw)
        if body.get("store") == "embedded":
            return StoreRecord()
        host, port = body["chroma_host"], body["chroma_port"]
        if body.get("store") == "chroma server" and isinstance(host, str) and host.strip() and type(port) is int:
            return StoreRecord(host.strip(), port)
    except (ValueError, AttributeError, KeyError):
        pass
    raise ConfigError(f"{path} does not say which store the data dir belongs to; it should hold "
                      '{"store": "embedded"} or {"store": "chroma server", "chroma_host": "HOST", "chroma_port": '
                      "PORT}.", data_dir=str(data_dir))


def follow(settings: Settings) -> Settings:
    """``settings`` with the data dir's Chroma server filled in where they leave it out, marked as
    read from it (``chroma_recorded_in``, which the error sentences name): its host and port when
    they name no host (a command without ``DOCANCHOR_CHROMA_HOST`` on a data dir a Chroma server's
    documents are indexed in), the recorded host with a port set alone, the recorded port with the
    recorded host set alone (:func:`same_host`); otherwise ``settings`` as they are. The address is
    then checked against the record (:func:`check`). Creates nothing.

    Raises:
        ConfigError: ``settings`` name a Chroma server the data dir does not belong to (see
            :func:`check`; a port alone that is not the recorded one too), a port without a host
            where no Chroma server is recorded (:func:`port_without_host`), or the record is
            unreadable (:func:`recorded`).
    """
    record = recorded(settings.data_dir)
    if not settings.chroma_host and settings.chroma_port is not None and (record is None or record.chroma_host is None):
        raise port_without_host(settings, record)
    if record is None:
        return settings
    if record.chroma_host is not None and not settings.chroma_host:
        port = record.chroma_port if settings.chroma_port is None else settings.chroma_port
        settings = settings.with_(chroma_host=record.chroma_host, chroma_port=port,
                                  chroma_recorded_in=record_path(settings.data_dir))
    elif (record.chroma_host is not None and settings.chroma_port is None
          and same_host(settings.chroma_host, record.chroma_host)):  # type: ignore[arg-type]
        settings = settings.with_(chroma_port=record.chroma_port, chroma_recorded_in=record_path(settings.data_dir))
    check(settings, record)
    return settings


def port_without_host(settings: Settings, record: StoreRecord | None) -> ConfigError:
    """The refusal of ``DOCANCHOR_CHROMA_PORT`` set without ``DOCANCHOR_CHROMA_HOST`` on a data dir
    whose ``record`` names no Chroma server (embedded, or ``None``: nothing written yet): the port
    names no server there, and ignoring it would index into another store than the one meant."""
    data_dir, port = settings.data_dir, settings.chroma_port
    lead = f"DOCANCHOR_CHROMA_PORT={port} is set without DOCANCHOR_CHROMA_HOST"
    if record is None:
        message = sentences(
            f"{lead}, and the data dir {data_dir} records no Chroma server, so the port names none",
            "Set DOCANCHOR_CHROMA_HOST too to use the Chroma server at that port, or unset DOCANCHOR_CHROMA_PORT to "
            "keep the index in embedded Chroma")
    else:
        message = sentences(
            f"{lead}, and the data dir {data_dir} keeps its index in embedded Chroma "
            f"({Path(data_dir) / 'chroma'}), which has no port",
            "Unset DOCANCHOR_CHROMA_PORT to use it, or set DOCANCHOR_CHROMA_HOST too and use another data dir "
            "(DOCANCHOR_DATA_DIR or --data-dir) with the Chroma server")
    return ConfigError(message, data_dir=str(data_dir), recorded=str(record) if record else None,
                       chroma_port=port)


def claim(settings: Settings) -> None:
    """Record the store ``settings`` name when the data dir has no record yet (its first writer,
    holding the data dir's lock); else check that they name the recorded one. A record that
    cannot be written (a full disk) is logged and not retried until the next writer.

    Raises:
        ConfigError: ``settings`` name another store than the data dir's (:func:`check`).
    """
    record = recorded(settings.data_dir)
    if record is not None:
        check(settings, record)
        if record_path(settings.data_dir).exists():
            return
    path = record_path(settings.data_dir)
    try:
        with replaced_atomically(path) as partial:
            partial.write_text(json.dumps(StoreRecord.of(settings).as_json()) + "\n", encoding="utf-8")
    except OSError as exc:
        log.warning("cannot record the data dir's store in %s (%s)", path, exc.strerror)


def check(settings: Settings, record: StoreRecord) -> None:
    """That ``settings`` name ``record``'s store (:meth:`StoreRecord.same`).

    Raises:
        ConfigError: they do not; the message names both stores and what to set.
    """
    mine = StoreRecord.of(settings)
    if mine.same(record):
        return
    data_dir, path = settings.data_dir, record_path(settings.data_dir)
    another = "use another data dir (DOCANCHOR_DATA_DIR or --data-dir)"
    if record.chroma_host is None:
        message = sentences(
            f"The data dir {data_dir} keeps its index in embedded Chroma ({Path(data_dir) / 'chroma'}), and this "
            f"command is configured for the Chroma server at {mine.chroma_host}:{mine.chroma_port}",
            f"Unset DOCANCHOR_CHROMA_HOST to use the data dir, or {another} with the Chroma server (embedded "
            "documents are not moved to a server: ingest them again there)")
    else:
        at = f"{record.chroma_host}:{record.chroma_port}"
        configured = ("embedded Chroma" if mine.chroma_host is None
                      else f"the Chroma server at {mine.chroma_host}:{mine.chroma_port}")
        message = sentences(
            f"The data dir {data_dir} belongs to the Chroma server at {at} (recorded in {path}), and this command is "
            f"configured for {configured}",
            f"Set DOCANCHOR_CHROMA_HOST={record.chroma_host} and DOCANCHOR_CHROMA_PORT={record.chroma_port} (or unset "
            f"both), or {another}; if that Chroma server moved, write its host and port into {path}")
    raise ConfigError(message, data_dir=str(data_dir), recorded=str(record), configured=str(mine))
