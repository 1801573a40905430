"""Reference lists weigh less than prose as evidence (retrieval/stages/references.py)."""

from __future__ import annotations

from tests.conftest import CORPUS

NORWICH = (CORPUS / "txt" / "norwich-city.txt").read_text(encoding="utf-8")


def test_a_reference_list_is_told_from_prose_and_from_a_financial_table():
    from retrieval.stages.references import is_reference_list

    references = NORWICH[NORWICH.index("43. \"Norwich release Roberts\""):NORWICH.index("45. Roberts 2004")]
    hugman = NORWICH[NORWICH.index("9. Hugman, Barry J."):NORWICH.index("10. Rowson")]  # no link
    prose = NORWICH[NORWICH.index("Iwan Wyn Roberts (born"):NORWICH.index("Roberts made 647")]
    table = ("Cumulative total return | 12/31/05 | 12/31/06 | 12/31/07\nNet income (loss) | (2046) | (4249) | "
             "(3405)\nSee www.researchdatagroup.com for the index.")
    assert is_reference_list(references) and is_reference_list(hugman)
    assert not is_reference_list(prose) and not is_reference_list(table)
    assert not is_reference_list("See https://example.org.")  # one link: a prose line citing something


def test_a_reference_list_does_not_outrank_the_prose_about_the_club(da):
    """A new user's trial over norwich-city.txt: for questions about the club the reference list's
    entries ("Iwan Roberts: Next for Norwich City ...", "Archived from the original") came first,
    because every entry's title and link repeat "Norwich City"."""
    from retrieval.stages.references import is_reference_list

    doc = da.ingest_file(CORPUS / "txt" / "norwich-city.txt").record
    for budget in (150, 300):
        r = da.retrieve("Norwich City", budget, doc_ids=[doc.doc_id])
        assert r.sections and not is_reference_list(r.sections[0].text), (budget, r.sections[0].text[:200])


def test_a_scrap_of_a_reference_list_never_answers_alone(da):
    """A new user's trial over norwich-city.txt: "Iwan Roberts" at 30 tokens answered "45. Roberts
    2004, p. 14" alone, an 11-token tail of the reference list, where no prose fitted. A scrap of
    a reference list only completes its entry; prose, or the least budget for it, is answered."""
    from docanchor.text import citation_marks
    from docanchor.types import Chunk
    from retrieval.stages.references import is_reference_scrap

    def chunk(text: str, n_tokens: int) -> Chunk:
        return Chunk("d", 1, text, 0, len(text), None, None, (), n_tokens)

    assert is_reference_scrap(chunk("45. Roberts 2004, p. 14", 11))
    assert is_reference_scrap(chunk("Retrieved 12 November 2007.", 9))
    assert not is_reference_scrap(chunk("it must have taken its toll.\"[84]", 9))  # prose
    assert not is_reference_scrap(chunk(NORWICH[NORWICH.index("43. \"Norwich release Roberts\""):], 5000))
    # as a candidate of the pipeline: it joins only (expand.shape), so the packer never starts a
    # section with it, and without its neighbour it is dropped
    from docanchor.types import DocumentRecord
    from retrieval.candidate import Candidate
    from retrieval.pack import Piece, pack
    from retrieval.stages.expand import shape

    scrap, prose = chunk("45. Roberts 2004, p. 14", 11), Chunk("d", 9, "Roberts scored goals. " * 20, 0, 440, None,
                                                                None, (), 100)
    cands = [Candidate(scrap.chunk_id, chunk=scrap, fused_score=1.0, score=1.0),
             Candidate(prose.chunk_id, chunk=prose, fused_score=0.9, score=0.9)]
    shape(cands, {c.chunk_id: c for c in cands}, {"d": DocumentRecord("d", "norwich-city", "txt", 215, 30000, 90000)},
          0.0)
    assert cands[0].joins_only and not cands[1].joins_only
    piece = Piece(scrap.chunk_id, "d", 1, "norwich-city", scrap.text, 0, 23, joins_only=cands[0].joins_only)
    assert not pack([piece], 30, da.ctx.counter.count).sections
    # through search over the real file (the fake embedder ranks otherwise than the trial's model)
    doc = da.ingest_file(CORPUS / "txt" / "norwich-city.txt").record
    for query in ("Iwan Roberts", "Norwich City"):
        for budget in range(24, 44, 4):
            r = da.retrieve(query, budget, doc_ids=[doc.doc_id])
            for s in r.sections:
                assert not (da.ctx.counter.count(s.text) < 24 and citation_marks(s.text, 1)), (query, budget, s.text)
            assert r.sections or r.least_budget_tokens, (query, budget)
