"""A small PDF writer for test fixtures: raw objects, content streams and fonts, so a test can
draw exactly the operators it is about (ISO 32000-1 section 7: file structure; 9: text).

    w = PdfWriter()
    font = w.helvetica()
    w.page(b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET", fonts={"F1": font})
    data = w.build(title="Memo")

Objects are numbered in the order they are added; the catalog and page tree are written last.
"""

from __future__ import annotations

import zlib


def literal(text: str | bytes) -> bytes:
    """A PDF literal string ``(...)`` for Latin-1 text, with ``\\``, ``(`` and ``)`` escaped."""
    raw = text.encode("latin-1") if isinstance(text, str) else text
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def utf16_hex(text: str) -> bytes:
    """A hex string ``<...>`` of ``text`` in UTF-16BE (the codes of a ``UniGB-UCS2`` or
    ``Identity`` font whose CIDs follow Unicode)."""
    return b"<" + text.encode("utf-16-be").hex().upper().encode() + b">"


def to_unicode_cmap(entries: dict[bytes, str], code_bytes: int = 1) -> bytes:
    """A ToUnicode CMap mapping each code (``bytes`` of ``code_bytes`` length) to a string."""
    lo, hi = b"00" * code_bytes, b"FF" * code_bytes
    lines = [b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap",
             b"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def",
             b"/CMapName /Test-UCS def /CMapType 2 def",
             b"1 begincodespacerange <" + lo + b"> <" + hi + b"> endcodespacerange",
             b"%d beginbfchar" % len(entries)]
    for code, text in entries.items():
        lines.append(b"<" + code.hex().upper().encode() + b"> <" + text.encode("utf-16-be").hex().upper().encode() + b">")
    lines += [b"endbfchar", b"endcmap CMapName currentdict /CMap defineresource pop end end"]
    return b"\n".join(lines) + b"\n"


class PdfWriter:
    """Collects objects and pages; :meth:`build` returns the file's bytes."""

    def __init__(self) -> None:
        self._objects: list[bytes] = []
        self._pages: list[int] = []
        self._pages_ref = self.add(b"")  # the page tree, filled in by build()

    def add(self, body: bytes) -> int:
        """Add an object; returns its number."""
        self._objects.append(body)
        return len(self._objects)

    def stream(self, data: bytes, entries: bytes = b"", compress: bool = True) -> int:
        """Add a stream object (Flate-compressed unless ``compress`` is false)."""
        if compress:
            data = zlib.compress(data)
            entries += b" /Filter /FlateDecode"
        return self.add(b"<< /Length %d %s >>\nstream\n" % (len(data), entries) + data + b"\nendstream")

    def helvetica(self) -> int:
        return self.add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")

    def cjk_font(self, vertical: bool = False) -> int:
        """STSong-Light (not embedded) with the ``UniGB-UCS2-H`` or ``-V`` CMap: codes are UTF-16BE."""
        desc = self.add(b"<< /Type /FontDescriptor /FontName /STSong-Light /Flags 6 /FontBBox [0 -200 1000 900] "
                        b"/ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 880 /StemV 80 >>")
        cid = self.add(b"<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light /CIDSystemInfo "
                       b"<< /Registry (Adobe) /Ordering (GB1) /Supplement 2 >> /FontDescriptor %d 0 R /DW 1000 >>"
                       % desc)
        cmap = b"/UniGB-UCS2-V" if vertical else b"/UniGB-UCS2-H"
        return self.add(b"<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding %s "
                        b"/DescendantFonts [%d 0 R] >>" % (cmap, cid))

    def simple_font(self, differences: bytes = b"", to_unicode: bytes | None = None,
                    base: bytes = b"/Helvetica") -> int:
        """A Type1 font with WinAnsi base encoding, ``/Differences [...]`` (raw array body) and an
        optional ToUnicode CMap (raw CMap text). Widths 500 for codes 0-255."""
        enc = b"<< /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [" + differences + b"] >>"
        extra = b""
        if to_unicode is not None:
            extra = b" /ToUnicode %d 0 R" % self.stream(to_unicode)
        widths = b" ".join([b"500"] * 256)
        return self.add(b"<< /Type /Font /Subtype /Type1 /BaseFont " + base + b" /FirstChar 0 /LastChar 255 "
                        b"/Widths [" + widths + b"] /Encoding " + enc + extra + b" >>")

    def page(self, content: bytes, fonts: dict[str, int] | None = None, *, xobjects: dict[str, int] | None = None,
             ext_gstates: dict[str, bytes] | None = None, media_box: bytes = b"0 0 612 792",
             extra: bytes = b"") -> int:
        """Add a page drawing ``content``; resources name fonts and XObjects by object number,
        ExtGStates by their raw dictionary bodies."""
        res = b""
        if fonts:
            res += b"/Font <<" + b"".join(b" /%s %d 0 R" % (k.encode(), v) for k, v in fonts.items()) + b" >> "
        if xobjects:
            res += b"/XObject <<" + b"".join(b" /%s %d 0 R" % (k.encode(), v) for k, v in xobjects.items()) + b" >> "
        if ext_gstates:
            res += b"/ExtGState <<" + b"".join(b" /%s %s" % (k.encode(), v) for k, v in ext_gstates.items()) + b" >> "
        contents = self.stream(content)
        number = self.add(b"<< /Type /Page /Parent %d 0 R /MediaBox [%s] /Contents %d 0 R /Resources << %s>> %s>>"
                          % (self._pages_ref, media_box, contents, res, extra))
        self._pages.append(number)
        return number

    def form(self, content: bytes, fonts: dict[str, int] | None = None, bbox: bytes = b"0 0 612 792",
             matrix: bytes = b"1 0 0 1 0 0") -> int:
        """A Form XObject drawing ``content`` (for ``/Fm Do``)."""
        res = b""
        if fonts:
            res = b"/Resources << /Font <<" + b"".join(b" /%s %d 0 R" % (k.encode(), v) for k, v in fonts.items()) + b" >> >>"
        return self.stream(content, b"/Type /XObject /Subtype /Form /BBox [%s] /Matrix [%s] %s" % (bbox, matrix, res))

    def gray_image(self, width: int = 8, height: int = 8, level: int = 128) -> int:
        """An 8-bit DeviceGray image XObject of one grey level."""
        return self.stream(bytes([level]) * (width * height),
                           b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
                           b"/BitsPerComponent 8" % (width, height))

    def build(self, title: str | None = None) -> bytes:
        kids = b" ".join(b"%d 0 R" % n for n in self._pages)
        self._objects[self._pages_ref - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(self._pages))
        catalog = self.add(b"<< /Type /Catalog /Pages %d 0 R >>" % self._pages_ref)
        info = self.add(b"<< /Title " + literal(title) + b" >>") if title is not None else None
        out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for number, body in enumerate(self._objects, 1):
            offsets.append(len(out))
            out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(self._objects) + 1)
        for off in offsets:
            out += b"%010d 00000 n \n" % off
        trailer = b"/Size %d /Root %d 0 R" % (len(self._objects) + 1, catalog)
        if info:
            trailer += b" /Info %d 0 R" % info
        out += b"trailer\n<< " + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
        return bytes(out)
