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
