"""``docanchor status``: the data dir, what its index holds and how it is built, and whether a
server runs on it."""

from __future__ import annotations

import json

import click

from docanchor.errors import DocAnchorError

from plugin.cli.app import Runtime, json_option, main, package_version, pass_rt


@main.command()
@json_option("Print the status as one JSON object.")
@pass_rt
def status(rt: Runtime, as_json: bool) -> None:
    """Show the data dir, its documents and chunks, the model and index settings, and whether a server runs."""
    from docanchor.store import index_exists
    from plugin.lock import current_holder

    settings = rt.settings
    holder = current_holder(settings) if rt.injected is None else None
    server = _server(holder)
    has_index = index_exists(settings) or server["running"]  # a running server answers for its own index
    out: dict = {"version": package_version().removeprefix("docanchor "),
                 "data_dir": str(settings.data_dir.absolute()), "index": has_index, "server": server}
    failure = None
    if has_index:
        try:
            out.update(rt.backend().status())
        except DocAnchorError as err:  # what is known is still shown; the error follows
            failure = err
    if as_json:
        click.echo(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        for label, value in _lines(out):
            click.echo(f"{label + ':':<11} {value}")
    if failure is not None:
        raise failure


def _server(holder) -> dict:
    if holder is None or holder.name != "server":
        return {"running": False, "pid": None, "address": None,
                "writer": None if holder is None else f"docanchor {holder.name} (pid {holder.pid})"}
    return {"running": True, "pid": holder.pid, "address": holder.address, "writer": None}


def _lines(out: dict) -> list[tuple[str, str]]:
    server = out["server"]
    if server["running"]:
        where = f"at {server['address']}" if server["address"] else "starting"
        running = f"running (pid {server['pid']}) {where}; commands go through its API"
    else:
        running = "not running" + (f"; {server['writer']} is writing to the data dir" if server["writer"] else "")
    lines = [("version", out["version"]),
             ("data dir", out["data_dir"] + ("" if out["index"] else " (no index yet: docanchor ingest PATH makes one)")),
             ("server", running)]
    if "documents" not in out:
        return lines
    store = "embedded Chroma" if out["store"] == "embedded" else out["store"]
    model = f"{out['embedding_model']} ({out['embedding_dimension']} dimensions)"
    if out.get("indexed_with"):
        model += f"; the index was built with {out['indexed_with']}: run docanchor reindex"
    return lines + [
        ("namespace", out["namespace"]),
        ("documents", str(out["documents"])),
        ("chunks", str(out["chunks"])),
        ("model", model),
        ("index", f"chunks of {out['chunk_tokens']} tokens (overlap {out['chunk_overlap_tokens']}), anchors of at "
                  f"most {out['anchor_tokens']} tokens, budgets counted in {out['budget_encoding']}; {store}"),
    ]
