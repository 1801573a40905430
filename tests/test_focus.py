"""A match found by its words brings the sentences around them, not its whole chunk
(retrieval/stages/expand.py: :func:`evidence_span`, the focus rule of :func:`shape`)."""

from __future__ import annotations

from docanchor.embedder import MINILM_DENSE
from docanchor.lexical import tokenize
from docanchor.types import Chunk, DocumentRecord
from retrieval.candidate import Candidate
from retrieval.stages.expand import (
    SENTENCES_AFTER_EVIDENCE,
    evidence_span,
    shape,
)

FILLER = "The harbour opened in spring. Boats came in from the north. "
TEXT = (FILLER + "The PLOVER schedule moved to Tuesday. It now leaves at noon. Tickets cost four pounds. "
        "The café sells tea. Gulls circle the pier.")


def test_the_span_runs_from_the_first_sentence_holding_a_query_term_to_two_sentences_past_the_last():
    span = evidence_span(TEXT, set(tokenize("plover schedule")), tokenize)
    assert span is not None
    assert TEXT[span[0]:span[1]] == ("The PLOVER schedule moved to Tuesday. It now leaves at noon. "
                                     "Tickets cost four pounds.")
    assert SENTENCES_AFTER_EVIDENCE == 2


def test_the_whole_text_when_no_sentence_holds_a_term_or_every_one_is_kept():
    assert evidence_span(TEXT, set(tokenize("lighthouse")), tokenize) is None
    assert evidence_span(TEXT, set(tokenize("harbour gulls")), tokenize) is None  # first and last
    short = "The PLOVER schedule moved. It leaves at noon."
    assert evidence_span(short, set(tokenize("plover")), tokenize) is None


def test_an_indented_paragraph_keeps_its_indentation():
    text = "第一百回 汉兵劫寨破曹真\n\n    却说众将闻孔明不追魏兵,俱入帐告曰:“魏兵苦雨。”"
    a, b = evidence_span(text, set(tokenize("众将")), tokenize)
    assert text[a:b].startswith("    却说众将") and b == len(text)


def _cand(ordinal: int, dense: float | None, text: str = TEXT) -> Candidate:
    chunk = Chunk("d", ordinal, text, 1000 * ordinal, 1000 * ordinal + len(text), None, None, (), 40)
    return Candidate(chunk.chunk_id, chunk=chunk, dense_score=dense, fused_score=0.8, score=0.8)


def test_a_match_found_by_its_words_is_focused_and_the_best_or_one_found_by_its_embedding_comes_whole():
    records = {"d": DocumentRecord("d", "harbour", "txt", 4, 4000, 9000)}
    best, lexical, dense, bm25_only = (_cand(0, 0.1), _cand(1, MINILM_DENSE.whole_match - 0.1),
                                       _cand(2, MINILM_DENSE.whole_match), _cand(3, None))
    cands = [best, lexical, dense, bm25_only]
    shape(cands, {c.chunk_id: c for c in cands}, records, 0.0, terms=set(tokenize("plover")), tokenize=tokenize)
    assert lexical.span is not None and TEXT[lexical.span[0]:].startswith("The PLOVER")
    assert bm25_only.span == lexical.span
    assert best.span is None and dense.span is None
    off = [_cand(0, 0.9), _cand(1, 0.1)]
    shape(off, {c.chunk_id: c for c in off}, records, 0.0, focus=False, terms=set(tokenize("plover")),
          tokenize=tokenize)
    assert off[1].span is None


A = ("The PLOVER sails daily. The PLOVER sails from the old pier, and the PLOVER sails back at dusk. "
     "Crews on the PLOVER sail in every weather and every season. ") * 2
B = (FILLER * 3 + "The PLOVER schedule moved to Tuesday. It now leaves at noon. Tickets cost four pounds. "
     "The café sells tea. Gulls circle the pier. The lighthouse keeper waves at passing boats.")


def test_a_section_ends_two_sentences_past_the_last_query_word_of_a_word_match(da, tmp_path):
    """Through the pipeline (fake embedder: a bag of words, so the second chunk, holding one query
    word of many, is far below ``DenseScale.whole_match``): the best match (the first paragraph)
    comes whole, the chunk after it joins its section and stops two sentences past its "PLOVER"
    sentence, though the budget has room for the rest. Before the rule the section ran on to
    "passing boats."."""
    path = tmp_path / "harbour.txt"
    path.write_text(A + "\n\n" + B + "\n", encoding="utf-8")
    doc = da.ingest_file(path).record
    assert doc.n_chunks == 2
    r = da.retrieve("When does the PLOVER sail?", 1000, doc_ids=[doc.doc_id])
    assert len(r.sections) == 1
    assert r.sections[0].text.startswith(A.strip())
    assert r.sections[0].text.endswith("It now leaves at noon. Tickets cost four pounds.")


def test_a_chunks_sentences_are_cut_once_for_query_after_query(monkeypatch):
    """evidence_span and boundary_sentence are pure functions of a chunk's text (and the query's
    terms): the chunk's sentences are found once, and the next query holding other terms reads
    them from memory, with the same spans as the first time."""
    import retrieval.stages.expand as expand

    expand._sentences.cache_clear()
    cuts: list[str] = []
    inner = expand.sentence_spans
    monkeypatch.setattr(expand, "sentence_spans", lambda text: cuts.append(text) or inner(text))
    text = ("The ledger closes in March. Auditors then read every account twice. "
            "Their report goes to the board in May. The board answers within a week.")
    first = expand.evidence_span(text, set(tokenize("auditors")), tokenize)
    again = expand.evidence_span(text, set(tokenize("auditors")), tokenize)
    other = expand.evidence_span(text, set(tokenize("board report")), tokenize)
    assert cuts == [text]
    assert text[first[0]:first[1]].startswith("Auditors") and again == first
    assert text[other[0]:other[1]].startswith("Their report")
    assert expand.boundary_sentence(text, after=True) is expand.boundary_sentence(text, after=True)
