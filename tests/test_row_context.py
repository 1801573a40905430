"""A wide CSV row split over several chunks: the later chunks carry an embedding context that
names the row, used for their embedding and BM25 terms only (``text`` stays the exact span).

Real file: ../shared/corpus/csv/country-codes.csv (249 rows x 56 columns; a row is ~1,300
characters, about 7 chunks at the default 100 budget tokens)."""

from __future__ import annotations

import pytest

from docanchor.context import Context
from docanchor.lexical import LexicalIndex
from docanchor.reindex import reindex_namespace
from docanchor import types
from docanchor.types import Chunk
from ingest.chunking import chunk_document
from ingest.parsers import parse
from ingest.stream import ingest_document
from ingest.row_context import name_column, row_context, row_label
from tests.conftest import CASES, CORPUS
from tests.fakes import HashEmbedder

COUNTRIES = CORPUS / "csv" / "country-codes.csv"


def ctx_counter():
    from docanchor.tokens import get_counter

    return get_counter()


def _parse():
    return parse("csv", COUNTRIES.read_bytes(), COUNTRIES.name)


def _row_of(parsed, needle: str):
    """The row block whose text contains ``needle``."""
    return next(b for b in parsed.blocks if b.kind == "row" and needle in parsed.text[b.start:b.end])


def test_pieces_of_a_wide_row_name_the_row_and_text_stays_exact(ctx: Context):
    parsed = _parse()
    chunks = chunk_document(parsed, "doc_t", counter=ctx.counter, embedder=ctx.embedder, settings=ctx.settings)
    rows = [b for b in parsed.blocks if b.kind == "row"]
    with_context = 0
    for c in chunks:
        assert c.text == parsed.text[c.start_char:c.end_char]
        row = next((b for b in rows if b.start <= c.start_char < b.end), None)
        if row is None:  # the schema table: its later chunks say whose schema they are
            schema_title = "Table schema: 249 rows × 56 columns (comma-separated)"
            assert c.context == ("" if c.text.startswith(schema_title) else schema_title), c.text[:60]
            continue
        if c.start_char <= row.start and row.end <= c.end_char:
            assert c.context == "", c.text[:60]  # a whole row
            continue
        row_text = parsed.text[row.start:row.end]
        name = next(cell for cell in row_text.split(" | ") if cell.startswith("official_name_en: "))
        if name in c.text:
            assert c.context == ""  # already names its row
        else:
            assert c.context == name, (c.context, name)
            with_context += 1
            # the embedding input still fits the embedder's word-piece limit
            assert ctx.embedder.count_tokens(types.embedding_input(c.text, c.context)) <= ctx.embedder.token_limit
    assert with_context > 4 * len(rows)  # wide rows: ~7 chunks each, one of them names the row


def test_name_column_and_first_cell_fallback():
    parsed = _parse()
    countries = [parsed.text[b.start:b.end] for b in parsed.blocks if b.kind == "row"]
    assert name_column(countries) == "official_name_en"  # not _fr/_ar/_cn, nor Region Name (5 values)
    quoted = parse("csv", (CASES / "a15_csv_quoted_fields.csv").read_bytes(), "a15.csv")
    invoices = [quoted.text[b.start:b.end] for b in quoted.blocks if b.kind == "row"]
    assert name_column(invoices) is None
    assert row_label(invoices[0], None) == ["invoice_id: INV-1001", "customer: Dunmore Marine Services"]
    population = "Country Name: Aruba | Country Code: ABW | Year: 1960 | Value: 54922"
    assert name_column([population, population.replace("1960", "1961")]) is None  # repeats: no name
    counter, embedder = ctx_counter(), HashEmbedder()
    assert row_context(population, "Year: 1960 | Value: 54922", None, counter, embedder) == \
        "Country Name: Aruba | Country Code: ABW"
    assert row_context(population, population, None, counter, embedder) == ""  # it names itself
    long_name = "name: " + "word " * 100
    context = row_context(long_name + " | x: 1", "x: 1", "name", counter, embedder)
    assert long_name.startswith(context) and counter.count(context) <= 30


def test_ingest_embeds_and_indexes_the_context(ctx: Context):
    result = ingest_document(ctx, COUNTRIES.read_bytes(), namespace="ns", filename=COUNTRIES.name)
    chunks = result.chunks
    norway = _row_of(result.parsed, "official_name_en: Norway |")
    late = [c for c in chunks if norway.start < c.start_char < norway.end]
    assert late and all(c.context == "official_name_en: Norway" or "official_name_en: Norway" in c.text
                        for c in late)
    stored = ctx.store.get_chunks("ns", result.record.doc_id)
    assert [c.context for c in stored] == [c.context for c in chunks]
    vectors = ctx.store.get_chunk_embeddings("ns", result.record.doc_id)
    c = next(c for c in late if c.context)
    assert vectors[c.ordinal] == pytest.approx(ctx.embedder.embed([c.context + "\n" + c.text])[0])
    assert vectors[c.ordinal] != pytest.approx(ctx.embedder.embed([c.text])[0])


def test_late_column_question_finds_the_named_row_with_the_real_model(real_ctx: Context):
    """"What is the M49 code of Norway?": Norway's ``M49: 578`` cell sits in the fourth chunk of
    its row, whose text never says "Norway" (only Норвегия, النرويج, Norvège). Without the
    embedding context the top section was another country's tiny ``M49: 140 | Sub-region Code:``
    chunk (Central African Republic)."""
    from retrieval.search import retrieve

    result = ingest_document(real_ctx, COUNTRIES.read_bytes(), namespace="ns", filename=COUNTRIES.name)
    norway = _row_of(result.parsed, "official_name_en: Norway |")
    m49 = result.parsed.text.index("M49: 578", norway.start)
    answer = retrieve(real_ctx, "ns", "What is the M49 code of Norway?", 300)
    top = answer.sections[0]
    assert norway.start <= top.start_char and top.end_char <= norway.end, top.text[:120]
    assert top.start_char <= m49 < top.end_char, top.text[:120]


def test_store_lexical_and_reindex_round_trip_the_context(ctx: Context):
    text = "M49: 578 | Sub-region Code: 154"
    chunks = [Chunk(doc_id="doc_r", ordinal=0, text="official_name_en: Norway", start_char=0, end_char=24),
              Chunk(doc_id="doc_r", ordinal=1, text=text, start_char=27, end_char=27 + len(text),
                    context="official_name_en: Norway")]
    vectors = ctx.embedder.embed([types.embedding_input(c.text, c.context) for c in chunks])
    ctx.store.add_chunks("ns", chunks, vectors)
    ctx.lexical.add("ns", chunks)
    ctx.store.put_document("ns", types.DocumentRecord("doc_r", "countries", "csv", 2, 0, 0))
    assert [c.context for c in ctx.store.get_chunks("ns", "doc_r")] == ["", "official_name_en: Norway"]
    assert ctx.store.get_chunks_by_id("ns", ["doc_r:000001"])["doc_r:000001"] == chunks[1]
    assert ctx.lexical.get_chunks("ns", ["doc_r:000001"])["doc_r:000001"] == chunks[1]
    # BM25 reads the context: "norway" is only in chunk 1's context, "m49" only in its text
    hits = dict(ctx.lexical.search("ns", "norway m49", k=2))
    assert hits["doc_r:000001"] > hits.get("doc_r:000000", 0.0)

    # a fresh index instance reads the context back from its files
    again = LexicalIndex(ctx.settings, ctx.store)
    assert again.get_chunks("ns", ["doc_r:000001"])["doc_r:000001"].context == "official_name_en: Norway"

    done = reindex_namespace(ctx, "ns", force=True)
    assert done.n_chunks == 2 and not done.skipped
    after = ctx.store.get_chunks("ns", "doc_r")
    assert after == chunks
    assert ctx.store.get_chunk_embeddings("ns", "doc_r")[1] == pytest.approx(
        ctx.embedder.embed([types.embedding_input(text, "official_name_en: Norway")])[0])


def test_chunks_stored_before_the_context_existed_read_empty(ctx: Context):
    coll = ctx.store._collection("ns", "chunks")
    coll.upsert(ids=["doc_o:000000"], embeddings=[ctx.embedder.embed(["old"])[0]], documents=["old"],
                metadatas=[{"doc_id": "doc_o", "ordinal": 0, "start_char": 0, "end_char": 3,
                            "heading_path": "[]", "n_tokens": 1, "kind": "row", "ends_line": True}])
    assert ctx.store.get_chunks("ns", "doc_o")[0].context == ""


def test_embedding_input_joins_context_and_text():
    assert types.embedding_input("M49: 578", "") == "M49: 578"
    assert types.embedding_input("M49: 578", "FIFA: NOR") == "FIFA: NOR\nM49: 578"
    chunk = Chunk(doc_id="d", ordinal=0, text="M49: 578", start_char=0, end_char=8, context="FIFA: NOR")
    assert chunk.embedding_text == "FIFA: NOR\nM49: 578"


def test_a_wide_row_is_split_between_cells_into_chunks_of_about_one_size(ctx: Context):
    """A greedy split of country-codes' rows left tails of a few tokens (``wikidata_id: …Q17``
    alone, 529 chunks under 35 tokens) and cut cells in two ("UNTERM" | "Spanish Formal: …"), so a
    label lost its value; row chunks now start and end at cells and are about the same size."""
    parsed = _parse()
    chunks = chunk_document(parsed, "doc_t", counter=ctx.counter, embedder=ctx.embedder, settings=ctx.settings)
    text = parsed.text
    split_rows = 0
    for row in (b for b in parsed.blocks if b.kind == "row"):
        pieces = [c for c in chunks if row.start <= c.start_char < row.end]
        if len(pieces) < 2:
            continue
        split_rows += 1
        for c in pieces:
            assert c.start_char == row.start or text[c.start_char - 3:c.start_char] == " | ", c.text[:40]
            assert c.end_char == row.end or text[c.end_char - 2:c.end_char + 1] == " | ", c.text[-40:]
        sizes = [c.n_tokens for c in pieces]
        assert min(sizes) >= 0.5 * sum(sizes) / len(sizes), sizes
    assert split_rows > 200


def test_the_first_rows_do_not_share_a_chunk_with_the_schema(ctx: Context):
    """population.csv's first chunk held the schema and Aruba's 1960-1961 rows: the schema's
    column statistics drowned the rows ("population of Aruba in 1961" never found 55578)."""
    path = CORPUS / "csv" / "population.csv"
    parsed = parse("csv", path.read_bytes(), path.name)
    chunks = chunk_document(parsed, "doc_p", counter=ctx.counter, embedder=ctx.embedder, settings=ctx.settings)
    assert chunks[0].text.startswith("Table schema:") and "Country Name: Aruba |" not in chunks[0].text
    assert chunks[1].text.startswith("Country Name: Aruba | Country Code: ABW | Year: 1960 |")
    assert all(not c.text.startswith("Table schema") for c in chunks[1:])
