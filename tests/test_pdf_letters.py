"""PDF text that reaches the index with its letters (issue 17, "Documents it had never seen"):
ligatures behind private-use code points, spacing accents, vertical CJK columns, and titles made
of unmapped glyphs. Each PDF is generated here with :mod:`tests.pdf_writer`."""

from __future__ import annotations

from ingest.normalise import compose_spacing_diacritics, spacing_accent_side
from ingest.parsers.pdf import parse_pdf
from ingest.parsers.pdf_fonts import glyph_text
from tests.pdf_writer import PdfWriter, literal, to_unicode_cmap, utf16_hex


def _good(parsed) -> str:
    return " ".join(" ".join(parsed.text[b.start : b.end] for b in parsed.blocks if not b.flags).split())


def _ascii_cmap(extra: dict[bytes, str]) -> bytes:
    entries = {bytes([c]): chr(c) for c in range(32, 127)}
    entries.update(extra)
    return to_unicode_cmap(entries)


def _lines_pdf(font_args: dict, lines: list[bytes], title: str | None = None) -> bytes:
    w = PdfWriter()
    font = w.simple_font(**font_args)
    body = b"BT /F1 12 Tf 16 TL 72 720 Td " + b" T* ".join(literal(ln) + b" Tj" for ln in lines) + b" ET\n"
    w.page(body, {"F1": font})
    return w.build(title=title)


# ------------------------------------------------------------------ ligatures in private use

LIGATURE_LINES = [b"The \x01nal \x02gures of the \x03eet \x04ow", b"are o\x05cial and su\x06cient, see WREN-5150."]
LIGATURE_WORDS = "The final figures of the fleet flow are official and sufficient, see WREN-5150."


def test_private_use_ligatures_get_their_letters_from_glyph_names():
    """ToUnicode maps each ligature to a private-use code point; /Differences names the glyph
    (AGL names, underscore ligatures, uniXXXX, suffixes). On 66038e9: 'The nal gures ...'."""
    pua = {bytes([i]): chr(0xE000 + i) for i in range(1, 7)}
    names = b"1 /fi /f_i.liga /fl /f_l /f_f_i /uniFB03"
    parsed = parse_pdf(_lines_pdf({"differences": names, "to_unicode": _ascii_cmap(pua)}, LIGATURE_LINES), "m.pdf")
    assert LIGATURE_WORDS in _good(parsed)
    assert "text_quality" not in parsed.flags and "private_use_chars" not in parsed.flags


def test_glyph_names_pypdf_cannot_read_become_letters():
    """Without a ToUnicode, pypdf writes unknown glyph names out ('/f_l', '/fi.alt')."""
    names = b"1 /f_i.alt /fi.sc /f_l /f_l.liga /f_f_i.alt /f_f_i.liga"
    parsed = parse_pdf(_lines_pdf({"differences": names}, LIGATURE_LINES), "m.pdf")
    assert LIGATURE_WORDS in _good(parsed)
    assert "/f" not in parsed.text


def test_unrecoverable_ligatures_flag_the_page():
    """Glyph names that say nothing ('g17'): the page is flagged text_quality, not silently
    indexed as 'nal gures'."""
    pua = {bytes([i]): chr(0xE000 + i) for i in range(1, 7)}
    names = b"1 /g17 /g18 /g19 /g20 /g21 /g22"
    parsed = parse_pdf(_lines_pdf({"differences": names, "to_unicode": _ascii_cmap(pua)}, LIGATURE_LINES), "m.pdf")
    quality = parsed.flags["text_quality"]
    assert quality["pages"] == [1] and "letter" in quality["reasons"]["1"]
    assert "WREN-5150" in _good(parsed)


def test_icons_in_private_use_are_not_a_quality_problem():
    pua = {b"\x01": "\uf0b7"}
    lines = [b"\x01 Berths open at six", b"\x01 Cranes are inspected weekly"]
    parsed = parse_pdf(_lines_pdf({"differences": b"1 /g1", "to_unicode": _ascii_cmap(pua)}, lines), "m.pdf")
    assert "text_quality" not in parsed.flags and parsed.flags["private_use_chars"] == 2


def test_glyph_text_follows_the_adobe_glyph_list_rules():
    assert glyph_text("/fi") == "fi" and glyph_text("f_f_i") == "ffi" and glyph_text("uniFB02") == "fl"
    assert glyph_text("f_l.liga") == "fl" and glyph_text("uni00660069") == "fi" and glyph_text("u1F600") == "\U0001F600"
    assert glyph_text("g17") == "" and glyph_text("uniE001") == "" and glyph_text(".notdef") == ""


# ------------------------------------------------------------------ spacing accents

def test_spacing_accents_after_a_letter_are_composed():
    """WinAnsi 0x88 is U+02C6, 0xB8 U+00B8; /ring is U+02DA. On 66038e9 'fe\u02c6te',
    'franc \u0327ais', 'a \u030angstrom'."""
    lines = [b"La fe\x88te du port, franc\xb8ais, 12 a\x01ngstrom, GANNET-7"]
    parsed = parse_pdf(_lines_pdf({"differences": b"1 /ring"}, lines), "m.pdf")
    assert "La fête du port, français, 12 ångstrom, GANNET-7" in _good(parsed)


def test_accents_before_their_letter_are_composed_forward():
    """TeX sets an accent before its letter ('\u02c7Sedivy', 'Baudi\u02c7s'): the text's plain
    cases decide the side."""
    text = "Baudi\u02c7s and \u02c7Sedivy, Lukacs"
    assert compose_spacing_diacritics(text, spacing_accent_side(text)) == "Baudiš and Šedivy, Lukacs"


def test_an_acute_used_as_apostrophe_stays():
    text = "don\u00b4t touch the Frenchman\u00b4s cafe\u00b4"
    assert compose_spacing_diacritics(text, spacing_accent_side(text)) == "don\u00b4t touch the Frenchman\u00b4s café"


# ------------------------------------------------------------------ vertical CJK

COLUMNS = ["冷链中转区的温度", "记录全部合格。第", "二季度报告完成。"]


def test_vertical_columns_are_read_right_to_left():
    """Three columns in a -V font, drawn in the order middle, left, right. On 66038e9 the
    text came in drawing order: '记录全部合格。第二季度报告完成。冷链中转区的温度'."""
    w = PdfWriter()
    latin, cjk = w.helvetica(), w.cjk_font(vertical=True)
    content = b"BT /F1 10 Tf 72 770 Td (Harbour bulletin KITE-88) Tj ET\nBT /F2 20 Tf\n"
    for idx in (1, 2, 0):
        content += b"1 0 0 1 %d 740 Tm %s Tj\n" % (500 - idx * 30, utf16_hex(COLUMNS[idx]))
    content += b"ET\n"
    w.page(content, {"F1": latin, "F2": cjk})
    good = _good(parse_pdf(w.build(), "v.pdf"))
    assert "KITE-88" in good
    assert "冷链中转区的温度记录全部合格。第二季度报告完成。" in good.replace(" ", "")


def test_a_column_drawn_in_pieces_is_read_top_to_bottom():
    w = PdfWriter()
    cjk = w.cjk_font(vertical=True)
    content = (b"BT /F1 20 Tf 1 0 0 1 500 600 Tm " + utf16_hex("合格。") + b" Tj "
               b"1 0 0 1 500 740 Tm " + utf16_hex("温度记录全部") + b" Tj "
               b"1 0 0 1 470 740 Tm " + utf16_hex("下季度增加叉车。") + b" Tj ET\n")
    w.page(content, {"F1": cjk})
    good = _good(parse_pdf(w.build(), "v.pdf")).replace(" ", "")
    assert "温度记录全部合格。下季度增加叉车。" in good


def test_horizontal_cjk_is_left_as_it_was():
    w = PdfWriter()
    cjk = w.cjk_font(vertical=False)
    content = b"BT /F1 14 Tf 72 700 Td " + utf16_hex("冷链中转区的温度记录全部合格。") + b" Tj ET\n"
    w.page(content, {"F1": cjk})
    assert "冷链中转区的温度记录全部合格。" in _good(parse_pdf(w.build(), "h.pdf"))


# ------------------------------------------------------------------ titles

def _unmapped_title_pdf(meta_title: str | None = None) -> bytes:
    """Page 1 starts with a heading in an Identity-H font without ToUnicode (low CIDs come out
    as control characters and symbols), then body text in Helvetica."""
    w = PdfWriter()
    desc = w.add(b"<< /Type /FontDescriptor /FontName /ABCDEF+Unmapped /Flags 4 /FontBBox [0 -200 1000 900] "
                 b"/ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 >>")
    cid = w.add(b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /ABCDEF+Unmapped /CIDSystemInfo "
                b"<< /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor %d 0 R /DW 600 >>" % desc)
    unmapped = w.add(b"<< /Type /Font /Subtype /Type0 /BaseFont /ABCDEF+Unmapped /Encoding /Identity-H "
                     b"/DescendantFonts [%d 0 R] >>" % cid)
    helv = w.helvetica()
    heading = b"<0003005100110058001500440016004f000300240013001400150003>"
    content = (b"BT /F2 18 Tf 72 740 Td " + heading + b" Tj ET\n"
               b"BT /F1 11 Tf 72 700 Td (Quarterly report of the harbour master, reference PIPIT-31.) Tj ET\n")
    w.page(content, {"F1": helv, "F2": unmapped})
    return w.build(title=meta_title)


def test_a_title_of_unmapped_glyphs_is_not_used_and_the_page_is_flagged():
    """On 66038e9 the title was the heading's glyph codes ('\\x03Q\\x11X\\x15D\\x16O\\x03$...')."""
    parsed = parse_pdf(_unmapped_title_pdf(), "harbour-report.pdf")
    assert parsed.title == "Quarterly report of the harbour master, reference PIPIT-31."
    assert parsed.flags["text_quality"]["pages"] == [1]
    assert "unmapped" in parsed.flags["text_quality"]["reasons"]["1"]


def test_a_metadata_title_of_symbols_is_not_used():
    parsed = parse_pdf(_unmapped_title_pdf(meta_title="\x01\x02 %$# 0011 ~~"), "harbour-report.pdf")
    assert parsed.title == "Quarterly report of the harbour master, reference PIPIT-31."


def test_a_good_metadata_title_still_wins():
    parsed = parse_pdf(_unmapped_title_pdf(meta_title="Harbour master report Q3"), "harbour-report.pdf")
    assert parsed.title == "Harbour master report Q3"
