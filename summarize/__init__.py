"""Summaries of ingested documents: the extractive anchor the chat keeps in place of a document.

- :mod:`summarize.anchor` — :func:`~summarize.anchor.build_anchor`, the at most 300-token anchor
  and the stored outline.
- :mod:`summarize.central` — the most central sentences, chosen with the chunk embeddings
  computed at ingest (no second embedding pass).
- :mod:`summarize.outline` — headings in reading order, and a budget-friendly selection.
- :mod:`summarize.notes` — sentences about a document's quality flags.

Everything here is deterministic: the same input gives the same bytes.
"""
