"""Packing under a budget: the invariant on random inputs, merging, trimming, tiny budgets."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from docanchor.lexical import tokenize
from docanchor.tokens import get_counter
from retrieval.pack import Piece, _Packer, pack, sentence_spans, trim_to_match
from retrieval.render import citation_line
from tests.conftest import CASES

COUNTER = get_counter("cl100k_base")
COUNT = COUNTER.count


def _pieces(texts: list[str], doc_of=lambda i: f"doc_{i % 3}") -> list[Piece]:
    out, pos = [], {}
    for i, t in enumerate(texts):
        d = doc_of(i)
        start = pos.get(d, 0)
        out.append(Piece(f"{d}:{i:06d}", d, i, f"Title {d}", t, start, start + len(t), score=1.0 / (i + 1)))
        pos[d] = start + len(t) + 2
    return out


words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=40)
texts = st.lists(st.lists(words, min_size=1, max_size=60).map(lambda ws: ". ".join(ws)), min_size=0, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=texts, budget=st.integers(min_value=1, max_value=8000))
def test_context_never_exceeds_budget_and_is_counted_exactly(texts, budget):
    result = pack(_pieces(texts), budget, COUNT, query_terms={"a"}, tokenize=tokenize)
    assert result.context_tokens_used <= budget
    assert result.context_tokens_used == COUNT(result.context)
    if not result.sections:
        assert result.context == ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=texts, scores=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=12, max_size=12),
       budget=st.integers(min_value=1, max_value=3000))
def test_the_packers_running_size_is_the_size_of_its_sections_summed_anew(texts, scores, budget):
    """The packer sizes a trial from its running size when the other sections keep their numbers
    (a piece ranked last, a chunk joining its one section); after every piece, in any score
    order, that running size is what summing every section anew gives."""
    pieces, ends = [], {}  # two documents whose chunks follow each other, in a shuffled order
    for i, t in enumerate(texts):
        d = f"doc_{i % 2}"
        n, start = ends.get(d, (0, 0))
        pieces.append(Piece(f"{d}:{n:06d}", d, n, f"Title {d}", t, start, start + len(t), score=scores[i]))
        ends[d] = (n + 1, start + len(t) + 2)
    pieces = [pieces[i] for i in sorted(range(len(pieces)), key=lambda i: (scores[i] * 7919) % 1)]
    packer = _Packer(budget, COUNT, {"a"}, tokenize)
    for p in pieces:
        packer.try_add(p)
        assert packer.used == packer.sizer.total(packer.units)


def test_adjacent_chunks_merge_and_overlap_is_written_once():
    doc = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota. Kappa lambda mu."
    a = Piece("d:000000", "d", 0, "T", doc[0:36], 0, 36, score=0.9)
    b = Piece("d:000001", "d", 1, "T", doc[18:54], 18, 54, score=0.8)  # overlaps a by 18 chars
    r = pack([a, b], 1000, COUNT)
    assert len(r.sections) == 1
    s = r.sections[0]
    assert s.text == doc[0:54] and (s.start_char, s.end_char) == (0, 54)
    assert {k: str(v) for k, v in r.fates.items()} == {"d:000000": "kept in section 1", "d:000001": "merged into section 1"}


def test_a_chunk_that_fills_the_gap_between_two_sections_makes_them_one():
    paras = ["Ownership moves values.", "Borrowing lends them.", "Lifetimes bound borrows.", "Drop frees memory."]
    starts = [0, 25, 48, 74]
    ps = [Piece(f"d:{i:06d}", "d", i, "T", t, starts[i], starts[i] + len(t), score=s)
          for i, (t, s) in enumerate(zip(paras, (0.5, 0.9, 0.4, 0.8)))]
    ranked = sorted(ps, key=lambda p: -p.score)  # 1, 3, 0, 2: sections {0, 1} and {3} until 2 joins them
    r = pack(ranked, 1000, COUNT)
    assert len(r.sections) == 1
    s = r.sections[0]
    assert s.chunk_ids == ["d:000000", "d:000001", "d:000002", "d:000003"]
    assert (s.start_char, s.end_char) == (0, 74 + len(paras[3]))
    assert s.text.index("Ownership") < s.text.index("Lifetimes") < s.text.index("Drop")
    assert str(r.fates["d:000001"]) == "kept in section 1"
    assert {str(r.fates[c]) for c in ("d:000000", "d:000002", "d:000003")} == {"merged into section 1"}
    assert r.context.count("[1]") == 1 and "[2]" not in r.context


def test_a_section_reads_the_documents_own_text_between_its_chunks():
    """The text between two joined chunks is the document's (``gap_after``, and the ``lead`` of a
    piece cut to a span), not a guessed line break; chunks with unindexed text between them
    (``joins_next`` False) make two sections."""
    doc = "    First part of the quay log.\n\n\n    Second part, with the crane.\n\n   Third part."
    spans = [(4, 31), (38, 66), (71, 82)]
    a, b, c = (Piece(f"d:{i:06d}", "d", i, "T", doc[s:e], s, e, score=1 - i / 10,
                     gap_after=doc[e:spans[i + 1][0]] if i < 2 else "") for i, (s, e) in enumerate(spans))
    r = pack([a, b, c], 1000, COUNT)
    assert [s.text for s in r.sections] == [doc[4:82]]
    cut = Piece("d:000001", "d", 1, "T", doc[46:66], 46, 66, score=0.9, lead=doc[38:46], gap_after=doc[66:71])
    r = pack([a, cut], 1000, COUNT)
    assert [s.text for s in r.sections] == [doc[4:66]]
    apart = Piece("d:000000", "d", 0, "T", doc[4:31], 4, 31, score=1.0, gap_after="", joins_next=False)
    r = pack([apart, b], 1000, COUNT)
    assert [s.text for s in r.sections] == [doc[4:31], doc[38:66]]


def test_small_budget_trims_to_the_matching_sentences():
    filler = " ".join(f"Sentence {i} talks about unrelated weather." for i in range(40))
    text = filler + " The secret launch code is stored in the vault. " + filler
    p = Piece("d:000000", "d", 0, "Doc", text, 100, 100 + len(text), score=1.0)
    r = pack([p], 60, COUNT, query_terms=set(tokenize("where is the launch code stored")), tokenize=tokenize)
    assert r.context_tokens_used <= 60 and len(r.sections) == 1
    s = r.sections[0]
    assert "launch code is stored in the vault" in s.text
    assert str(r.fates["d:000000"]) == "trimmed into section 1"
    assert text[s.start_char - 100 : s.end_char - 100] == s.text  # offsets of the kept text


def test_budget_too_small_gives_nothing():
    r = pack(_pieces(["A reasonably long sentence about ownership and memory. " * 5]), 10, COUNT)
    assert r.sections == [] and r.context == "" and r.context_tokens_used == 0
    assert {k: str(v) for k, v in r.fates.items()} == {"doc_0:000000": "dropped for budget"}


def test_duplicate_text_in_two_documents_is_packed_once():
    t = "Exactly the same paragraph appears in two uploads of one report."
    r = pack(_pieces([t, t], doc_of=lambda i: f"doc_{i}"), 500, COUNT)
    assert len(r.sections) == 1 and str(r.fates["doc_1:000001"]) == "dropped as duplicate"


def test_citation_line_is_short_and_complete():
    line = citation_line(1, "A" * 200, "doc_abc", 3, 4, ("Part", "Chapter", "Section " + "x" * 80))
    assert line.startswith("[1] ") and line.endswith("— doc_abc") and "p. 3–4" in line
    assert "Part" not in line and len(line) < 160


def test_sentence_spans_cover_cjk_and_latin():
    t = "第一句。第二句！Third one. Fourth"
    assert [t[s:e] for s, e in sentence_spans(t)] == ["第一句。", "第二句！", "Third one.", "Fourth"]


def test_trim_returns_none_when_nothing_useful_fits():
    assert trim_to_match("Short.", set(), 0, COUNT, tokenize) is None


def test_doc_id_is_cited_on_the_first_section_of_each_document_only():
    def piece(doc: str, i: int, start: int, score: float) -> Piece:
        text = f"Paragraph {i} of {doc} about borrowing and lifetimes."
        return Piece(f"{doc}:{i:06d}", doc, i, f"Book {doc}", text, start, start + len(text), score=score,
                     heading_path=(f"Book {doc}", f"Chapter {i}"))
    ranked = [piece("doc_a", 0, 0, 0.9), piece("doc_b", 0, 0, 0.8), piece("doc_a", 5, 500, 0.7)]
    r = pack(ranked, 1000, COUNT)
    cites = [s.citation for s in r.sections]
    assert cites == ["[1] Book doc_a — Chapter 0 — doc_a", "[2] Book doc_b — Chapter 0 — doc_b",
                     "[3] Book doc_a — Chapter 5"]
    assert r.context_tokens_used == COUNT(r.context) == COUNT("\n\n".join(f"{s.citation}\n{s.text}" for s in r.sections))
    # what the packer summed before the exact count: never short of the real count by more than the separators
    assert r.citation_tokens == sum(COUNT(c) for c in cites)


def test_a_colon_does_not_end_a_sentence_so_no_label_is_left_without_its_value():
    """Trimming keeps whole sentences; "Status:" is not one (a fresh-user trial got a passage
    ending "... EUR. Status:" with the value that says the invoice is on hold cut off)."""
    text = ("Invoice 7734 from Dunmore Marine Services: 12,480.00 EUR. Status: on hold until the "
            "delivery note is matched. Review reference AUK-1808; filed by the harbour office.")
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Invoice 7734 from Dunmore Marine Services: 12,480.00 EUR.",
        "Status: on hold until the delivery note is matched.",
        "Review reference AUK-1808; filed by the harbour office.",
    ]
    first = COUNTER.count("Invoice 7734 from Dunmore Marine Services: 12,480.00 EUR.")
    for room in range(first, 60):  # whole sentences fit: the kept run ends at a sentence end
        span = trim_to_match(text, {"invoic", "7734", "approv"}, room, COUNTER.count, tokenize)
        assert span is not None and text[span[0]:span[1]].endswith("."), room


def test_a_word_cut_never_ends_on_a_cell_label_or_separator():
    """When even one sentence is too long (a CSV row), the cut backs off to the last cell
    boundary instead of ending "... | qty: 14 | postcode:" or on a bare "|" (a trial's finding)."""
    text = ('| invoice_id: INV-1003 | description: Storage "reefer" plugs week 7 and week 8 | '
            "amount_eur: 3,980.50 | qty: 14 | postcode: 4021 | customer: Ostrava Rail")
    cuts = set()
    for room in range(10, 45):
        span = trim_to_match(text, {"amount_eur"}, room, COUNTER.count, tokenize)
        if span is None:
            continue
        kept = text[span[0]:span[1]]
        cuts.add(kept)
        assert not kept.rstrip().endswith((":", "|")), (room, kept)
    assert any(k.endswith("week 8") for k in cuts)


def test_an_over_long_sentence_is_cut_around_the_match_not_at_its_start():
    """a14's paragraph is one unpunctuated sentence of ~1,400 characters: a trimmed passage must
    hold the words that match (a trial at budget 60 got the sentence's first words and no code),
    and use the room it has (the window reaches back before the match when the match is late)."""
    text = (CASES / "a14_md_long_unpunctuated_paragraph.md").read_text(encoding="utf-8")
    para = max(text.split("\n\n"), key=len)
    assert len(sentence_spans(para)) == 1 and "SHEARWATER-2414" in para[-300:]
    terms = set(tokenize("yard supervisor code SHEARWATER-2414"))
    for room in range(30, 200, 7):
        span = trim_to_match(para, terms, room, COUNTER.count, tokenize)
        kept = para[span[0]:span[1]]
        assert "SHEARWATER-2414" in kept and COUNTER.count(kept) <= room, room
        assert COUNTER.count(kept) >= room - 8, (room, kept)  # filled up to about a word of the room


def _real_passage(path, first: str, last: str) -> str:
    """The document's text from ``first`` to the end of ``last``, as the parser stores it."""
    from ingest.parsers.text import parse_md, parse_txt
    parse = parse_md if path.suffix == ".md" else parse_txt
    text = parse(path.read_bytes(), path.name).text
    at = text.index(first)
    return text[at:text.index(last, at) + len(last)]


def test_a_trimmed_passage_ends_at_a_sentence_end_else_a_clause_or_word_with_an_ellipsis():
    """Before: budget 50 over docs/guide.md ended "...so nothing is silently truncated when" and
    over the novel "昔我三人桃园结义,誓同生" (cut mid-word, no mark that text was left out)."""
    from pathlib import Path

    from docanchor.text import in_quotation

    from tests.conftest import CORPUS
    cases = [
        (_real_passage(Path("docs/guide.md"), "Documents are parsed", "when it is embedded."), "How are chunks split for the embedder limit?"),
        (_real_passage(CORPUS / "txt" / "sanguo_yanyi_gbk.txt", "去。却说张飞", "以践前盟!”"), "桃园结义"),
    ]
    ends = ("。", "!", "?", ".", "!", "?", "”", '"')
    clause = (",", ";", "、")
    for text, query in cases:
        piece = Piece("d:000000", "d", 0, "T", text, 0, len(text), score=1.0)
        trimmed = 0
        for budget in range(40, 90, 3):
            r = pack([piece], budget, COUNT, query_terms=set(tokenize(query)), tokenize=tokenize)
            assert r.context_tokens_used == COUNT(r.context) <= budget
            for s in r.sections:
                if not s.trimmed:
                    continue
                trimmed += 1
                assert s.text == text[s.start_char:s.end_char]  # the document's own text
                kept = r.context.split(s.citation + "\n", 1)[1].split("\n\n" + "d ·", 1)[0]  # as shown
                if kept.endswith("…"):
                    body = kept[:-1]
                    assert body == s.text
                    nxt = text[s.end_char:s.end_char + 1]
                    inside_quote = in_quotation(text, s.end_char)  # a sentence end inside a speech: cut too
                    assert body.endswith(clause) or nxt.isspace() or inside_quote or not any(
                        c in text[s.start_char:s.end_char] for c in clause), (budget, kept)
                else:
                    assert kept.endswith(ends), (budget, kept)
        assert trimmed, query
    r = pack([Piece("d:000000", "d", 0, "T", cases[1][0], 0, len(cases[1][0]), score=1.0)], 50, COUNT,
             query_terms=set(tokenize("桃园结义")), tokenize=tokenize)
    assert r.sections and not r.sections[0].text.endswith("誓同生"), r.sections[0].text
    assert r.context.endswith(("。", "!”", "…")), r.context


def _wrapped(path, first: str, last: str) -> tuple[str, str]:
    """A real passage that stops at a hard-wrapped line, and the document's text after it."""
    text = _real_passage(path, first, last)
    from ingest.parsers.text import parse_md, parse_txt
    whole = (parse_md if path.suffix == ".md" else parse_txt)(path.read_bytes(), path.name).text
    at = whole.index(text) + len(text)
    return text, whole[at:at + 1]


def test_a_passage_that_stops_at_a_wrapped_line_ends_with_an_ellipsis():
    """Before: a section ending at a chunk's end at a hard line break ("its `doc_id`," in
    docs/guide.md, "马超从" in the novel) was shown as if its sentence ended there: no ellipsis."""
    from pathlib import Path

    from tests.conftest import CORPUS
    cases = [
        (_wrapped(Path("docs/guide.md"), "An anchor is a short text", "its `doc_id`,"), "anchor"),
        (_wrapped(CORPUS / "txt" / "sanguo_yanyi_gbk.txt", "曹操正走之间", "马超从"), "曹操"),
    ]
    for (text, gap), query in cases:
        assert gap == "\n"
        piece = Piece("d:000000", "d", 0, "T", text, 0, len(text), score=1.0, gap_after=gap)
        for budget in (60, 400):  # trimmed at the chunk's end, and whole
            r = pack([piece], budget, COUNT, query_terms=set(tokenize(query)), tokenize=tokenize)
            ends_there = [s for s in r.sections if s.end_char == len(text)]
            assert all(s.tail == "…" for s in ends_there), (budget, r.context[-40:])
        assert r.sections and r.sections[0].tail == "…" and r.context.endswith(text[-3:] + "…"), r.context[-40:]


def test_a_passage_that_starts_inside_a_sentence_starts_with_an_ellipsis():
    """Before: a section starting at a chunk that began after a hard wrap was shown from there with
    nothing to say its sentence began earlier (诸葛亮借东风 at 150: '曰:“将军勿轻视...'; DMCA:
    'unauthorized copying of a copyrighted work.' alone)."""
    cases = [("庶", "曰:“将军勿轻视刘玄德。今玄德得诸葛亮为辅,如虎生翼矣。”", "诸葛亮"),
             ("that prohibits the\n", "unauthorized copying of a copyrighted work.", "copying"),
             ("in this second category.\n\n", "unauthorized copying of a copyrighted work.", "copying"),  # DMCA
             ("It ends. ", "Then a new one starts here and it goes on.", "starts"),
             ("", "The document's first sentence is here.", "first")]
    for before, text, query in cases:
        piece = Piece("d:000001", "d", 1, "T", text, 100, 100 + len(text), score=1.0, before=before)
        r = pack([piece], 400, COUNT, query_terms=set(tokenize(query)), tokenize=tokenize)
        s = r.sections[0]
        cut = before not in ("It ends. ", "")  # the DMCA one resumes a sentence after a page's end
        assert s.head == ("…" if cut else "") and s.text == text, (before, s.head)
        assert r.context == f"{s.citation}\n{s.head}{s.text}{s.tail}"
        assert r.context_tokens_used == COUNT(r.context)


def test_a_word_cut_never_falls_inside_a_url():
    """Before: with no space in the last 20 characters, the cut fell at the limit: 'norwich-ci…'."""
    from retrieval.pack import cut_end
    text = "Read more at https://www.norwich-city.example/history/stadium-and-ground for it"
    limit = text.index("ci") + 2
    end = cut_end(text, 0, limit)
    assert text[:end].rstrip() == "Read more at", text[:end]



def test_a_word_cut_never_falls_at_a_line_break_inside_a_wrapped_url():
    """Before (new-user trial): norwich-city.txt wraps "...http://www.independent.co.uk/s" /
    "port/football/...", and a cut at that line break ended a passage "independent.co.uk/s…"."""
    from retrieval.pack import cut_end
    text = _real_passage(CASES.parent / "corpus" / "txt" / "norwich-city.txt",
                         "Archived (https://we\nb.archive.org/web/20160218110238", "from the")
    assert "independent.co.uk/s\nport/" in text
    for limit in (text.index("/s\nport") + 2, text.index("/s\nport") + 3, text.index("we\nb.") + 2):
        assert text[:cut_end(text, 0, limit)].rstrip() == "Archived", (limit, text[:limit])


def test_a_passage_never_stops_on_a_speech_tag_before_its_speech():
    """Before (new-user trial, MCP searchDocuments at 150 with a doc_id over the novel): a passage
    was a speech tag alone -- "顾雍等曰:" (chapter 44), "允曰:" -- or ended "布笑曰:" right before
    the quoted speech on the next line, with no "…": a line break after a colon counted as the end
    of a line of its own."""
    from tests.conftest import CORPUS
    novel = CORPUS / "txt" / "sanguo_yanyi_gbk.txt"
    cases = [(_real_passage(novel, "正欲待都督一决。", "昭等辞去。"), "顾雍等曰"),
             (_real_passage(novel, "卓乃止。司徒王允曰:", "另日再议。”"), "王允"),
             (_real_passage(novel, "纪灵知吕布领兵来救刘备", "布笑曰:"), "吕布")]
    for text, query in cases:
        piece = Piece("d:000000", "d", 0, "T", text, 0, len(text), score=1.0, gap_after="\n“", before="")
        for budget in range(30, 160, 4):
            r = pack([piece], budget, COUNT, query_terms=set(tokenize(query)), tokenize=tokenize)
            for s in r.sections:
                shown = s.head + s.text + s.tail
                assert not shown.endswith(":"), (query, budget, shown)
                assert s.text == text[s.start_char:s.end_char]


def test_a_table_row_is_one_unit_its_start_has_no_ellipsis_and_a_start_at_its_cell_has_one():
    """A row is one unit (docanchor.text.in_row). Before (new-user trial): a15's row after
    "postcode: 91200" was shown as "…invoice_id: INV-1004 | ..." (a lowercase start counted as a
    sentence resuming), while a section of country-codes.csv starting at a cell inside France's wide
    row ("UNTERM Spanish Formal: ...", or a trimmed window at the cell holding the term) had no "…"
    (fe410a5 made every cell start a unit). Now a row's start gets no "…" and a start inside a row
    gets one."""
    from ingest.parsers.csv import parse_csv
    from tests.conftest import CASES, CORPUS
    path = CORPUS / "csv" / "country-codes.csv"
    text = parse_csv(path.read_bytes(), path.name).text
    row_start = text.index("FIFA: FRA")
    row = text[row_start:text.index("\n", row_start)]
    cell = row.index("UNTERM Spanish Formal:")
    a15 = parse_csv((CASES / "a15_csv_quoted_fields.csv").read_bytes()).text
    inv = a15.index("invoice_id: INV-1004")
    inv_row = a15[inv:a15.index("\n", inv)]
    assert a15[:inv].rstrip().endswith("postcode: 91200")
    cases = [(text[:row_start], row, "France"), (text[:row_start] + row[:cell], row[cell:], "Euro"),
             (text[:row_start], row, "Французская"), (a15[:inv], inv_row, "Ostrava")]
    heads = set()
    for before, body, query in cases:
        piece = Piece("d:000001", "d", 1, "T", body, len(before), len(before) + len(body), score=1.0,
                      before=before[-200:], gap_after="\n\n")
        for budget in (60, 120, 400):
            r = pack([piece], budget, COUNT, query_terms=set(tokenize(query)), tokenize=tokenize)
            assert r.sections, (query, budget)
            s = r.sections[0]
            at_row_start = s.start_char == len(before) and not before.endswith(" ")
            assert s.head == ("" if at_row_start else "…"), (query, budget, s.text[:60])
            assert r.context.split("\n", 1)[1].startswith(s.head + s.text[:20])
            heads.add(s.head)
    assert heads == {"", "…"}  # both kinds of start were met


def test_a_passage_never_starts_inside_a_url_the_source_wraps():
    """Before (new-user trial): norwich-city.txt wraps its references' URLs across lines
    ("(https://\\nweb.archive.org/...", ".../1993112\\n9/439/0045). Sandwell Evening Mail."); a line
    break after "/" or a digit counted as a line end, so a trimmed passage began "9/439/0045)." or
    "web.archive.org/..." as if a sentence started there, with no '…'. A section now starts at the
    sentence or line before the URL, never inside it."""
    import re

    from tests.conftest import CORPUS
    norwich = CORPUS / "txt" / "norwich-city.txt"
    cases = [(_real_passage(norwich, "30. Willars, Ian", "Retrieved 22 June 2020"), "Sandwell Evening Mail"),
             (_real_passage(norwich, "2. Thrussell, Andrea", "Retrieved 23 June 2020."), "FeaturedPlayer web archive")]
    for text, query in cases:
        piece = Piece("d:000000", "d", 0, "T", text, 0, len(text), score=1.0, before="", gap_after="\n")
        urls = [(m.start(), m.end()) for m in re.finditer(r"\(http[^)]*\)", text)]
        assert urls
        for budget in range(30, 120, 6):
            r = pack([piece], budget, COUNT, query_terms=set(tokenize(query)), tokenize=tokenize)
            for s in r.sections:
                assert not any(u0 < s.start_char < u1 for u0, u1 in urls), (query, budget, s.head + s.text[:50])


def _novel_passage_under_its_chapter_heading() -> tuple[str, tuple[str, ...], Piece]:
    """``(text, heading_path, piece)``: a short passage of the novel (../shared/corpus) as one
    piece under its 25-token chapter heading, as a new user's trial met it at 150 tokens."""
    from tests.conftest import CORPUS
    text = _real_passage(CORPUS / "txt" / "sanguo_yanyi_gbk.txt", "纪灵知吕布领兵来救刘备", "布笑曰:")
    heading = ("第十六回 吕奉先射戟辕门 曹孟德败师淯水",)
    piece = Piece("d:000000", "d", 0, "sanguo_yanyi_gbk", text, 0, len(text), score=1.0, heading_path=heading,
                  before="", gap_after="\n")
    return text, heading, piece


def test_at_a_tight_budget_the_evidence_wins_over_a_long_heading():
    """Before (new-user trial, searchDocuments at 150 over the novel): a 25-token chapter heading in
    the citation line left room for "允曰:…" or nothing at all; here budgets 50 to 70 packed nothing.
    Now a section whose text costs fewer tokens than its heading path gets a citation line without
    it (retrieval.pack rule 6), and the heading stays where the text is worth it."""
    text, heading, piece = _novel_passage_under_its_chapter_heading()
    for budget in (50, 60, 70):
        r = pack([piece], budget, COUNT, query_terms=set(tokenize("吕布")), tokenize=tokenize)
        assert r.sections, budget
        s = r.sections[0]
        assert "吕布" in s.text and heading[0] not in r.context, (budget, r.context)
        assert r.context_tokens_used == COUNT(r.context) <= budget
    r = pack([piece], 400, COUNT, query_terms=set(tokenize("吕布")), tokenize=tokenize)
    assert r.sections[0].heading_path == heading and heading[0] in r.context


def test_a_trimmed_passage_is_never_its_chapter_heading_alone():
    """Before (new-user trial, POST /lobechat/searchDocuments at 150 tokens over the novel): "吕布 白门楼"
    answered only "第十九回 下邳城曹操鏖兵 白门楼吕布殒命", "曹操 煮酒论英雄" only its chapter's heading:
    trimming kept the line with most query terms, and a chapter heading repeats the chapter's
    key words. A line equal to one of the chunk's headings (retrieval.pack.is_heading) is never
    the sentence a trimmed passage is built around; the passage carries the sentence after it."""
    from tests.conftest import CORPUS
    novel = CORPUS / "txt" / "sanguo_yanyi_gbk.txt"
    cases = [("第十九回 下邳城曹操鏖兵 白门楼吕布殒命", "玄德引兵两路接应。", "吕布 白门楼"),
             ("第二十一回 曹操煮酒论英雄 关公赚城斩车胄", "何不求\n之?”", "曹操 煮酒论英雄")]
    for heading, last, query in cases:
        text = _real_passage(novel, heading, last)
        piece = Piece("d:000000", "d", 0, "sanguo_yanyi_gbk", text, 0, len(text), score=1.0,
                      heading_path=(heading,), before="", gap_after="\n")
        for budget in range(40, 110, 5):
            r = pack([piece], budget, COUNT, query_terms=set(tokenize(query)), tokenize=tokenize)
            assert r.context_tokens_used == COUNT(r.context) <= budget
            for s in r.sections:
                assert " ".join(s.text.split()) != heading, (query, budget)
                assert "却说" in s.text, (query, budget, s.text)


_DMCA_PAGE8_BEFORE = (
    "The Fairness in Musical Licensing Act, Title II of Pub. L. No. 105-298, 112 Stat. 2827,3 2830-34 (Oct. 27, "
    "1998) also adds a new section 512 to the Copyright Act. This duplication of section numbers will need to be "
    "corrected in a technical amendments bill. Copyright Office and NTIA Studies Relating to Technological Develop-"
    "\n\nment\n\nTitle I of the DMCA requires the Copyright Office to conduct two studies jointly with NTIA, one "
    "dealing with encryption and the other with the effect of technological developments on two existing "
    "exceptions in the Copyright Act.")
"""dmca.pdf's page 8 as the parser gave it before it moved footnotes after the body and read
wrapped headings whole."""


def test_a_passage_never_starts_on_the_tail_of_a_hyphenated_word():
    """Before (new-user trial, "encryption research exemption" at 300 tokens over dmca.pdf): a passage
    started "…ment" alone on a line, the tail of "Develop-\\n\\nment", then "Title I of the DMCA...".
    A passage whose first piece starts on such a tail now starts at its next sentence. The parser
    now reads that wrapped heading whole ("... Development"), so the text is the one it gave then."""
    text = _DMCA_PAGE8_BEFORE
    at = text.index("ment\n\nTitle I of the DMCA")
    end = text.index(".", at + 60) + 1
    piece = Piece("d:000048", "d", 48, "dmca", text[at:end], at, end, score=1.0, before=text[at - 200:at],
                  gap_after="\n\n")
    r = pack([piece], 300, COUNT, query_terms=set(tokenize("encryption research")), tokenize=tokenize)
    s = r.sections[0]
    assert s.text.startswith("Title I of the DMCA") and s.head == "", (s.head, s.text[:30])
    assert s.text == text[s.start_char:s.end_char] and r.context_tokens_used == COUNT(r.context) <= 300
    # as indexed: the tail is a chunk of its own, joined by the chunk after it
    tail = Piece("d:000048", "d", 48, "dmca", "ment", at, at + 4, score=0.5, before=text[at - 200:at],
                 gap_after="\n\n")
    rest = Piece("d:000049", "d", 49, "dmca", text[at + 6:end], at + 6, end, score=1.0, before=text[at - 194:at + 6])
    r = pack([rest, tail], 300, COUNT, query_terms=set(tokenize("encryption research")), tokenize=tokenize)
    s = r.sections[0]
    assert len(r.sections) == 1 and s.text.startswith("Title I of the DMCA") and s.head == "", (s.head, s.text[:30])
    assert s.text == text[s.start_char:s.end_char]
    # its chunk_ids are the chunks whose text it holds (before: "d:000048", the tail left out, too)
    assert s.chunk_ids == ["d:000049"], s.chunk_ids
    assert {k: str(v) for k, v in r.fates.items()} == {"d:000049": "kept in section 1",
                                                       "d:000048": "left out as a word's tail"}


def test_a_passage_never_starts_on_a_scrap_of_the_sentence_before():
    """Before (new-user trial, the novel): passages started "…兵。蔡阳要赶关公" and "…近前。貂蝉转入帘内",
    a character or two of the sentence before (its chunk began on a wrapped line). A start that
    keeps fewer than MIN_CUT_WORDS words of the sentence before starts at the next sentence; a
    longer part of it is kept, with its "…"."""
    before = "擒关某,献与丞相!”众视之,乃将军蔡阳也。正是:欲离万丈蛟龙穴,又遇三千狼虎\n"
    text = "兵。蔡阳要赶关公,毕竟如何,且听下文分解。"
    piece = Piece("d:000007", "d", 7, "sanguo", text, len(before), len(before) + len(text), score=1.0,
                  before=before, after="\n\n\n第二十八回")
    r = pack([piece], 300, COUNT, query_terms=set(tokenize("蔡阳")), tokenize=tokenize)
    s = r.sections[0]
    assert s.text == "蔡阳要赶关公,毕竟如何,且听下文分解。" and s.head == "" and s.tail == "", (s.head, s.text, s.tail)
    assert s.start_char == len(before) + 2 and r.context_tokens_used == COUNT(r.context) <= 300
    longer = "狼虎兵来了。蔡阳要赶关公,毕竟如何,且听下文分解。"  # 5 words of the sentence before: kept
    piece = Piece("d:000007", "d", 7, "sanguo", longer, 30, 30 + len(longer), score=1.0,
                  before="正是:欲离万丈蛟龙穴,又遇三千", after="")
    s = pack([piece], 300, COUNT).sections[0]
    assert s.text == longer and s.head == "…", (s.head, s.text)


def test_a_bare_citation_line_still_leaves_the_sections_heading_path_whole():
    """Before (new-user trial, POST /v1/retrieve): a short section whose citation line left its
    heading out (rule 6) came back with ``"heading_path": []``. The citation line may drop the
    heading to save tokens; the section still carries the heading path its text sits under, and
    the context (and its budget) is the same: the bare citation line and the text."""
    text, heading, piece = _novel_passage_under_its_chapter_heading()
    for budget in (50, 60, 70):
        r = pack([piece], budget, COUNT, query_terms=set(tokenize("吕布")), tokenize=tokenize)
        s = r.sections[0]
        assert s.heading_path == heading and heading[0] not in s.citation, (budget, s.citation)
        assert s.citation == citation_line(1, "sanguo_yanyi_gbk", "d", unit=piece.unit)
        assert r.context == f"{s.citation}\n{s.head}{s.text}{s.tail}"
        assert r.context_tokens_used == COUNT(r.context) <= budget


def test_a_section_never_runs_on_across_a_heading_each_side_is_cited_under_its_own():
    """Before (case a14 at 500 tokens): the end of "## Yard procedures" and the "## Contacts" chunk
    after it were packed as one section cited "Yard procedures", while the README says passages
    are not joined across headings. Each side is now its own section under its own heading."""
    yard = "Then record it on the blue tablet and quote the code SHEARWATER-2414 in every report."
    contacts = "## Contacts\n\n- Yard office: extension 2201"
    title = "Larkspur Freight yard handbook"
    a = Piece("d:000003", "d", 3, title, yard, 0, len(yard), heading_path=(title, "Yard procedures"), score=0.6,
              before="", gap_after="\n\n")
    b = Piece("d:000004", "d", 4, title, contacts, len(yard) + 2, len(yard) + 2 + len(contacts),
              heading_path=(title, "Contacts"), score=0.9, gap_after="")
    for ranked in ([a, b], [b, a]):
        r = pack(ranked, 1000, COUNT)
        assert len(r.sections) == 2, [s.text for s in r.sections]
        by_text = {s.text: s for s in r.sections}
        assert by_text[yard].heading_path[-1] == "Yard procedures" and "Contacts" not in by_text[yard].citation
        assert by_text[contacts].heading_path[-1] == "Contacts" and "Contacts" in by_text[contacts].citation
        assert r.context_tokens_used == COUNT(r.context) <= 1000


def test_a_passage_that_starts_inside_a_reference_entry_starts_with_an_ellipsis():
    """Before (new-user trial over norwich-city.txt): sections started in the middle of a numbered
    reference entry ("Soccerbase. Centurycomm. Archived ...", "Rothmans Football Yearbook
    1986-87. ...", after a sentence end inside entries 57 and 87) with no "…". A start inside a
    numbered entry (between the line of entry N and that of N+1) continues it; one at its number
    starts it."""
    from tests.conftest import CORPUS
    from ingest.parsers.text import parse_txt
    from retrieval.stages.expand import BEFORE_CHARS
    path = CORPUS / "txt" / "norwich-city.txt"
    doc = parse_txt(path.read_bytes(), path.name).text
    cases = [("Soccerbase. Centurycomm. Archived", "58. ", "…"), ("Rothmans Football Yearbook 1986", "88. ", "…"),
             ("87. Dunk, Peter", "88. ", "")]
    for first, upto, head in cases:
        at = doc.index(first, doc.index("gameid=413020") if first.startswith("Soccer") else 0)
        text = doc[at:doc.index(upto, at) + len(upto) + 20]
        piece = Piece("d:000001", "d", 1, "T", text, at, at + len(text), score=1.0,
                      before=doc[max(0, at - BEFORE_CHARS):at])
        r = pack([piece], 400, COUNT, query_terms=set(tokenize("Rothmans Soccerbase")), tokenize=tokenize)
        s = r.sections[0]
        assert s.head == head and s.text == text, (first, s.head)
        assert r.context == f"{s.citation}\n{s.head}{s.text}{s.tail}"


def test_a_heading_line_after_an_unpunctuated_paragraph_is_not_skipped_as_a_scrap():
    """Case a14: "## Contacts" follows a paragraph without punctuation; the heading starts a block
    of its own, so the passage starts at it, not at the next line."""
    before = "and that it must be quoted in every incident report\n\n"
    text = "## Contacts\n\n- Yard office: extension 2201\n- Gate security: extension 2290"
    piece = Piece("d:000014", "d", 14, "yard", text, len(before), len(before) + len(text), score=1.0,
                  before=before, after="")
    s = pack([piece], 300, COUNT).sections[0]
    assert s.text == text and s.head == "", (s.head, s.text)


def test_pieces_and_citation_lines_whose_words_pass_the_room_left_are_never_counted():
    """Once the budget is nearly spent, a piece too long by its words alone is dropped, and a
    citation line too long by its words leaves no room to trim into, without counting either
    (docanchor.tokens.least_tokens: a piece's words are at most its tokens)."""
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return COUNT(text)

    first = "The launch code is kept in the blue safe on the second floor of the annex."
    later = " ".join(["Every later passage here talks about something else entirely."] * 6)
    pieces = _pieces([first, later, later.replace("Every", "Each")], doc_of=lambda i: f"doc_{i}")
    r = pack(pieces, COUNT(citation_line(1, "Title doc_0", "doc_0", None, None)) + 1 + COUNT(first) + 3, count)
    assert [s.chunk_ids for s in r.sections] == [["doc_0:000000"]]
    assert not any(later in t or "Each later" in t for t in counted)
    assert not any(t.startswith("[2]") for t in counted)  # no second section's citation line either


def test_a_cut_passage_never_ends_on_the_next_list_items_number():
    """Before: cut_end took the full stop of a list item's number ("2.") for the last sentence end,
    so a passage cut there ended "... and more\\n2." (issue 15: a number is no sentence end)."""
    from retrieval.pack import cut_end

    text = "1. Open the file with the reader and look at it closely, then\n2. Read every line of it."
    end = cut_end(text, 0, text.index("Read") + 3)
    assert not text[:end].rstrip().endswith("2."), text[:end]


def test_a_joins_only_piece_ranked_above_the_chunk_next_to_it_joins_when_that_chunk_is_packed():
    """Before: a joins-only piece (a heading alone) ranked first had no packed piece next to it yet
    and was dropped for good, so a phrase query whose best match was the heading
    "二、报告期末股东总数及前十名股东持股情况表" (issue-67-example.pdf) never got it back; now it joins
    right after the chunk next to it, before the pieces ranked below that one."""
    heading = "二、报告期末股东总数及前十名股东持股情况表"
    body = "1、普通股股东总数和表决权恢复的优先股股东数量及前 10 名股东持股情况表。"
    other = "Another document's passage, ranked below the body and long enough to matter here."
    h = Piece("d:000015", "d", 15, "T", heading, 0, len(heading), score=1.05, heading_path=(heading,),
              joins_only=True, gap_after="\n")
    b = Piece("d:000016", "d", 16, "T", body, len(heading) + 1, len(heading) + 1 + len(body), score=1.0,
              heading_path=(heading,))
    o = Piece("e:000000", "e", 0, "U", other, 0, len(other), score=0.5)
    r = pack([h, b, o], 1000, COUNT)
    assert r.sections[0].chunk_ids == ["d:000015", "d:000016"]
    assert r.sections[0].text == heading + "\n" + body
    assert str(r.fates["d:000015"]).startswith(("kept", "merged")) and str(r.fates["e:000000"]) == "kept in section 2"
    # it joins before the pieces ranked below its neighbour take the budget
    tight = COUNT(r.context) - COUNT(other) - 4
    r = pack([h, b, o], tight, COUNT)
    assert r.sections[0].chunk_ids == ["d:000015", "d:000016"]
    # with no piece next to it packed, it is still never a section alone
    r = pack([h, o], 1000, COUNT)
    assert [s.chunk_ids for s in r.sections] == [["e:000000"]] and str(r.fates["d:000015"]) == "dropped for budget"
