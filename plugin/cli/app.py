"""The ``docanchor`` group: global options, the run's :class:`Runtime`, logging, and the one place
where errors become a stderr line and an exit status.

Every command prints ``error <code>: <message>`` to stderr and exits 1 on a DocAnchor error,
never a traceback (``-v`` logs one). A command given ``--json`` (:func:`json_option`) prints the
error as the HTTP API's error body instead (:meth:`docanchor.errors.DocAnchorError.to_body`, one
line on stderr; a usage error names its parameter in ``details.field``, :func:`usage_error`), with
the same exit status: 1, or click's 2 for a usage error (a bad ``--namespace`` too). A closed
standard output ends the command quietly with 141 (:func:`closed_pipe`). Tests inject a
ready :class:`plugin.api.DocAnchor` through click's ``obj``
(``CliRunner().invoke(main, args, obj=da)``); otherwise one is built lazily from ``DOCANCHOR_*``
variables and ``--data-dir``, so ``--help`` loads nothing.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from docanchor.display import plural
from docanchor.errors import ConfigError, DocAnchorError, InvalidRequest, NotFound, sentences
from docanchor.settings import Settings

if TYPE_CHECKING:
    from plugin.api import DocAnchor
    from plugin.cli.local import Local
    from plugin.cli.remote import Server
    from plugin.lock import Holder

    Backend = Local | Server

log = logging.getLogger("docanchor.cli")


class Runtime:
    """Settings and the DocAnchor instance of one CLI run, built on first use."""

    def __init__(self, data_dir: Path | None, namespace_option: str | None, injected: "DocAnchor | None",
                 verbose: bool = False) -> None:
        self.data_dir = data_dir
        self.namespace_option = namespace_option
        self.injected = injected
        self.verbose = verbose

    @cached_property
    def namespace(self) -> str | None:
        """The namespace the command names (:func:`named_namespace`), checked on first use: inside the
        command, so that a refusal is printed as the command's ``--json`` asks.

        Raises:
            click.BadParameter: a bad ``--namespace`` is a usage error (exit status 2), reported as the
                ``invalid_namespace`` it causes (:func:`usage_error`).
            InvalidRequest: ``invalid_namespace`` for a bad ``DOCANCHOR_NAMESPACE`` (exit status 1).
        """
        try:
            return named_namespace(self.namespace_option)
        except InvalidRequest as err:
            if self.namespace_option is None:
                raise
            raise click.BadParameter(err.message, param_hint="--namespace") from err

    @cached_property
    def settings(self) -> Settings:
        """The run's settings: ``DOCANCHOR_*`` and ``--data-dir``, with the Chroma server the data dir
        belongs to when they name none (:func:`docanchor.store_record.follow`).

        Raises:
            ConfigError: a bad variable, or settings naming another store than the data dir's.
        """
        if self.injected is not None:
            settings = self.injected.settings
        else:
            from docanchor.store_record import follow

            overrides: dict[str, Any] = {"data_dir": self.data_dir} if self.data_dir else {}
            settings = follow(Settings.from_env(**overrides))
        if settings.log_level and not self.verbose:  # -v wins over DOCANCHOR_LOG_LEVEL
            configure_logging(logging.getLevelName(settings.log_level.upper()))
        return settings

    def log_level(self, default: int) -> int:
        """The level to log at: DEBUG with ``-v``, else ``DOCANCHOR_LOG_LEVEL``, else ``default``."""
        if self.verbose:
            return logging.DEBUG
        return logging.getLevelName(self.settings.log_level.upper()) if self.settings.log_level else default

    @cached_property
    def da(self) -> "DocAnchor":
        from plugin.api import DocAnchor

        return self.injected or DocAnchor(self.settings)

    def backend(self, writer: str | None = None, *, creates: bool = False, missing_ok: bool = False) -> "Backend":
        """Where this command's work goes: the API of a server running on the data dir (its address
        is in the data dir's lock), else the data dir itself, in this process.

        Args:
            writer: the command's name when it writes; it then holds the data dir (see :mod:`plugin.lock`).
            creates: the command may create the index (``ingest``); others refuse a data dir without one.
            missing_ok: a data dir without an index reads as empty instead of an error (``ingest --dry-run``).

        Raises:
            Conflict: ``store_locked`` when another process (not a server that says its address) holds it.
            NotFound: ``no_index`` when the data dir holds no index and the command may not create one.
        """
        if self.injected is not None:
            return self._local(self.injected, writer)
        from plugin.lock import current_holder

        holder = current_holder(self.settings)
        if holder is not None and holder.name == "server" and holder.address:
            from plugin.cli.remote import Server, api_key

            return Server(holder, self.namespace, api_key())
        from docanchor.store import index_exists

        exists = index_exists(self.settings)
        if not exists and not (creates or missing_ok):
            raise no_index(self.settings.data_dir)
        return self._local(self.da, writer, exists or creates)

    def check_local_index(self, writer: str | None = None) -> None:
        """For a command that opens the index in this process (``check``, ``reindex``): that there is
        one to open, and for a ``writer`` (``reindex``, ``check --repair``) that no other process
        holds the data dir, said first. Creates nothing.

        Raises:
            Conflict: ``store_locked`` for a ``writer`` while another process holds the data dir.
            ConfigError: ``config_error`` when a server runs on the data dir with a Chroma server
                that this process's settings do not name (:func:`elsewhere`).
            NotFound: ``no_index`` when the data dir holds no index.
        """
        from docanchor.store import index_exists
        from plugin.lock import current_holder, refusal

        if self.injected is not None:
            return
        holder = current_holder(self.settings)
        if writer and holder is not None:
            raise refusal(holder, writer)
        if index_exists(self.settings):
            return
        if holder is not None and holder.name == "server" and holder.address:
            raise elsewhere(holder, self.namespace)
        raise no_index(self.settings.data_dir)

    def _local(self, da: "DocAnchor", writer: str | None, exists: bool = True) -> "Backend":
        from plugin.cli.local import Local

        if writer:
            da.hold_data_dir(writer)
        return Local(da, self.namespace, exists)


def elsewhere(holder: Holder, namespace: str | None) -> ConfigError:
    """The error of a command that must open the index in this process while the server holding the
    data dir keeps it on a Chroma server this process's settings do not name: the Chroma server's
    address as the server's ``GET /v1/status`` gives it (``store``), when it answers."""
    from plugin.cli.remote import Server, api_key

    try:
        store = str(Server(holder, namespace, api_key()).status().get("store", ""))
    except DocAnchorError:
        store = ""
    host, _, port = store.removeprefix("chroma server ").rpartition(":")
    named = f" ({host} and {port})" if store.startswith("chroma server ") and host else ""
    return ConfigError(f"The server running on this data dir (pid {holder.pid}) at {holder.address} keeps its index "
                       "on a Chroma server that this command is not configured for; set DOCANCHOR_CHROMA_HOST and "
                       f"DOCANCHOR_CHROMA_PORT as the server has them{named} and run it again.",
                       server=holder.address, **({"store": store} if store else {}))


def no_index(data_dir: Path) -> NotFound:
    """The error of a command that needs an index where there is none (nothing is created)."""
    return NotFound(f"There is no DocAnchor index in {data_dir} (nothing was ingested there); ingest documents with "
                    "'docanchor ingest PATH', or point --data-dir or DOCANCHOR_DATA_DIR at an existing data dir.",
                    code="no_index", data_dir=str(data_dir))


class DocAnchorCommand(click.Command):
    """A command whose usage errors know it: click's parser raises some without their context
    (``Option '--from' requires an argument``), which :func:`usage_error` needs to name the
    parameter and the command's ``--help``; and arguments it does not take (``status extra``) are
    refused here, in click's words, with the arguments kept (``extra_args``) for ``details.field``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_extra, ctx.allow_extra_args = ctx.allow_extra_args, True
        try:
            rest = super().parse_args(ctx, args)
        except click.UsageError as exc:
            exc.ctx = exc.ctx or ctx
            raise
        finally:
            ctx.allow_extra_args = takes_extra
        if ctx.args and not takes_extra and not ctx.resilient_parsing:
            extra = click.UsageError(f"Got unexpected extra {plural('argument', len(ctx.args))} "
                                     f"({' '.join(ctx.args)})", ctx)
            extra.extra_args = list(ctx.args)  # type: ignore[attr-defined]
            raise extra
        return rest


class DocAnchorGroup(click.Group):
    """Turns DocAnchor errors (and crashes) into one stderr line and exit status 1 (see
    :func:`report_error`), and a command's usage errors (``search x --budget 0``) into the same
    line, ``error invalid_argument: ...``, with click's exit status 2 (README, "Command line"),
    and so are usage errors in the group's own options (``docanchor --bogus``, :meth:`parse_args`).
    ``--json`` anywhere on the command line (before a ``--``) prints them as JSON, even when the
    usage error comes before the command's ``--json`` is read.

    A closed pipe (``docanchor list | head -3``, also under ``--help``) is no error: the command ends
    quietly with exit status 141 (:func:`closed_pipe`).
    """

    command_class = DocAnchorCommand
    group_class = type  # `docanchor context` is a DocAnchorGroup too

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--json" in (args[:args.index("--")] if "--" in args else args):
            ctx.meta[JSON_ERRORS] = True
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `docanchor` alone prints its help
        except click.UsageError as exc:  # `docanchor --bogus`: the one line of a command's usage error
            report_error(usage_error(exc, ctx), ctx.meta.get(JSON_ERRORS, False))
            ctx.exit(exc.exit_code)
        except OSError as exc:  # `docanchor --help | head -3`
            if exc.errno != errno.EPIPE:
                raise
            ctx.exit(closed_pipe())

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.exceptions.NoArgsIsHelpError):
            raise  # `docanchor context` alone prints its help, as --help does
        except click.ClickException as exc:  # a usage error (--budget 0): one line too, exit status 2
            report_error(usage_error(exc), ctx.meta.get(JSON_ERRORS, False))
            ctx.exit(exc.exit_code)
        except DocAnchorError as err:
            if err.__cause__ is not None:
                log.debug("cause", exc_info=err)
            report_error(err, ctx.meta.get(JSON_ERRORS, False))
            ctx.exit(1)
        except Exception as exc:  # no traceback for users; -v logs it
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                ctx.exit(closed_pipe())
            log.debug("crash", exc_info=True)
            crash = DocAnchorError(sentences(DocAnchorError.default_message, "Run it again with -v for details"))
            report_error(crash, ctx.meta.get(JSON_ERRORS, False))
            ctx.exit(1)


CLOSED_PIPE_EXIT = 128 + signal.SIGPIPE
"""The exit status of a command whose standard output was closed (141): what a shell reports for
``ls``, ``git log`` or ``yes`` piped into ``head`` (they die of SIGPIPE). Not 0, since the command did
not finish (an ``ingest`` stops at its next line); not click's 1, which reads as an error."""


def closed_pipe() -> int:
    """End quietly after a write to a closed pipe: standard output and error are pointed at
    ``/dev/null``, so that Python's flush at exit fails no more (it would print ``Exception ignored
    ... BrokenPipeError`` and exit 120). Returns :data:`CLOSED_PIPE_EXIT`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):  # not a real file (click's test runner): nothing to flush
            pass
    os.close(devnull)
    return CLOSED_PIPE_EXIT


def usage_error(exc: click.ClickException, ctx: click.Context | None = None) -> DocAnchorError:
    """A usage error as DocAnchor's error: ``invalid_argument`` with click's message and where the
    command's usage is (:func:`_usage_sentence`), and in ``details.field`` the parameter it is about
    -- its name as the command passes it on, which is the HTTP API's field where there is one
    (``--budget`` is ``budget_tokens``; an argument is its name, ``query``), else an unknown option or
    an extra argument as typed (``--bogus``, ``extra``). The DocAnchor error behind a refused option value (``--namespace ""``:
    :attr:`Runtime.namespace`) is that error itself (``invalid_namespace``, its own sentence)."""
    if isinstance(exc.__cause__, DocAnchorError):
        return exc.__cause__
    field = _usage_field(exc)
    return InvalidRequest(_usage_sentence(exc, ctx), code="invalid_argument", **({"field": field} if field else {}))


def _usage_field(exc: click.ClickException) -> str | None:
    """The parameter a usage error names (see :func:`usage_error`), an argument the command does not
    take as typed (the first, :class:`DocAnchorCommand`), or ``None`` (``Missing command``)."""
    extra = getattr(exc, "extra_args", None)
    if extra:
        return extra[0]
    param = getattr(exc, "param", None)
    if param is not None and param.name:
        return param.name
    option = getattr(exc, "option_name", None)
    if not option:
        return None
    where = getattr(exc, "ctx", None)
    params = where.command.params if where is not None else []
    return next((p.name for p in params if option in p.opts and p.name), option)


def _usage_sentence(exc: click.ClickException, ctx: click.Context | None = None) -> str:
    """Click's message of a usage error and where the command's usage is (the line click's own
    usage text ends with: ``Try '<command> --help' for help.``): the error's command, else
    ``ctx``'s (click names none for an option missing its value, ``docanchor --data-dir``)."""
    where = getattr(exc, "ctx", None) or ctx
    return sentences(exc.format_message(), f"See `{where.command_path} --help`" if where is not None else "")


JSON_ERRORS = "docanchor.json_errors"
"""``click.Context.meta`` key (shared by a command's context and its group's): the command was
given ``--json``, so its errors are printed as JSON (:func:`json_option`)."""


def json_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The ``--json`` flag of a command (passed as ``as_json``): its answer, and its errors, as JSON.

    The flag is eager (read before the command's other options), so that a usage error in them
    is printed as JSON too."""

    def remember(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        if value:
            ctx.meta[JSON_ERRORS] = True
        return value

    return click.option("--json", "as_json", is_flag=True, is_eager=True, callback=remember, help=help)


def report_error(err: DocAnchorError, as_json: bool) -> None:
    """Print ``err`` on stderr in the command line's words (:func:`cli_words`): the line
    ``error <code>: <message>``, or with ``as_json`` the HTTP API's error body
    ``{"error": {"code", "message", "status", "details"}}`` on one line."""
    message = cli_words(err.message)
    if not as_json:
        click.echo(f"error {err.code}: {message}", err=True)
        return
    body = err.to_body()
    body["error"]["message"] = message
    click.echo(json.dumps(body, ensure_ascii=False, default=str), err=True)


def pass_rt(command: Callable[..., Any]) -> Callable[..., Any]:
    """Pass the run's :class:`Runtime` to ``command`` as its first argument, after checking the
    namespace it names (a bad ``--namespace`` is refused before the command starts, in the shape
    its ``--json`` asks for)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        rt = ctx.find_object(Runtime)
        rt.namespace  # noqa: B018 -- checked now (named_namespace raises invalid_namespace)
        return ctx.invoke(command, rt, *args, **kwargs)

    return run


_CLI_WORDS = (("'budget_tokens'", "--budget"), ("budget_tokens", "--budget"), ("'from'", "--from"),
              ("from=", "--from "), ("upload one, then", "add documents with `docanchor ingest PATH`, then"),
              ("send context_limit, the model's window in tokens, with the request",
               "pass --context-limit TOKENS, the model's window in tokens (or context_limit in FILE.json)"),
              ("'context_limit'", "--context-limit"))
"""Library and HTTP words and the command line's: argument names and the options the commands
give them (the reader's ``start`` is reworded by :func:`retrieval.read.start_error`: by ``read``
in this process, by the server as ``'from'`` and ``from=`` when the command went through its API;
a context request's ``context_limit``, :func:`docanchor.errors.unknown_model` and
:func:`retrieval.assembly.pressure.check_context_limit`, is ``docanchor context``'s
``--context-limit``, which overrides FILE.json's), and "upload" where the command line ingests
(:data:`_UPLOAD_VERB` does the rest)."""
_UPLOAD_VERB = re.compile(r"\b(re-)?([Uu])pload(?= (?:it|that|them|those|the|a|an)\b)")
""""upload" as the verb of a library sentence telling the user to send a file (again): "upload it
again", "re-upload it", "upload that", "upload a smaller ... file", "upload the parts", "Upload a
DRM-free copy". The command line's verb is "ingest" (``docanchor ingest``). The noun is left alone:
"the upload limit", "the upload page", "an upload of ..." take no object after the word."""


def named_namespace(option: str | None) -> str | None:
    """The namespace a command names: ``--namespace``, else a non-empty ``DOCANCHOR_NAMESPACE``,
    else ``None`` (the configured default, not named). One rule whether the command then runs
    through a server (sent as ``X-DocAnchor-Namespace``) or on the data dir itself, so the answers
    (an anchor's More line, the read-on command) name it the same way.

    Raises:
        InvalidRequest: ``invalid_namespace`` for an empty or too long ``--namespace`` (the rule
            HTTP and MCP apply: :func:`docanchor.access.check_namespace`).
    """
    if option is None:
        option = os.environ.get("DOCANCHOR_NAMESPACE", "").strip() or None
    if option is None:
        return None
    from docanchor.access import check_namespace

    return check_namespace(option)


def cli_words(message: str) -> str:
    """A library message in the command line's words: "raise budget_tokens" reads "raise --budget",
    "upload it again" reads "ingest it again"."""
    for library, option in _CLI_WORDS:
        message = message.replace(library, option)
    return _UPLOAD_VERB.sub(lambda m: f"{m[1] or ''}{'I' if m[2] == 'U' else 'i'}ngest", message)


def package_version() -> str:
    """``docanchor <version>`` as installed, or a note that the code runs from a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"docanchor {version('docanchor')}"
    except PackageNotFoundError:
        return "docanchor (running from a source tree, not installed)"


def _version(ctx: click.Context, wanted: bool) -> None:
    if not wanted or ctx.resilient_parsing:
        return
    click.echo(package_version())
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


CLIENT_LOGGERS = ("httpx", "httpcore")
"""HTTP client libraries that log each request at INFO (the Chroma server's client: a line per call,
burying the server's own lines); they log only warnings and errors unless ``-v``."""


_NOTICE_HANDLER_NAME = "docanchor-cli-notices"


def _show_notices(shown: bool) -> None:
    """Print the lines of :data:`docanchor.embedder.NOTICES` on stderr as they are (no time or
    level) while the stderr handler logs less than INFO (``shown``); at INFO and below (``-v``,
    ``DOCANCHOR_LOG_LEVEL``, ``serve``) that handler logs them, so once only."""
    from docanchor.embedder import NOTICES

    notices = logging.getLogger(NOTICES)
    handler = next((h for h in notices.handlers if h.get_name() == _NOTICE_HANDLER_NAME), None)
    if not shown:
        if handler is not None:
            notices.removeHandler(handler)
        notices.setLevel(logging.NOTSET)
        return
    if handler is None:
        handler = _StderrHandler()
        handler.set_name(_NOTICE_HANDLER_NAME)
        handler.setFormatter(logging.Formatter("%(message)s"))
        notices.addHandler(handler)
    handler.setLevel(logging.INFO)
    notices.setLevel(logging.INFO)


def configure_logging(level: int, as_json: bool = False) -> None:
    """One stderr handler whose own level filters every logger (some libraries log DEBUG
    regardless of the root level); ``as_json``: one JSON object per line, each with the running
    request's id (:mod:`plugin.observe`), as ``docanchor serve`` logs. Parser libraries' warnings
    (:func:`ingest.sandbox.quiet_parsers`) are logged only at DEBUG (``-v``), as a parse worker drops them;
    HTTP clients' requests (:data:`CLIENT_LOGGERS`) too. Notices (:func:`_show_notices`) are printed
    whatever the level."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if h.get_name() == _LOG_HANDLER_NAME), None)
    if handler is None:
        handler = _StderrHandler()
        handler.set_name(_LOG_HANDLER_NAME)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    if as_json:
        from plugin.observe import RequestIdFilter, json_formatter

        handler.setFormatter(json_formatter())
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())
    handler.setLevel(level)
    root.setLevel(level)
    _show_notices(level > logging.INFO)
    for name in CLIENT_LOGGERS:  # -v logs their requests
        logging.getLogger(name).setLevel(logging.NOTSET if level <= logging.DEBUG else logging.WARNING)
    from ingest.sandbox import quiet_parsers  # when a command runs: --help stays light

    quiet_parsers(logging.NOTSET if level <= logging.DEBUG else logging.ERROR)  # -v logs their warnings


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
    ctx.obj = Runtime(data_dir, namespace, injected, verbose)
