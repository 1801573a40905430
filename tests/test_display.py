"""The "not shown" line: summarize writes it, retrieval.assembly recognises it (one format,
docanchor.display)."""

from docanchor.display import is_not_shown, not_shown
from summarize.outline import Heading, render


def test_a_not_shown_line_counts_in_words_and_is_recognised():
    assert not_shown(1, "heading") == "(+1 more heading not shown)"
    assert not_shown(1204, "column", "; readDocument shows every column") == (
        "(+1,204 more columns not shown; readDocument shows every column)")
    assert is_not_shown(not_shown(3, "heading"))
    assert not is_not_shown("(+44) 20 7946 0958 is the phone number")
    assert not is_not_shown("- Outline entry (+2 not shown)")


def test_the_outline_ends_with_the_line_the_reference_recognises():
    lines = render([Heading(0, 1, "Introduction", 1), Heading(1, 1, "Methods", 2)], total=7)
    assert lines[-1] == "(+5 more headings not shown)" and is_not_shown(lines[-1])
