"""The ``docanchor`` group: global options, the run's :class:`Runtime`, logging, and the one place
where errors become a stderr line and an exit status.

Every command prints ``error <code>: <message>`` to stderr and exits 1 on a DocAnchor error,
never a traceback (``-v`` logs one). Tests inject a ready :class:`plugin.api.DocAnchor` through
click's ``obj`` (``CliRunner().invoke(main, args, obj=da)``); otherwise one is built lazily from
``DOCANCHOR_*`` variables and ``--data-dir``, so ``--help`` loads nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from docanchor.errors import DocAnchorError
from docanchor.settings import Settings

if TYPE_CHECKING:
    from plugin.api import DocAnchor
    from plugin.lock import DataDirLock

log = logging.getLogger("docanchor.cli")


class Runtime:
    """Settings and the DocAnchor instance of one CLI run, built on first use."""

    def __init__(self, data_dir: Path | None, namespace: str | None, injected: "DocAnchor | None") -> None:
        self.data_dir = data_dir
        self.namespace = namespace
        self.injected = injected

    @cached_property
    def settings(self) -> Settings:
        if self.injected is not None:
            return self.injected.settings
        overrides: dict[str, Any] = {"data_dir": self.data_dir} if self.data_dir else {}
        return Settings.from_env(**overrides)

    @cached_property
    def da(self) -> "DocAnchor":
        from plugin.api import DocAnchor

        return self.injected or DocAnchor(self.settings)

    def lock(self, holder: str) -> "DataDirLock":
        """The data-dir lock a write command holds (see :mod:`plugin.lock`)."""
        from plugin.lock import DataDirLock

        return DataDirLock(self.settings, holder)


class DocAnchorGroup(click.Group):
    """Turns DocAnchor errors (and crashes) into one stderr line and exit status 1.

    A closed pipe (``docanchor list | head -3``) is no error: it goes on to click, which ends the
    command quietly (exit status 1, nothing printed), as it does for ``--help``.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except DocAnchorError as err:
            if err.__cause__ is not None:
                log.debug("cause", exc_info=err)
            click.echo(f"error {err.code}: {cli_words(err.message)}", err=True)
            ctx.exit(1)
        except Exception as exc:  # no traceback for users; -v logs it
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise
            log.debug("crash", exc_info=True)
            click.echo(f"error internal: {DocAnchorError.default_message} (run with -v for details)", err=True)
            ctx.exit(1)


pass_rt = click.make_pass_decorator(Runtime)

_CLI_WORDS = (("'budget_tokens'", "--budget"), ("budget_tokens", "--budget"),
              ("upload one, then", "add documents with `docanchor ingest PATH`, then"))
"""Library argument names and the options the commands give them (the reader's ``start`` is
reworded by :func:`retrieval.read.reword_start` where ``read`` catches its errors)."""


def cli_words(message: str) -> str:
    """A library message in the command line's words: "raise budget_tokens" reads "raise --budget"."""
    for library, option in _CLI_WORDS:
        message = message.replace(library, option)
    return message


def _version(ctx: click.Context, wanted: bool) -> None:
    if not wanted or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        click.echo(f"docanchor {version('docanchor')}")
    except PackageNotFoundError:
        click.echo("docanchor (running from a source tree, not installed)")
    ctx.exit(0)


_LOG_HANDLER_NAME = "docanchor-cli"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is now (click's test runner swaps it per run)."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def configure_logging(level: int) -> None:
    """One stderr handler whose own level filters every logger (some libraries log DEBUG
    regardless of the root level)."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if h.get_name() == _LOG_HANDLER_NAME), None)
    if handler is None:
        handler = _StderrHandler()
        handler.set_name(_LOG_HANDLER_NAME)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    handler.setLevel(level)
    root.setLevel(level)


@click.group(cls=DocAnchorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the index lives (default: DOCANCHOR_DATA_DIR, else ./docanchor-data).")
@click.option("--namespace", help="The namespace to work in (default: DOCANCHOR_NAMESPACE, else 'default').")
@click.option("-v", "--verbose", is_flag=True, help="Log progress and tracebacks to stderr.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda c, p, v: _version(c, v),
              help="Show the version and exit.")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None, namespace: str | None, verbose: bool) -> None:
    """DocAnchor: long documents out of the chat — a small anchor in, cited sections out under a token budget."""
    configure_logging(logging.DEBUG if verbose else logging.WARNING)
    if not verbose:  # the model loader's own progress bars would bury DocAnchor's lines
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    api = sys.modules.get("plugin.api")  # an injected DocAnchor means it is imported; else stay light
    injected = ctx.obj if api is not None and isinstance(ctx.obj, api.DocAnchor) else None
    ctx.obj = Runtime(data_dir, namespace, injected)
