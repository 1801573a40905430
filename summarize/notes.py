"""Plain sentences about a document's quality flags (set by the parsers in ``ingest.parsers``)."""

from __future__ import annotations

from typing import Any

from docanchor.display import counted, plural

MAX_PAGES_LISTED = 8
"""Longest list of page ranges written out; the rest is summed up as "and N more"."""


def page_ranges(pages: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1–3, 7"`` (at most :data:`MAX_PAGES_LISTED` ranges)."""
    nums = sorted({int(p) for p in pages if isinstance(p, int) or str(p).isdecimal()})
    ranges: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        ranges.append(str(nums[i]) if i == j else f"{nums[i]}–{nums[j]}")
        i = j + 1
    if len(ranges) > MAX_PAGES_LISTED:
        return ", ".join(ranges[:MAX_PAGES_LISTED]) + f" and {len(ranges) - MAX_PAGES_LISTED} more"
    return ", ".join(ranges)


def _label(pages: list[int]) -> str:
    return plural("page", len(set(pages)))


def _pages(value: Any) -> list[int]:
    if isinstance(value, dict):
        value = value.get("pages", [])
    return [p for p in value if isinstance(p, int)] if isinstance(value, (list, tuple)) else []


def quality_notes(flags: dict[str, Any]) -> list[str]:
    """Short phrases, most important first, for the flags a reader should know about:
    ``garbled_pages``, ``unreadable_pages``, ``image_only_pages`` (pages without text that OCR did
    not read), ``hidden_text`` (a count, or a dict with ``count`` and, for PDF, ``pages``),
    ``glued_pages``, ``ocr`` (pages read by OCR), ``ocr_skipped_pages``, hidden slides, sheets,
    rows and columns, and ``private_use_chars``. Other flags (encoding, parser ...) say nothing about trust and are left out."""
    notes: list[str] = []
    skipped = _pages(flags.get("ocr_skipped_pages"))  # also image-only; said once, below
    image_only = [p for p in _pages(flags.get("image_only_pages")) if p not in skipped]
    for pages, what in ((_pages(flags.get("garbled_pages")), "garbled"),
                        (_pages(flags.get("unreadable_pages")), "unreadable"),
                        (image_only, "image-only (no text layer)")):
        if pages:
            notes.append(f"{_label(pages)} {page_ranges(pages)} {what}, not indexed")
    hidden = flags.get("hidden_text")
    if hidden:
        count = hidden.get("count", 0) if isinstance(hidden, dict) else hidden
        where = page_ranges(_pages(hidden))
        n = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0
        what = counted(n, "hidden text passage") if n else "hidden text"
        on = f" on {_label(_pages(hidden))} {where}" if where else ""
        notes.append(f"{what} skipped{on} (possible prompt injection)")
    glued = _pages(flags.get("glued_pages"))
    if glued:
        notes.append(f"words may run together on {_label(glued)} {page_ranges(glued)}")
    ocr = flags.get("ocr")
    if isinstance(ocr, dict) and _pages(ocr):
        notes.append(f"{_label(_pages(ocr))} {page_ranges(_pages(ocr))} read by OCR (letters may be wrong)")
    if skipped:
        notes.append(f"scanned {_label(skipped)} {page_ranges(skipped)} not read (OCR page cap), not indexed")
    for key, what in (("hidden_slides", "hidden slide"), ("hidden_sheets", "hidden sheet"),
                      ("hidden_rows", "hidden row"), ("hidden_columns", "hidden column")):
        value = flags.get(key)
        n = value.get("count", 0) if isinstance(value, dict) else value
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            notes.append(f"{counted(n, what)} skipped")
    private = flags.get("private_use_chars")
    if isinstance(private, int) and not isinstance(private, bool) and private > 0:
        notes.append(f"{private} private-use (icon) characters removed")
    return notes
