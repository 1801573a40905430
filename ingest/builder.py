"""Assembles parsed pieces into a :class:`~docanchor.types.ParsedDocument`: each piece is tidied
(:func:`ingest.normalise.tidy`) and appended to the normalised text with a blank line between
pieces, and its :class:`~docanchor.types.Block` records where it landed."""

from __future__ import annotations

from docanchor.text import collapse_space
from docanchor.types import Block, ParsedDocument
from ingest.normalise import tidy
from ingest.titles import division_level, title_problem

SEPARATOR = "\n\n"


class DocumentBuilder:
    """Collects blocks in reading order and tracks the heading path.

    Usage::

        b = DocumentBuilder("docx", title="Handbook")
        b.heading("Chapter 1", level=1)
        b.add("Some paragraph.", page=1)
        parsed = b.build(n_pages=3)
    """

    def __init__(self, doc_type: str, title: str = "") -> None:
        self.doc_type = doc_type
        self.title = title
        self._parts: list[str] = []
        self._blocks: list[Block] = []
        self._length = 0
        self._headings: list[tuple[int, str]] = []
        self._title_open = not title
        """Whether a heading may still give the title: none given, no heading taken, and no
        division heading (:func:`ingest.titles.division_level`) met yet (issue 15: a document's
        title is never the heading of its chapter 1, handbook-872p.docx)."""
        self.flags: dict = {}

    @property
    def heading_path(self) -> tuple[str, ...]:
        return tuple(h for _, h in self._headings)

    def heading(self, text: str, level: int = 1, page: int | None = None) -> None:
        """Add a heading of ``level`` (1 = top): later blocks sit under it until a heading of the
        same or a higher level."""
        text = collapse_space(tidy(text))
        if not text:
            return
        level = max(1, level)
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._headings.append((level, text[:200]))
        self._append(text, "heading", page, level, ())
        if not self._title_open:
            return
        if division_level(text):  # "CHAPTER 1 – INTRODUCTION" names a part, as does every heading in it
            self._title_open = False
        elif not title_problem(text):  # not "Heading 1" or "Figure 2: ..."
            self.title, self._title_open = text[:200], False

    def reset_headings(self) -> None:
        """Forget the current heading path (for parts outside the body: headers, notes)."""
        self._headings.clear()

    def add(self, text: str, kind: str = "paragraph", page: int | None = None, flags: tuple[str, ...] = (),
            raw: bool = False) -> None:
        """Add a non-heading block; empty text is skipped. ``raw`` keeps whitespace as given
        (code, tables); it is still normalised."""
        from ingest.normalise import normalise

        text = normalise(text).strip("\n") if raw else tidy(text)
        if text.strip():
            self._append(text, kind, page, 0, flags)

    def _append(self, text: str, kind: str, page: int | None, level: int, flags: tuple[str, ...]) -> None:
        if self._parts:
            self._parts.append(SEPARATOR)
            self._length += len(SEPARATOR)
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        self._blocks.append(Block(start, self._length, kind, page, self.heading_path, level, flags))

    def build(self, n_pages: int | None = None) -> ParsedDocument:
        return ParsedDocument(
            text="".join(self._parts), blocks=list(self._blocks), doc_type=self.doc_type,
            title=self.title or "Untitled document", n_pages=n_pages, flags=dict(self.flags),
        )
