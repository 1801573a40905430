"""BM25 lexical index: tokenisation, persistence across instances, delete, CJK, building from the
store, and the check against the document records when a namespace is opened."""

from __future__ import annotations

import pytest

from docanchor.context import Context
from docanchor.lexical import LexicalIndex, tokenize
from docanchor.types import Chunk, DocumentRecord
from tests.conftest import CORPUS


def _chunks(doc_id: str, texts: list[str]) -> list[Chunk]:
    out, pos = [], 0
    for i, t in enumerate(texts):
        out.append(Chunk(doc_id=doc_id, ordinal=i, text=t, start_char=pos, end_char=pos + len(t)))
        pos += len(t) + 2
    return out


EN = [
    "Ownership is a set of rules that govern how a Rust program manages memory.",
    "The stack stores values in the order it gets them and removes them in the opposite order.",
    "Budgets are measured in tokens of the cl100k_base encoding.",
]
ZH = [
    "话说天下大势，分久必合，合久必分。周末七国分争，并入于秦。",
    "刘备、关羽、张飞桃园结义，誓同生死。",
]


def test_tokenize_normalises_and_splits_cjk_into_bigrams():
    toks = tokenize("The ﬁnal Budgets 桃园结义")
    assert "final" in toks and "budget" in toks and "the" not in toks
    assert {"桃园", "园结", "结义", "桃"} <= set(toks)


def test_tokenize_keeps_order_and_repeats_with_or_without_cjk():
    """Text without CJK takes a shorter path (no run is CJK); its tokens are those of the same words
    beside CJK text: in order, repeats kept, stop words out."""
    words = "Dogs ran; the dogs were running, ﬁnal DOGS 2024 v2_x"
    assert tokenize(words) == ["dog", "ran", "dog", "run", "final", "dog", "2024", "v2", "x"]
    assert tokenize(words + " 桃园") == tokenize(words) + ["桃", "园", "桃园"]
    assert tokenize("桃园 " + words) == ["桃", "园", "桃园"] + tokenize(words)


def test_ascii_text_takes_a_shorter_path_to_the_same_tokens():
    """ASCII text is tokenised with ASCII_TERM_RUN, without NFKC: every ASCII character alone and in
    random strings, and the corpus's ASCII lines, give the runs TERM_RUN gives the NFKC-normalised,
    case-folded text."""
    import random
    import unicodedata

    from docanchor.text import ASCII_TERM_RUN, TERM_RUN

    rng = random.Random(7)
    ascii_chars = "".join(map(chr, range(128)))
    texts = list(ascii_chars) + ["".join(rng.choices(ascii_chars, k=60)) for _ in range(2000)]
    texts += [line for f in sorted(CORPUS.glob("*/*.md"))[:8] for line in f.read_text(errors="replace").splitlines()
              if line.isascii()]
    for text in texts:
        folded = unicodedata.normalize("NFKC", text).casefold()
        assert ASCII_TERM_RUN.findall(text.lower()) == TERM_RUN.findall(folded), text
    assert tokenize("Dogs RAN, the_dogs' 2024 v2") == ["dog", "ran", "dog", "2024", "v2"]


def test_a_chunk_reads_back_from_its_stored_bytes_as_written():
    """chunk_of(stored UTF-8 bytes) is the chunk chunk_json wrote, whatever its text holds (quotes,
    backslashes, control characters, CJK, characters outside the BMP), and an array written before
    the last three fields existed reads with their defaults."""
    from docanchor.lexical_engine import chunk_json, chunk_of

    texts = ['He said "no" \\ then\tleft\n', "桃园结义 \u2028 é ﬁ 😀 \x1f end", EN[0]]
    for i, text in enumerate(texts):
        full = Chunk(doc_id="doc_a", ordinal=i, text=text, start_char=3, end_char=3 + len(text), page_start=2,
                     page_end=3, heading_path=("Part 1", "“Quoted”"), n_tokens=17, kind="table", ends_line=False,
                     context="Name | Value", gap_after="\n\n", joins_next=False, source_runs=((0, 5, 9), (5, 9, 20)))
        bare = Chunk(doc_id="doc_a", ordinal=i, text=text, start_char=0, end_char=len(text))
        for chunk in (full, bare):
            terms = tokenize(chunk.embedding_text)
            stored = chunk_json(chunk, terms).encode("utf-8")
            assert chunk_of(stored) == chunk and chunk_of(stored.decode("utf-8")) == chunk
            assert chunk_of(stored).terms.split() == list(dict.fromkeys(terms))
    old = b'["doc_a", 0, "old text", 0, 8, null, null, [], 2, "paragraph", true, ""]'
    assert chunk_of(old) == Chunk(doc_id="doc_a", ordinal=0, text="old text", start_char=0, end_char=8, n_tokens=2)
    assert chunk_of(old).terms is None
    before_terms = b'["doc_a", 0, "old text", 0, 8, null, null, [], 2, "paragraph", true, "", "", true, []]'
    assert chunk_of(before_terms).terms is None  # unknown: retrieval tokenises the text


def test_chunks_read_from_the_index_carry_their_bm25_terms(ctx: Context):
    """Chunks read by id and a search's hits carry the distinct terms the index holds for them
    (tokenize of the embedding text, a table chunk's context included), so retrieval's coverage
    need not tokenise them at every query. Before: Chunk had no terms; each query tokenised
    every listed chunk's text again."""
    import dataclasses

    chunks = _chunks("doc_a", EN + ZH)
    chunks[1] = dataclasses.replace(chunks[1], context="Heap | Allocation")
    idx = LexicalIndex(ctx.settings, ctx.store)
    idx.add("ns", chunks)
    ctx.store.put_document("ns", DocumentRecord("doc_a", "a", "md", len(chunks), 0, 0))
    fresh = LexicalIndex(ctx.settings, ctx.store)  # read from disk, not from the memory of the adds
    read = fresh.get_chunks("ns", [c.chunk_id for c in chunks])
    for c in chunks:
        assert read[c.chunk_id].terms.split() == list(dict.fromkeys(tokenize(c.embedding_text)))
    assert {"heap", "alloc"} <= set(read[chunks[1].chunk_id].terms.split())
    hits = {}
    top = fresh._engine("ns", create=False).top(["stack"], 1, None, hits)
    assert top[0][0] == chunks[1].chunk_id and set(hits[top[0][0]].terms.split()) == set(
        tokenize("Heap | Allocation\n" + EN[1]))


def test_an_index_of_the_format_before_terms_is_rebuilt_with_them(ctx: Context, caplog):
    """An index written before chunks carried their terms (format 1) is rebuilt from the store when
    a process opens it, and logged: its chunks then read back with their terms. Before: format 1
    was the current one and its chunks had none."""
    from docanchor.lexical_engine import Engine

    chunks = _chunks("doc_a", EN)
    ctx.store.add_chunks("ns", chunks, ctx.embedder.embed([c.text for c in chunks]))
    ctx.store.put_document("ns", DocumentRecord("doc_a", "a", "md", len(chunks), 0, 0))
    idx = LexicalIndex(ctx.settings, ctx.store)
    idx.add("ns", chunks)
    path = idx.path("ns")
    idx.close()
    Engine.forget(path)
    (path / "docanchor-format").write_text("1")
    with caplog.at_level("WARNING", logger="docanchor.lexical"):
        read = LexicalIndex(ctx.settings, ctx.store).get_chunks("ns", [c.chunk_id for c in chunks])
    assert [set(read[c.chunk_id].terms.split()) for c in chunks] == [set(tokenize(t)) for t in EN]
    assert "written in format '1'" in caplog.text and "Rebuilding the index" in caplog.text
    assert (path / "docanchor-format").read_text().strip() != "1"


def test_stems_come_from_a_bounded_memo_and_equal_the_stemmers(monkeypatch):
    """tokenize looks stems up in a dict of at most about STEM_CACHE_WORDS words (emptied when
    full), and a word's stem is the stemmer's whether it came from there or not."""
    import Stemmer

    from docanchor import lexical

    monkeypatch.setattr(lexical, "STEM_CACHE_WORDS", 4)
    monkeypatch.setattr(lexical._Stem, "_memo", {})
    stemmer = Stemmer.Stemmer("english")
    texts = ["running dogs jumped", "running dogs jumped", "happily generous skies", "ponies fishing 桃园 nations"]
    for text in texts:
        words = [w for w in text.split() if w.isascii()]
        assert [t for t in tokenize(text) if t.isascii()] == stemmer.stemWords(words)
        assert len(lexical._Stem._memo) <= 4 + len(words)
    assert lexical._Stem._memo == dict(zip(["ponies", "fishing", "nations"], stemmer.stemWords(["ponies", "fishing", "nations"])))

def test_search_ranks_matching_chunk_first(ctx: Context):
    idx = LexicalIndex(ctx.settings, ctx.store)
    idx.add("ns", _chunks("doc_a", EN))
    hits = idx.search("ns", "How is memory managed by ownership rules?", k=3)
    assert hits[0][0] == "doc_a:000000"
    assert all(score > 0 for _, score in hits)


def _stored(ctx: Context, ns: str, doc_id: str, texts: list[str], index: LexicalIndex | None = None) -> list[Chunk]:
    """Chunks written as an ingest writes them: Chroma, the lexical index, then the record."""
    chunks = _chunks(doc_id, texts)
    ctx.store.add_chunks(ns, chunks, ctx.embedder.embed([c.text for c in chunks]))
    (index or ctx.lexical).add(ns, chunks)
    ctx.store.put_document(ns, DocumentRecord(doc_id, doc_id, "md", len(chunks), 0, 0))
    return chunks


def test_persists_across_instances_and_delete_removes(ctx: Context):
    first = LexicalIndex(ctx.settings, ctx.store)
    _stored(ctx, "ns", "doc_a", EN, first)
    _stored(ctx, "ns", "doc_b", ZH, first)
    calls = []
    ctx.store.get_chunks = lambda *a: calls.append(a) or []  # opening must not read chunks back
    again = LexicalIndex(ctx.settings, ctx.store)  # a new process: opens the files, re-indexes nothing
    assert again.search("ns", "stack order", k=2)[0][0] == "doc_a:000001"
    again.delete("ns", "doc_a")
    assert again.search("ns", "stack order", k=2) == []
    ctx.store.delete_document("ns", "doc_a")
    third = LexicalIndex(ctx.settings, ctx.store)
    assert third.search("ns", "stack order", k=2) == []
    assert third.search("ns", "桃园结义", k=2)[0][0] == "doc_b:000001"
    assert calls == []


def test_cjk_query_matches_by_bigrams(ctx: Context):
    idx = LexicalIndex(ctx.settings, ctx.store)
    idx.add("ns", _chunks("doc_en", EN) + _chunks("doc_zh", ZH))
    assert idx.search("ns", "分久必合", k=1)[0][0] == "doc_zh:000000"
    assert idx.search("ns", "张飞", k=5)[0][0] == "doc_zh:000001"


def test_doc_ids_filter_and_namespaces_are_separate(ctx: Context):
    idx = LexicalIndex(ctx.settings, ctx.store)
    idx.add("one", _chunks("doc_a", EN))
    idx.add("two", _chunks("doc_b", EN))
    assert {c for c, _ in idx.search("one", "tokens", k=5)} == {"doc_a:000002"}
    assert idx.search("one", "tokens", k=5, doc_ids=["doc_x"]) == []


def test_missing_index_is_rebuilt_from_store(ctx: Context):
    text = (CORPUS / "md" / "ch04-01-what-is-ownership.md").read_text(encoding="utf-8")
    paras = [p for p in text.split("\n\n") if p.strip()][:40]
    chunks = _chunks("doc_md", paras)
    ctx.store.add_chunks("ns", chunks, ctx.embedder.embed([c.text for c in chunks]))
    ctx.store.put_document("ns", DocumentRecord("doc_md", "Ownership", "md", len(chunks), 0, 0))
    idx = LexicalIndex(ctx.settings, ctx.store)  # no SQLite file yet: rebuilt from Chroma
    hits = idx.search("ns", "garbage collection", k=3)
    assert hits and "garbage collection" in chunks[int(hits[0][0].split(":")[1])].text.lower()


def test_chunks_keep_ends_line_in_both_stores(ctx: Context):
    """``Chunk.ends_line`` survives the lexical index's stored JSON and Chroma's metadata."""
    import dataclasses

    chunks = [dataclasses.replace(c, ends_line=(c.ordinal == 1)) for c in _chunks("doc_a", EN)]
    ctx.store.add_chunks("ns", chunks, ctx.embedder.embed([c.text for c in chunks]))
    idx = LexicalIndex(ctx.settings, ctx.store)
    idx.add("ns", chunks)
    ctx.store.put_document("ns", DocumentRecord("doc_a", "a", "md", len(chunks), 0, 0))
    ids = [c.chunk_id for c in chunks]
    assert [LexicalIndex(ctx.settings, ctx.store).get_chunks("ns", ids)[i].ends_line for i in ids] == [False, True, False]
    assert [ctx.store.get_chunks_by_id("ns", ids)[i].ends_line for i in ids] == [False, True, False]


def test_question_words_are_stop_words():
    """bm25s's STOPWORDS_EN_PLUS (179 words): a question's "what does ... about" matches nothing
    (a trial's query matched a file name "what-is-ownership" through "what")."""
    assert tokenize("What does the footnote say about transshipment?") == ["footnot", "say", "transship"]


def test_a_search_filtered_to_documents_is_exact_over_their_cached_vectors(ctx: Context):
    """store.query with doc_ids ranks exactly as Chroma's own filtered search (both exact at this
    size), from vectors cached per document; a deleted document leaves the cache."""
    from docanchor.store import _chunk

    _stored(ctx, "ns", "doc_a", EN)
    _stored(ctx, "ns", "doc_b", ZH)
    _stored(ctx, "ns", "doc_c", [t.upper() for t in EN])
    q = ctx.embedder.embed_query("memory ownership rules")
    got = ctx.store.query("ns", q, 4, doc_ids=["doc_a", "doc_c"])
    coll = ctx.store._collection("ns", "chunks")
    ref = coll.query(query_embeddings=[q], n_results=4, where={"doc_id": {"$in": ["doc_a", "doc_c"]}},
                     include=["documents", "metadatas", "distances"])
    assert [c.chunk_id for c, _ in got] == ref["ids"][0]
    assert [s for _, s in got] == pytest.approx([1 - d for d in ref["distances"][0]], abs=1e-5)
    assert [c for c, _ in got] == [_chunk(t, m) for t, m in zip(ref["documents"][0], ref["metadatas"][0])]
    assert ctx.store.query("ns", q, 4, doc_ids=["doc_missing"]) == []
    ctx.store.delete_document("ns", "doc_a")
    assert {c.doc_id for c, _ in ctx.store.query("ns", q, 4, doc_ids=["doc_a", "doc_c"])} == {"doc_c"}
    assert ("ns", "doc_a") not in ctx.store.vectors._entries


def test_documents_not_cached_are_read_in_one_get_and_rank_as_store_query(ctx: Context):
    """nearest_in_documents (what retrieval's gather stage calls, with chunk counts from the cached
    records) ranks as store.query does; the documents not cached are read in one Chroma get, and
    cached ones are not read again."""
    _stored(ctx, "ns", "doc_a", EN)
    _stored(ctx, "ns", "doc_b", ZH)
    _stored(ctx, "ns", "doc_c", [t.upper() for t in EN])
    q = ctx.embedder.embed_query("memory ownership rules")
    sizes = {d: r.n_chunks for d, r in ctx.store.get_documents("ns", ["doc_c", "doc_a", "doc_b"]).items()}
    loads = []
    inner = ctx.store.vectors._load
    ctx.store.vectors._load = lambda ns, doc_ids, load: loads.append(sorted(doc_ids)) or inner(ns, doc_ids, load)
    got = ctx.store.nearest_in_documents("ns", q, 5, sizes)
    assert got == [(c.chunk_id, s) for c, s in ctx.store.query("ns", q, 5, doc_ids=["doc_a", "doc_b", "doc_c"])]
    assert ctx.store.nearest_in_documents("ns", q, 5, sizes) == got
    assert loads == [["doc_a", "doc_b", "doc_c"]]
    assert ctx.store.nearest_in_documents("ns", q, 5, {"doc_a": 99_999}) is None  # over EXACT_MAX_CHUNKS


def test_nearest_ranks_as_query_without_reading_the_chunks(ctx: Context):
    """store.nearest (what retrieval's gather stage calls) gives query's ids and scores, best
    first, over the whole collection or within documents, and reads no chunk from Chroma."""
    _stored(ctx, "ns", "doc_a", EN)
    _stored(ctx, "ns", "doc_b", ZH)
    q = ctx.embedder.embed_query("memory ownership rules")
    want = {d: [(c.chunk_id, s) for c, s in ctx.store.query("ns", q, 4, doc_ids=d)] for d in (None, ("doc_b",))}
    reads = []
    ctx.store.get_chunks_by_id = lambda *a: reads.append(a) or {}
    assert len(want[None]) == 4 and len(want[("doc_b",)]) == 2
    assert {d: ctx.store.nearest("ns", q, 4, d) for d in want} == want
    assert reads == []
    assert ctx.store.nearest("missing", q, 4) == []


def test_warm_vectors_reads_documents_ahead_of_the_first_filtered_search(ctx: Context):
    """warm_vectors (run by a server after start-up) reads the documents' vectors in batches, so
    the first search filtered to them reads nothing; it fills the cache only up to its byte
    limit, evicting nothing, and stops when asked to."""
    _stored(ctx, "ns", "doc_a", EN)
    _stored(ctx, "ns", "doc_b", ZH)
    _stored(ctx, "ns", "doc_c", [t.upper() for t in EN])
    sizes = {d: r.n_chunks for d, r in ctx.store.get_documents("ns", ["doc_a", "doc_b", "doc_c"]).items()}
    loads = []
    inner = ctx.store.vectors._load
    ctx.store.vectors._load = lambda ns, doc_ids, load: loads.append(sorted(doc_ids)) or inner(ns, doc_ids, load)
    assert ctx.store.warm_vectors("ns", sizes, batch_chunks=4) == 3
    assert loads == [["doc_a"], ["doc_b"], ["doc_c"]]  # 3, 2 and 3 chunks: one document per batch of 4
    q = ctx.embedder.embed_query("memory ownership rules")
    assert ctx.store.nearest_in_documents("ns", q, 5, sizes) and len(loads) == 3  # nothing read
    ctx.store.vectors.clear()
    ctx.store.vectors.max_bytes = 6 * ctx.embedder.dimension * 4  # 6 float32 vectors: doc_a and doc_b
    loads.clear()
    assert ctx.store.warm_vectors("ns", sizes, batch_chunks=100) == 2  # the third would evict
    assert sorted(d for _, d in ctx.store.vectors._entries) == ["doc_a", "doc_b"]
    ctx.store.vectors.clear()
    assert ctx.store.warm_vectors("ns", sizes, batch_chunks=4, stop=lambda: True) == 0


def test_chunks_read_by_id_come_from_memory_until_the_index_changes(ctx: Context):
    idx = LexicalIndex(ctx.settings, ctx.store)
    _stored(ctx, "ns", "doc_a", EN, idx)
    first = idx.get_chunks("ns", ["doc_a:000000", "doc_a:000001"])
    reads = []
    engine = idx._engine("ns", create=False)
    engine.chunks = lambda ids, inner=engine.chunks: reads.append(list(ids)) or inner(ids)
    again = idx.get_chunks("ns", ["doc_a:000001", "doc_a:000002", "doc_a:000009"])
    assert again["doc_a:000001"] is first["doc_a:000001"]  # kept decoded, not read again ...
    assert reads == [["doc_a:000002", "doc_a:000009"]]  # ... only the others are read
    idx.add("ns", _chunks("doc_a", ["Ownership rules were rewritten.", *EN[1:]]))  # same ids, new text
    assert idx.get_chunks("ns", ["doc_a:000000"])["doc_a:000000"].text == "Ownership rules were rewritten."
    idx.delete("ns", "doc_a")
    assert idx.get_chunks("ns", ["doc_a:000000", "doc_a:000001"]) == {}


def test_a_searchs_hits_are_read_with_it(ctx: Context):
    idx = LexicalIndex(ctx.settings, ctx.store)
    _stored(ctx, "ns", "doc_a", EN, idx)
    hits = idx.search("ns", "stack order", k=2)
    reads = []
    engine = idx._engine("ns", create=False)
    engine.chunks = lambda ids, inner=engine.chunks: reads.append(list(ids)) or inner(ids)
    got = idx.get_chunks("ns", [cid for cid, _ in hits])
    assert hits[0][0] == "doc_a:000001" and got["doc_a:000001"].text == EN[1]
    assert reads == []  # the search read them already


def test_doc_freqs_count_the_chunks_holding_each_term(ctx: Context):
    """The novelty stage (retrieval/stages/novelty.py) weighs query terms by BM25's IDF, so the
    index says how many chunks hold each term and how many it holds."""
    idx = LexicalIndex(ctx.settings, ctx.store)
    idx.add("ns", _chunks("doc_a", EN) + _chunks("doc_b", ["The stack and the heap hold memory."]))
    n, df = idx.doc_freqs("ns", tokenize("memory stack unicorn"))
    assert n == 4
    assert df == {"memori": 2, "stack": 2, "unicorn": 0}
    assert idx.doc_freqs("nowhere", ["memori"]) == (0, {})
    # over some documents only (the strong-match test judges terms by the documents searched)
    assert idx.doc_freqs("ns", tokenize("memory stack unicorn"), ["doc_b"]) == (1, {"memori": 1, "stack": 1,
                                                                                     "unicorn": 0})
    assert idx.doc_freqs("ns", ["stack"], ["doc_a", "doc_gone"]) == (3, {"stack": 1})


def test_chunks_by_id_are_the_indexed_ones_in_the_order_asked_however_many(ctx: Context):
    """A read by id returns exactly the indexed chunks among the ids, in the order asked, both
    below and above lexical_engine.ONE_OF_TERM_QUERIES ids (term queries, then one term-set
    query); a search filtered to documents counts the same either way."""
    from docanchor.lexical_engine import ONE_OF_TERM_QUERIES

    idx = LexicalIndex(ctx.settings, ctx.store)
    texts = [f"Chunk {i} of the ledger names account {i}." for i in range(ONE_OF_TERM_QUERIES + 20)]
    idx.add("ns", _chunks("doc_a", texts))
    engine = idx._engine("ns", create=True)
    ids = [c.chunk_id for c in _chunks("doc_a", texts)]
    few = [ids[5], "doc_a:999999", ids[2], ids[7]]
    assert list(engine.chunks(few)) == [ids[5], ids[2], ids[7]]
    many = ids[::-1] + ["doc_b:000000"]
    got = engine.chunks(many)
    assert list(got) == ids[::-1] and got[ids[3]].text == texts[3]
    assert engine.doc_freqs(["ledger"], ["doc_a"]) == (len(texts), {"ledger": len(texts)})
    assert engine.top(["account"], 3, ["doc_a", "doc_b"])[0][0] in ids
