"""The shared text vocabulary (docanchor/text.py) and the stages that cut text by it."""

from __future__ import annotations

import pytest

from docanchor.text import SENTENCE_STOP, cjk_share, collapse_space, is_cjk, joins_tight, word_count
from retrieval.pack import sentence_spans
from retrieval.stages.expand import boundary_sentence
from summarize.central import split_sentences


@pytest.mark.parametrize("text", [
    "Apple vs. Orange", "see e.g. the table", "as in Fig. 3 below", "Item No. 5 is", "J. Smith wrote",
    "it cost 3.5 dollars", "Smith et al. found", "cf. the notes", "Dr. Who",
    "pp. 256–257, 616–622, 636, 656–657. ISBN 0-7472-7857-1",  # norwich-city.txt's references
    "pp. 264-265, 592-593. ISBN 0-7472-7905-5",
])
def test_an_abbreviation_initial_or_decimal_ends_no_sentence(text):
    """Before (new-user trial): a page range's full stop ended a sentence, and MCP searchDocuments
    answered "57." out of "656–657." on norwich-city.txt."""
    assert SENTENCE_STOP.search(text) is None


@pytest.mark.parametrize("text,end", [
    ("It is old. Then", 10), ("Say \"go.\" Then", 9), ("The answer is No. Then", 17), ("好的。然后", 3),
    ("Really? Yes", 7), ("It ends here.", 13),
])
def test_sentence_ends(text, end):
    assert SENTENCE_STOP.search(text).end() == end


def test_packing_keeps_a_sentence_with_vs_whole():
    """Before: trimming cut "Team A vs." off its sentence, and the first half never came back."""
    text = "The final was Team A vs. Team B in Paris. It rained."
    assert [text[a:b] for a, b in sentence_spans(text)] == ["The final was Team A vs. Team B in Paris.", "It rained."]


def test_a_boundary_sentence_runs_past_e_g():
    text = "Units, e.g. metres, are kept. The rest follows."
    a, b = boundary_sentence(text, after=True)
    assert text[a:b] == "Units, e.g. metres, are kept."


def test_the_anchor_splits_sentences_by_the_same_rule():
    assert split_sentences("See Fig. 2 for the data. Next one.") == ["See Fig. 2 for the data.", "Next one."]


def test_words_and_cjk():
    assert word_count("Header text") == 2 and word_count("(") == 0 and word_count("三国演义 ok") == 5
    assert is_cjk("国") and not is_cjk("a")
    assert cjk_share("三国a") == pytest.approx(2 / 3) and cjk_share("123") == 0.0


def test_has_words_answers_as_word_count_does():
    """has_words(text, n) stops at the n-th word and says what word_count(text) >= n says: on random
    strings of the characters the two treat apart (CJK letters, kana punctuation, other letters,
    digits, "_", spaces, punctuation) and on the corpus's lines, for n from 0 to 9."""
    import random

    from docanchor.text import has_words
    from tests.conftest import CORPUS

    rng = random.Random(3)
    alphabet = "三国・かナ한a1_ é²Ⅻ.-\n\u3000"
    texts = ["".join(rng.choices(alphabet, k=rng.randrange(12))) for _ in range(3000)]
    texts += [line for f in sorted(CORPUS.glob("txt/*"))[:6] for line in f.read_text(errors="replace").splitlines()[:300]]
    for text in texts:
        for n in range(10):
            assert has_words(text, n) == (word_count(text) >= n), (text, n)


@pytest.mark.parametrize("text", ["", "plain ASCII text, 42.", "naïve café ² Ⅻ", "三国a", "三国演义 第一回 ok ²",
                                  "한국어 문장 and", "かなカナ漢字", "123 ４５６", "\u3000\u3000"])
def test_cjk_share_is_the_cjk_share_of_the_letters(text):
    letters = sum(1 for ch in text if ch.isalpha())
    expected = sum(1 for ch in text if is_cjk(ch)) / letters if letters else 0.0
    assert cjk_share(text) == expected


@pytest.mark.parametrize("raw, joined", [
    ("然后徐\n    \u3000\u3000图归耕故园", "然后徐图归耕故园"),  # a wrap inside Chinese: no space
    ("谏曰:“明\n公所以", "谏曰:“明公所以"),
    ("楚、汉,\n分争", "楚、汉,分争"),  # punctuation next to Han ends the line
    ("かな\nカナ", "かなカナ"),
    ("第一回\u3000宴桃园", "第一回 宴桃园"),  # a space inside a line stays a space
    ("Hello\n  world", "Hello world"),
    ("end.\n明公", "end. 明公"),  # Latin before the break
    ("한국어\n문장", "한국어 문장"),  # Korean wraps at word gaps
])
def test_joining_lines_puts_no_space_inside_chinese_or_japanese(raw, joined):
    assert collapse_space(raw) == joined
    left, _, right = raw.partition("\n")
    assert joins_tight(left.rstrip(), right.strip()) == (" " not in joined.replace("\u3000", "x")), raw


@pytest.mark.parametrize("before, after, expected", [
    ("a few of its most central sentences, its `doc_id`,", "\nand one line", False),  # docs/guide.md
    ("看看赶上,马超从", "\n后使枪搠来。", False),  # the novel's hard wrap
    ("one pointer to the first", "\nvalue in the second table", False),  # an <img alt> wrapped
    ("It ends here.", "\nNext one", True),
    ("## Anchors", "\n\nAn anchor is short", True),  # a blank line ends a block
    ("- item one", "\n- item two", True),  # the next line starts a list item
    ("| a | b |", "\n| c | d |", True),
    ("Status: OK", "\nNext", True),  # a line of its own (not lowercase, comma or hyphen)
    ("责其无信。布笑曰:", "\n“我有一计,使袁、刘两家都不怨我。”", False),  # the novel: a speech tag before its speech
    ("瑜曰:“公等之见皆同否?”顾雍等曰:", "\n“所议皆同。”", False),  # the novel, chapter 44
    ("The notice reads:", "\nClosed on Sundays.", False),  # a colon introduces what follows
    ("\"Iwan Roberts in focus\" (https://", "\nweb.archive.org/web/20080404203351/", False),  # norwich-city.txt
    ("(https://www.britishnewspaperarchive.co.uk/viewer/bl/0002488/1993112", "\n9/439/0045).", False),
    ("(http", "\ns://www.britishnewspaperarchive.co.uk/", False),
    # norwich-city.txt: a URL's full stop before its next line, the address going on (issue 15's trial)
    ("deserve all the plaudits, despite Arsenal defeat\" (https://www.pinkun.", "\ncom/opinion/norwich-city", False),
    ("Archived (https://web.archive.org/web/20190424093514/http://www.", "\ns4c.cymru/sgorio/", False),
    ("(https://www.britishnewspaperarchive.co.", "\nuk/viewer/bl/0000578/19940203", False),
    ("(http://www.soccerbase.com/players/player.sd?player_id=6784&season_id=126).", "\nSoccerbase. Centurycomm.",
     True),  # the URL closed: its reference's sentence ends
    ("(https://www.11v11.com/players/iwan-roberts-2257/).", "\n11v11. AFS Enterprises.", True),
    ("More at https://example.org.", "\nThe next sentence", True),  # a capital starts a sentence
    ("More at https://example.org.", "\n33. Roberts 2004", True),  # a list item starts a block
    ("The end of the text", "", True),
    # dmca.pdf: a page break (blank lines) inside a sentence; new-user trial, 2026-12-02
    ("permit the development of access control measures, and the", "\n\ndevelopment of", False),
    ("Archived (https://example.org/x.stm) from the original on 13", "\nmore text", False),
    ("The six additional exceptions are as follows:", "\n\n1. The first", False),  # dmca.pdf: its list follows
    # norwich-city.txt: a URL wrapped over three lines; its last line starts "0)", a list number's look
    ("Archived (https://web.archiv\ne.org/web/20191107160249/https://www.pinkun.com/norwich-city/iw\n"
     "an-roberts-norwich-city-column-crucial-period-for-canaries-1-636241", "\n0) from the original", False),
    ("qty: 22 | postcode: 91200", "\n\ninvoice_id: INV-1004 | customer: Ostrava Rail", True),  # a15: rows
    ("row 2 | name: Ada | city: york", "\nrow 3 | name: Bo", True),  # an XLSX row ends at its line's end
    # dmca.pdf: a page break, then the next page's footnote, inside a sentence (new-user trial, issue 15)
    ("Section 1201 divides technological measures into two categories: measures that prevent unauthorized "
     "access to a copyrighted work and measures that prevent", "\n\n“Copying” is used in this context", False),
    ("General approach", "\n\nSection 103 of the DMCA adds", True),  # a short line (a heading) ends
    ("- a list item that runs on for quite a few words without a stop", "\n\nThe next paragraph", True),
])
def test_a_line_end_is_a_sentence_end_unless_the_line_wraps(before, after, expected):
    """Before (retrieval.pack.ends_sentence): a line end after a lowercase letter counted as a
    sentence end, and a passage cut at a chunk's end at a hard-wrapped line ("its `doc_id`,",
    "马超从") got no ellipsis."""
    from docanchor.text import ends_sentence
    assert ends_sentence(before + after, len(before)) is expected


@pytest.mark.parametrize("before, after, expected", [
    ("It ends. ", "Then it goes on.", True),
    ("", "The first words.", True),
    ("in this second category.\n\n", "unauthorized copying of a copyrighted work.", False),  # dmca.pdf
    ("video ", "games.[55] The 2003 season", False),  # norwich-city.txt
    ("The six additional exceptions are as follows:\n", "1. Nonprofit library", True),  # a list item starts a block
    ("谏曰:\n", "“刘备英雄", False),  # a speech tag's colon ends no sentence: its speech follows
    ("刘玄德。今玄德得诸葛亮为辅,如虎生翼矣。”操曰:“诸葛亮何人\n", "也?”庶曰", False),
    ("qty: 22 | postcode: 91200\n\n", "invoice_id: INV-1004 | customer: Ostrava Rail", True),  # a15: a row
    ("FIFA: FRA | Dial: 33 | ", "ISO4217-currency_minor_unit: 2 | Capital: Paris", False),  # inside a row
    ("FIFA: FRA | Dial: 33 | ", "official_name_fr: France | Capital: Paris", False),
    ("access to a copyrighted work and measures that prevent\n\n", "“Copying” is used in this context", True),
    # the novel: a start inside a quoted poem, after a couplet's 。 (new-user trial, MCP searchDocuments)
    ("后人有诗叹之曰:“生死无二\n志,丈夫何壮哉!不从金石论,空负栋梁材。辅主真堪敬,辞亲实可哀。", "白门身死日,谁肯\n似公台!”", False),
    ("宫曰:“吾闻以孝治天下者,不害人之亲。", "老母妻子之存亡,亦在于明公耳。”", False),  # inside a speech
    ("操曰:“公如是,奈公之老母妻子何?”", "宫曰:“吾闻以孝治天下", True),  # the quotation closed before
    ("He said “Go home. ", "Now.” Then he left.", False),
    # inside a numbered reference entry, after its first line or a sentence of it (norwich-city.txt)
    ("87. Dunk, Peter, ed. (1986). ", "Rothmans Football Yearbook 1986-87.\nQueen Anne Press.\n88. Dunk", False),
    ('57. "Norwich 1-0 Sheff Utd" (http://www.soccerbase.com/results3.sd?gameid=413020).\n',
     "Soccerbase. Centurycomm. Retrieved 13 November 2007.\n58. \"Roberts\"", False),
    ("Retrieved 8 July 2020.\n", "87. Dunk, Peter, ed. (1986).\n88. Dunk", True),  # an entry's own first line
    ("1. Libraries may copy a work.\n", "Open-domain question answering is a task.", True),  # no entry 2: no list
    ("1. Libraries may copy a work.\n\n", "Open-domain question answering is a task.\n2. Then", True),  # a blank line
])
def test_a_passage_starts_a_sentence_where_the_text_before_ends_one(before, after, expected):
    """Before: no such rule; a passage starting "unauthorized copying of..." was shown as whole."""
    from docanchor.text import starts_sentence
    assert starts_sentence(before + after, len(before)) is expected


def test_the_anchor_keeps_a_closing_quote_with_its_cjk_sentence():
    """Before: summarize/central.py had its own CJK sentence end (no closing quotes), so the
    anchor's sentence "飞曰:“嫂嫂住着。”" lost its ” to the next one; it now uses docanchor.text.CJK_STOP."""
    assert split_sentences("飞曰:“嫂嫂住着。”然后请嫂嫂入城。") == ["飞曰:“嫂嫂住着。”", "然后请嫂嫂入城。"]


@pytest.mark.parametrize("text, sentences", [
    # dmca.pdf: a list follows the colon, and a page break falls inside a sentence
    ("The six additional exceptions are as follows:\n\n- Nonprofit library exception.",
     ["The six additional exceptions are as follows:\n\n- Nonprofit library exception."]),
    ("permits circumvention of access control measures, and the\n\ndevelopment of the means. Next.",
     ["permits circumvention of access control measures, and the\n\ndevelopment of the means.", "Next."]),
    ("qty: 22 | postcode: abc\ninvoice_id: INV-1004 | customer: Ostrava", ["qty: 22 | postcode: abc",
                                                                          "invoice_id: INV-1004 | customer: Ostrava"]),
    ("Archived (https://we\nb.archive.org/web/1/x-1-636241\n0) from the original.",
     ["Archived (https://we\nb.archive.org/web/1/x-1-636241\n0) from the original."]),
])
def test_packing_cuts_sentences_where_ends_sentence_says_a_sentence_ends(text, sentences):
    """Before: retrieval.pack.sentence_spans had its own line-end rule (a blank line, or a line
    break not after WRAP_AFTER), so a trimmed passage stopped at a colon before its list, at a PDF
    page break inside a sentence, inside a wrapped URL, and ran a row on into the next."""
    assert [text[a:b] for a, b in sentence_spans(text)] == sentences


def test_a_chunks_boundary_sentence_breaks_where_the_text_vocabulary_says():
    """Before: retrieval.stages.expand kept its own break rule (_RUN_BREAK) beside
    docanchor.text's sentence ends; docanchor.text.RUN_BREAK is now the one definition, and a full
    stop after a digit (a list number in a financial report's row) is still no break."""
    from docanchor.text import RUN_BREAK, RUN_END
    text = "Row 1. Revenue: 5.\nNext line. Last one"
    assert RUN_BREAK.search(text).start() == text.index("\n")
    a, b = boundary_sentence(text, after=True)
    assert text[a:b] == "Row 1. Revenue: 5."
    a, b = boundary_sentence(text, after=False)
    assert text[a:b] == "Last one"
    assert RUN_END.search("It ends here. ") and not RUN_END.search("Item 5.")


def test_a_quotation_left_open_at_its_paragraphs_end_ends_there():
    """Before (new-user trial, the novel): a passage ending a chapter "…正是:\\n“才离虎窟愈生去,又遇龙潭
    鼓浪来。毕竟子龙怎地脱身,且听下回分解。" (the text's ” is missing) got "…" after it, as if the
    quotation went on. A quotation never runs past its paragraph; inside one that goes on, a
    sentence end is still no passage's end."""
    from docanchor.text import ends_passage

    ending = "大喝:“赵云快下马受缚!”正是:\n“才离虎窟愈生去,又遇龙潭鼓浪来。毕竟子龙怎地脱身,且听下回分解。"
    for after in ("\n\n\n\n\n第四十二回 张翼德大闹长坂桥 刘豫州败走汉津口", "\n\n", "  \n  \n却说", ""):
        assert ends_passage(ending + after, len(ending)), repr(after)
    speech = "孔明曰:“今孙坚已丧,其子皆幼。乘此虚弱之时,火速进军,江东一鼓可得。"
    assert not ends_passage(speech + "若迟,则彼有备矣。”", len(speech))
    assert not ends_passage(speech + "\n若迟,则彼有备矣。”", len(speech))


@pytest.mark.parametrize("text, after, sentence", [
    # the novel: a hard-wrapped line inside a sentence is no break
    ("袁绍手提宝剑,辞别百官\n而出,悬节东门,奔冀州去了。卓谓太傅袁隗曰:“汝侄无礼", True, "袁绍手提宝剑,辞别百官\n而出,悬节东门,奔冀州去了。"),
    ("我等今可\n据住险阻,遣人从小路直入羌中求救,许以和亲,羌人必起兵袭蜀兵之后。吾却以大兵击\n之", True,
     "我等今可\n据住险阻,遣人从小路直入羌中求救,许以和亲,羌人必起兵袭蜀兵之后。"),
    ("卓从之。即日差人拜绍\n为渤海太守", False, "即日差人拜绍\n为渤海太守"),
    ("the sentence wraps here\nand ends here. Next", True, "the sentence wraps here\nand ends here."),
    ("Chapter 3\nThe text after it. More", True, "Chapter 3"),
], ids=["cjk-after", "cjk-quoted-after", "cjk-before", "latin-wrap", "line-end"])
def test_a_chunks_boundary_sentence_runs_over_a_hard_wrapped_line(text, after, sentence):
    """Before (new user, the novel): a neighbour's boundary sentence stopped at any line break, so
    `search "废汉帝陈留践位" --budget 600` ended "袁绍手提宝剑,辞别百官…" and "诸葛亮乘雪破羌兵" "...我等今可…" at
    every budget: the CJK text wraps its lines inside sentences. A line break inside a chunk is
    judged with the chunk's text after it (docanchor.text.ends_sentence)."""
    a, b = boundary_sentence(text, after=after)
    assert text[a:b] == sentence


@pytest.mark.parametrize("mark", ["#", "##", "###", "######", "-", ">"])
def test_a_line_break_before_a_block_of_its_own_ends_the_line_before_it(mark):
    """BLOCK_START is what starts a line that is a block of its own (a list item, a heading, a
    quote, a table row). Before: it knew the heading "# X" but not "## X" to "###### X", so a
    prose line broken off without a stop ran on into a level-2 heading after it (one sentence of
    sentence_spans, as if a page break split it) and a "## X" line ending in a lowercase word
    counted as broken-off prose."""
    from docanchor.text import BLOCK_START, breaks_off, ends_sentence, starts_sentence

    line = "the rules below apply to every bay and every crane on the quay"
    text = f"{line}\n\n{mark} next part of the manual\n\nMore text."
    assert BLOCK_START.match(f"{mark} x")
    assert ends_sentence(text, len(line)) and starts_sentence(text, len(line) + 2)
    assert [text[a:b] for a, b in sentence_spans(text)][:2] == [line, f"{mark} next part of the manual"]
    heading = f"{mark} {line}"
    assert not breaks_off(heading + "\n\nMore", len(heading))


def test_seven_hashes_start_no_heading():
    from docanchor.text import BLOCK_START
    assert not BLOCK_START.match("####### x") and not BLOCK_START.match("#hashtag")


@pytest.mark.parametrize("text, sentences", [
    ("1. Open the file.\n2. Read it.", ["1. Open the file.", "2. Read it."]),
    ("Steps:\n  1. Open the file. Then close it.\n  2. Read it.",
     ["Steps:\n  1. Open the file.", "Then close it.", "2. Read it."]),
    ("12. Rothmans Football Yearbook.\n13. Queen Anne Press.", ["12. Rothmans Football Yearbook.", "13. Queen Anne Press."]),
    ("It cost 3.5 dollars, e.g. at No. 5 vs. No. 6. The war ended in 1945. Then peace.",
     ["It cost 3.5 dollars, e.g. at No. 5 vs. No. 6.", "The war ended in 1945.", "Then peace."]),
])
def test_a_list_number_decimal_or_abbreviation_ends_no_sentence(text, sentences):
    """Before: sentence_spans cut a list item's number at its line's start ("1.") as a sentence of
    its own (issue 15 names "No.", "e.g.", "vs." and decimals too); a full stop after a number
    inside a line ("in 1945. Then") still ends its sentence."""
    assert [text[a:b] for a, b in sentence_spans(text)] == sentences
