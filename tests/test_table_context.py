"""A table cut over several chunks: the chunks after the first carry the table's header row as
their embedding context (issue 17, "Markdown table rows are chunked without their header row"),
through the same mechanism as the pieces of a wide CSV row (:mod:`ingest.row_context`). Markdown
tables, and HTML and DOCX tables, whose rows the parsers render ``cell | cell``."""

from __future__ import annotations

import io
import random
import re

import docx
import pytest

from docanchor import types
from docanchor.context import Context
from ingest.chunking import chunk_document
from ingest.parsers import parse
from ingest.stream import ingest_document
from retrieval.search import retrieve

HEADER = ("Vessel", "Gross tonnage", "Flag state", "Year built", "Last inspected at")
CONTEXT = " | ".join(HEADER)
INTRO = ("This register lists every vessel that called at the Larkspur terminal in 2024, with its gross "
         "tonnage, flag state, year built and the port where it was last inspected.")
_NAMES = ("Marlin Star", "Cape Heron", "Nordic Fjell", "Saffron Bay", "Iron Gull", "Blue Kestrel", "Tern Voyager",
          "Amber Wake", "Coral Drift", "Silver Auk", "Kite Runner", "Ocean Plover", "Grey Petrel", "Polar Skua",
          "Red Osprey", "Gannet Pride", "Harbour Lark", "Delta Shear", "Opal Loon", "Swift Grebe")


def _rows(n: int = 60) -> list[tuple[str, ...]]:
    rnd = random.Random(7)
    return [(f"{_NAMES[i % len(_NAMES)]} {i + 1}", f"{rnd.randint(10, 90)},{rnd.randint(100, 999)}",
             rnd.choice(("Panama", "Liberia", "Malta", "Norway")), str(rnd.randint(1990, 2022)),
             rnd.choice(("Rotterdam", "Hamburg", "Gdansk", "Antwerp"))) for i in range(n)]


def fleet_md() -> bytes:
    table = "\n".join("| " + " | ".join(r) + " |" for r in _rows())
    return (f"# Fleet register\n\n{INTRO}\n\n| {' | '.join(HEADER)} |\n|---|---:|---|---:|---|\n{table}\n\n"
            "## Notes\n\nTonnage figures come from the vessels' certificates.\n").encode()


def fleet_html() -> bytes:
    cells = "".join(f"<tr>{''.join(f'<td>{c}</td>' for c in r)}</tr>" for r in _rows())
    return (f"<html><head><title>Fleet register</title></head><body><h1>Fleet register</h1><p>{INTRO}</p>"
            f"<table><tr>{''.join(f'<th>{h}</th>' for h in HEADER)}</tr>{cells}</table>"
            "<p>Tonnage figures come from the vessels' certificates.</p></body></html>").encode()


def fleet_docx() -> bytes:
    d = docx.Document()
    d.add_heading("Fleet register", 1)
    d.add_paragraph(INTRO)
    rows = _rows()
    table = d.add_table(rows=len(rows) + 1, cols=len(HEADER))
    for r, values in enumerate([HEADER, *rows]):
        for c, value in enumerate(values):
            table.rows[r].cells[c].text = value
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


@pytest.mark.parametrize("doc_type, build", [("md", fleet_md), ("html", fleet_html), ("docx", fleet_docx)])
def test_chunks_after_a_tables_header_carry_it_as_context(ctx: Context, doc_type, build):
    """Fails before: no chunk of a Markdown, HTML or DOCX table had a context."""
    parsed = parse(doc_type, build(), f"fleet.{doc_type}")
    tables = [b for b in parsed.blocks if b.kind == "table"]
    assert len(tables) == 1
    table = tables[0]
    chunks = chunk_document(parsed, "doc_t", counter=ctx.counter, embedder=ctx.embedder, settings=ctx.settings)
    inside = [c for c in chunks if table.start <= c.start_char < table.end]
    assert len(inside) > 3  # the table is cut over several chunks
    for c in inside:
        assert c.text == parsed.text[c.start_char:c.end_char]  # text and offsets stay exact
        holds_header = all(h in c.text for h in HEADER)
        assert c.context == ("" if holds_header else CONTEXT), c.text[:80]
        assert ctx.embedder.count_tokens(types.embedding_input(c.text, c.context)) <= ctx.embedder.token_limit
    assert sum(bool(c.context) for c in inside) == len(inside) - 1
    assert all(c.context == "" for c in chunks if not table.start <= c.start_char < table.end)


def test_gfm_table_is_one_block_even_right_after_a_paragraph():
    """Fails before: a table without a blank line before it was part of the paragraph, and a long
    table was cut into several blocks of which only the first held the header."""
    text = fleet_md().decode().replace(f"{INTRO}\n\n|", f"{INTRO}\n|")
    parsed = parse("md", text.encode(), "fleet.md")
    kinds = [(b.kind, parsed.text[b.start:b.end][:12]) for b in parsed.blocks]
    assert kinds[:3] == [("heading", "# Fleet regi"), ("paragraph", INTRO[:12]), ("table", "| Vessel | G")]
    assert [b.kind for b in parsed.blocks].count("table") == 1
    table = parsed.text[parsed.blocks[2].start:parsed.blocks[2].end]
    assert table.endswith("| " + " | ".join(_rows()[-1]) + " |") and "Notes" not in table


QUESTIONS = ("What is the gross tonnage of Iron Gull 25?", "Which flag state does Opal Loon 39 fly?",
             "When was Amber Wake 48 built?", "Where was Coral Drift 9 last inspected?")


@pytest.mark.e2e
def test_a_question_about_one_row_finds_the_row_not_the_introduction(real_ctx: Context):
    """With the real model. Before, the first two questions' best section was the table's
    introduction ("This register lists every vessel ..."), not the chunk holding the row."""
    ingest_document(real_ctx, fleet_md(), namespace="ns", filename="fleet.md")
    for question in QUESTIONS:
        vessel = re.search(r"[A-Z][a-z]+ [A-Z][a-z]+ \d+", question).group()
        top = retrieve(real_ctx, "ns", question, 120).sections[0]
        assert f"| {vessel} |" in top.text, (question, top.text[:100])
