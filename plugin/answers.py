"""Tool answers written for a model: short Markdown, every passage under its citation line,
always ending with how to get more, and never longer than :data:`MAX_ANSWER_CHARS` characters.

LobeChat hands a 2xx body verbatim to the model and re-sends it on every later turn, and cuts
tool results at 25,000 characters (../shared/LOBECHAT.md); answers here stay under 8,000.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from docanchor.display import counted
from docanchor.jobs import Job
from docanchor.text import CJK, NO_SPACE, ends_passage, strip_span
from docanchor.tokens import TokenCounter
from docanchor.tool_calls import how_to_line, list_call, list_more_line, naming_namespace, read_call
from docanchor.types import DocumentRecord, RetrievalResult, Section
from retrieval.assembly.references import anchor_lines
from retrieval.pack import ELLIPSIS, cut_end, is_heading
from retrieval.read import ReadResult
from retrieval.render import citation_line

MAX_ANSWER_CHARS = 7600
"""Longest answer, in characters (LOBECHAT.md asks for at most ~8,000)."""


def _fit(head: str, blocks: Sequence[str], foot: str, omitted_note: Callable[[int], str] | None = None,
         sep: str = "\n\n") -> str:
    """``head``, as many ``blocks`` as fit, and ``foot``, within :data:`MAX_ANSWER_CHARS` characters.

    ``omitted_note(n)`` (``n`` = how many) is added when blocks are left out; a first block that
    does not fit alone is cut with an ellipsis.
    """

    def join(parts: Sequence[str]) -> str:
        return sep.join(p for p in parts if p)

    def note(left: int) -> str:
        return omitted_note(left) if left and omitted_note else ""

    kept: list[str] = []
    for block in blocks:
        if len(join([head, *kept, block, note(len(blocks) - len(kept) - 1), foot])) > MAX_ANSWER_CHARS:
            break
        kept.append(block)
    if blocks and not kept:
        room = MAX_ANSWER_CHARS - len(join([head, "x", note(len(blocks) - 1), foot])) + 1
        kept.append(_cut(blocks[0], room))
    return join([head, *kept, note(len(blocks) - len(kept)), foot])[:MAX_ANSWER_CHARS]


def _cut(block: str, limit: int) -> str:
    """``block`` cut to at most ``limit`` characters where :func:`retrieval.pack.cut_end` cuts a
    trimmed passage: after a sentence end, else after a clause or at a word end with
    :data:`retrieval.pack.ELLIPSIS` (never inside a word, except in CJK text with no break)."""
    if len(block) <= limit:
        return block
    end = strip_span(block, 0, cut_end(block, 0, max(limit - len(ELLIPSIS), 0)))[1]
    return block[:end] + ("" if ends_passage(block, end) else ELLIPSIS)


def _first_chunk(section: Section) -> int | None:
    """The ordinal of ``section``'s first chunk (chunk ids end in ``:<ordinal>``), if known."""
    try:
        return min(int(cid.rsplit(":", 1)[1]) for cid in section.chunk_ids)
    except (ValueError, IndexError):
        return None


_CJK_MARKS = f"{NO_SPACE}“”‘’—"
"""Characters of CJK text: ideographs, kana, CJK punctuation (:data:`docanchor.text.NO_SPACE`),
curly quotes and the em dash of an attribution ("——调寄《临江仙》")."""
_CJK_INDENT = re.compile(rf"^[ \t]*\u3000[ \t\u3000]*|^[ \t\u3000]+(?=[{CJK}{_CJK_MARKS}])", re.MULTILINE)
"""A line's East-Asian paragraph indent: ideographic spaces (U+3000), or any indent before CJK
text (:data:`_CJK_MARKS`; NFKC has made the novel's U+3000 indents ASCII spaces); never code,
whose indent is ASCII before ASCII."""
_CJK_GAP = re.compile(rf"(?<=[{CJK}{_CJK_MARKS}])[ \t\u3000]+(?=[{CJK}{_CJK_MARKS}])")
"""Spaces inside a line of CJK text, where CJK writes none: the novel's ideographic spaces between
two lines of a poem ("几度夕阳红。　　白发渔樵江渚上", two ASCII spaces after NFKC)."""
_BLANK_RUN = re.compile(r"\n[ \t\u3000]*\n(?:[ \t\u3000]*\n)*")
_CJK_WRAP = re.compile(rf"(?<=[{CJK}，。、；：！？,.;:!?“”])\n(?=[{CJK}，。、；：！？“”])")
"""A single line break inside CJK text: a hard wrap at a fixed width (the novel's lines), where
CJK writes no space, so the answer joins the lines."""


def compact_passage(text: str, headings: Sequence[str] = (), cut_start: bool = False) -> str:
    """``text`` as a tool answer shows it: without East-Asian paragraph indents (:data:`_CJK_INDENT`),
    spaces inside CJK lines (:data:`_CJK_GAP`; a heading line keeps its spaces) or hard wraps inside CJK text (:data:`_CJK_WRAP`), and with each run of blank lines one blank
    line. Only the model-facing answer is compacted; sections in the JSON doors keep the
    document's text and offsets.

    ``headings`` is the section's heading path; ``cut_start`` says the passage begins inside a line
    (its ``head`` is an ellipsis). A break after a heading line (:func:`_ends_heading`) ends that
    line and is kept, never joined as a hard wrap (new-user trial, issue 15: "…斩黄巾英雄首立功滚滚
    长江东逝水" joined the novel's chapter-1 heading line to its poem), and so is a break before one
    (new-user trial: readDocument across the novel's chapter 80 answered "…且看下文分解。第八十一回
    急兄仇张飞遇害…", where the text has one line break)."""
    lines = _CJK_INDENT.sub("", text).split("\n")
    text = _BLANK_RUN.sub("\n\n", "\n".join(
        line if _ends_heading(line, headings, n > 0 or not cut_start) else _CJK_GAP.sub("", line)
        for n, line in enumerate(lines)))

    def join_wrap(wrap: re.Match[str]) -> str:
        line_start = text.rfind("\n", 0, wrap.start()) + 1
        whole = line_start > 0 or not cut_start
        line_end = text.find("\n", wrap.end())
        next_line = text[wrap.end():line_end if line_end >= 0 else len(text)]
        if _ends_heading(text[line_start:wrap.start()], headings, whole) or is_heading(next_line, headings):
            return wrap.group()
        return ""

    return _CJK_WRAP.sub(join_wrap, text)


def _ends_heading(line: str, headings: Sequence[str], whole: bool) -> bool:
    """Whether ``line`` is a heading line (:func:`retrieval.pack.is_heading`: a Markdown heading or
    equal, whitespace aside, to one of ``headings``) or, when not ``whole`` (a passage cut inside
    the line shows only its end), the end of one of ``headings``."""
    if is_heading(line, headings):
        return True
    end = " ".join(line.split())
    return not whole and bool(end) and any(" ".join(h.split()).endswith(end) for h in headings)


def search_answer(result: RetrievalResult, *, doc_id: str | None, max_budget_tokens: int, counter: TokenCounter,
                  budget_tokens: int | None = None, lead: str = "", namespace: str | None = None,
                  compact: bool = False) -> str:
    """Passages found for a query, each under its citation line, then how to read on.

    The header says "(N of B tokens)": N is the budget tokens (counted with ``counter``) of this
    whole answer, ``lead`` (a short note put first), header, citation lines and "More:" line
    included; B is ``budget_tokens``, the caller's whole budget (default: the passages').
    N is found by rendering until it agrees with the count (a number of up to 3 digits is one
    token, so this settles in one or two renderings). ``namespace``, when the call named one, is
    named in the read-on call too. ``compact`` (for a budget too small for the usual framing):
    citation lines without the heading path, and a "More:" line that is the read-on call alone."""
    scope = f"document {doc_id}" if doc_id else "the documents"
    if not result.sections:
        reason = result.message or f"nothing in {scope} matches “{result.query}”."
        return lead + (f"No passages returned: {reason} Call searchDocuments again with other words or a larger "
                       f"budget_tokens (at most {max_budget_tokens}), or listDocuments to check which documents "
                       "exist.")
    blocks = []
    for n, s in enumerate(result.sections, 1):
        heading = s.heading_path if s.cites_heading and not compact else ()
        cite = citation_line(n, s.title, s.doc_id, s.page_start, s.page_end, heading, unit=s.unit)
        blocks.append(f"**{cite}**\n{s.head}{compact_passage(s.text.strip(), s.heading_path, cut_start=bool(s.head))}{s.tail}")
    top = result.sections[0]
    first = _first_chunk(top)
    start = f'"chunk:{first}"' if first is not None else None
    read_on = f"{read_call(top.doc_id, start, namespace)} " + ("reads on from [1]; " if start else "reads in order; ")
    foot = (f"More: {read_on}a narrower query or a larger budget_tokens (at most {max_budget_tokens}) "
            "finds other passages.") if not compact else f"More: {read_on.rstrip('; ')}."

    weak = f"{result.message} Say so rather than guess. " if result.no_strong_match else ""

    def render(used: int) -> str:
        head = (f"{weak}{counted(len(result.sections), 'passage')} from {scope} for “{result.query}” "
                f"({used} of {budget_tokens or result.budget_tokens} tokens):")
        return lead + _fit(head, blocks, foot,
                           lambda n: f"({counted(n, 'more passage')} left out to keep this answer short.)")

    used = result.context_tokens_used
    text = render(used)
    for _ in range(4):
        total = counter.count(text)
        if total == used:
            break
        used = total
        text = render(used)
    return text


def anchor_answer(record: DocumentRecord, *, counter: TokenCounter, max_tokens: int,
                  namespace: str | None = None) -> str:
    """A document's anchor and how to get its content, in at most ``max_tokens`` budget tokens.

    The anchor (:func:`summarize.anchor.build_anchor`) already ends with its own "More:" line
    and fits ``settings.anchor_tokens``; it is answered as it is, that line naming ``namespace``
    when the call named one (MCP's ``namespace`` argument). See :func:`_anchor_text`.
    """
    return _anchor_text(record.anchor, record.doc_id, f"{record.title} ({record.doc_id})",
                        counter=counter, max_tokens=max_tokens, namespace=namespace)


def job_answer(job: Job, *, counter: TokenCounter, max_tokens: int) -> str:
    """An ingest job as the model should hear it: the anchor when done (at most ``max_tokens``
    budget tokens, see :func:`_anchor_text`), else progress or the error."""
    if job.status == "done" and job.result:
        r = job.result
        lead = "It was already stored.\n" if r.get("duplicate") else ""
        return _anchor_text(str(r.get("anchor") or ""), r["doc_id"], str(r["doc_id"]),
                            counter=counter, max_tokens=max_tokens, lead=lead)
    if job.status in ("failed", "cancelled"):
        return (f"DocAnchor could not add that document ({job.error_code}): {job.error_message} "
                "Tell the user, and ask for another link or file if they want to try again.")
    if job.doc_id is None:  # a URL job still fetching: its doc_id comes from the bytes
        return ("DocAnchor is still downloading that document. Call addDocument again with the same url in a few "
                "seconds: once it is stored, that call answers with its anchor.")
    return indexing_answer(job.doc_id, job.percent, job.stage)


def indexing_answer(doc_id: str, percent: int, stage: str) -> str:
    """A document that is still being indexed (its job ``percent`` done, at ``stage``)."""
    return (f"The document {doc_id} is still indexing, {percent} % ({stage}). "
            f'Call getDocumentAnchor(doc_id="{doc_id}") again in a few seconds; '
            "searchDocuments finds it once indexing is done.")


def list_answer(records: Sequence[DocumentRecord], namespace: str, *, total: int | None = None,
                next_cursor: str | None = None, filtered: str = "", named: str | None = None,
                remaining: int = 0, brief: bool = False) -> str:
    """One page of the documents held, one line each (title, doc id, type, size, tags).

    Args:
        total: documents matching on every page (default: ``len(records)``).
        next_cursor: the next page's cursor; the answer then says how many documents it leaves
            out (``remaining``, those after this page) and how to see them.
        filtered: the filter in words (``tags finance``), said when nothing matches it.
        named: the namespace the call named (MCP's ``namespace`` argument), named in the read-on
            calls too.
        brief: leave out the "More:" line and where else the user sees the list (for a small
            budget).
    """
    total = len(records) if total is None else total
    if not records:
        if filtered:
            return (f"No document matches {filtered}. Call listDocuments without the filter to see every "
                    "document.")
        return empty_answer(namespace)
    head = counted(total, "document") + (f", {len(records)} shown:" if total > len(records) else ":")
    lines = [f"- **{r.title or 'Untitled'}** — `{r.doc_id}` — {_size(r)}" for r in records]
    foot = "" if brief else list_more_line(named)
    if next_cursor:
        foot = (f"{counted(remaining, 'more document')} not shown: {list_call(next_cursor, named)} lists the next ones"
                + ("." if brief else " (the user sees them all with `docanchor list` or on the library page). ")
                + foot).strip()
    return _fit(head, lines, foot, lambda n: f"…and {counted(n, 'more document')} not shown.", sep="\n")


def empty_answer(namespace: str) -> str:
    """The namespace holds no documents: say so, and how to add one."""
    return ("DocAnchor holds no documents yet"
            + (f" in namespace “{namespace}”" if namespace != "default" else "")
            + ". Call addDocument with a public URL, or ask the user to upload a file to DocAnchor "
              "(its upload page, HTTP API or `docanchor ingest`), then search it.")


def read_answer(window: ReadResult, namespace: str | None = None) -> str:
    """A window of one document under its header line, then the cursor to continue (naming
    ``namespace`` when the call named one). The window's text is compacted as a search answer's
    passages are (:func:`compact_passage`, the window's headings kept on their own lines), and
    ends with the window's tail ("…" when it stops inside a sentence). The window's note (it
    starts past a page without indexed text: :attr:`ReadResult.note`) comes first."""
    if not window.text.strip() and window.next_cursor is None:  # at the end: no budget reads more
        return (f"Nothing is left to read in {window.title} ({window.doc_id}) from there: this is the end of "
                "the document. Call readDocument without `from` to start at the beginning.")
    if not window.text.strip():
        return (f"Nothing could be read from {window.title} ({window.doc_id}) there. {window.message} "
                "Call readDocument again with budget_tokens of at least 300, or without `from` to start at "
                "the beginning.").replace("  ", " ")
    if window.next_cursor:
        cursor = f'"{window.next_cursor}"'
        foot = f"More: {read_call(window.doc_id, cursor, namespace)} continues from here."
    else:
        foot = "This is the end of the document."
    return _fit(window.note, [f"**{window.header}**\n{compact_passage(window.text.strip(), window.headings)}"
                              f"{window.tail}"], foot)


def named_anchor(anchor: str, doc_id: str, namespace: str | None, *, counter: TokenCounter, max_tokens: int) -> str:
    """A stored anchor whose "More:" line names ``namespace`` (as references name it:
    :func:`docanchor.tool_calls.naming_namespace`), within ``max_tokens`` budget tokens (counted
    with ``counter``): when the longer line takes it over, the anchor's last other lines go, never
    the read call (:func:`retrieval.assembly.references.anchor_lines`). An anchor that alone
    exceeds ``max_tokens`` (built under a larger ``anchor_tokens`` setting) is kept as stored."""
    stored = anchor.strip()
    text = naming_namespace(stored, doc_id, namespace)
    if namespace and counter.count(text) > max_tokens >= counter.count(stored):
        text = anchor_lines(text, max_tokens, counter)
    return text


def _anchor_text(anchor: str, doc_id: str, fallback: str, *, counter: TokenCounter, max_tokens: int,
                 lead: str = "", namespace: str | None = None) -> str:
    """An anchor as an answer of at most ``max_tokens`` budget tokens (counted with ``counter``).

    The anchor is kept whole, its "More:" line naming ``namespace`` when given (:func:`named_anchor`).
    The line is added only when the anchor has none (an empty anchor answers ``fallback``) and only
    while the answer stays within ``max_tokens``; ``lead`` (a short note) is put first under the
    same condition. An anchor that alone exceeds
    ``max_tokens`` (built under a larger ``anchor_tokens`` setting) is answered as stored.
    """
    text = named_anchor(anchor, doc_id, namespace, counter=counter, max_tokens=max_tokens) or fallback
    if not any(line.startswith("More:") for line in text.splitlines()):
        more = how_to_line(doc_id, namespace)
        if counter.count(f"{text}\n{more}") <= max_tokens:
            text = f"{text}\n{more}"
    if lead and counter.count(lead + text) <= max_tokens:
        text = lead + text
    return text[:MAX_ANSWER_CHARS]


def _size(r: DocumentRecord) -> str:
    parts = [r.doc_type.upper() if r.doc_type else "document"]
    if r.n_pages:
        parts.append(counted(r.n_pages, "page"))
    parts.append(f"{r.n_tokens:,} tokens")
    if r.tags:
        parts.append("tags " + " ".join(f"#{t}" for t in r.tags))
    return ", ".join(parts)
