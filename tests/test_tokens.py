"""Budget token counts summed over segments or words equal the encoders' own counts, and the word
bound never passes them (docanchor.tokens)."""

from __future__ import annotations

import random

import pytest

from docanchor.tokens import get_counter, least_tokens, segments, words
from tests.conftest import CORPUS, SHARED

ENCODINGS = ("cl100k_base", "o200k_base")
TEXTS = sorted((SHARED / "bench" / "chunking_eval" / "corpora").glob("*.md")) + sorted(
    p for sub in ("md", "txt", "html") for p in (CORPUS / sub).iterdir() if p.is_file())
SPECIAL = list("\n\n\n\r \t\x0b\x85\xa0\u2028\u3000/./'!,:-#|\"aZé\u0301sltvdmr1 2。曹操")
"""Characters the pre-tokenizers' expressions treat apart: line breaks, other whitespace, "/",
punctuation, apostrophes and contraction letters, upper and lower case, a combining mark,
digits, CJK letters and a CJK full stop."""


def _read(path):
    data = path.read_bytes()
    for encoding in ("utf-8", "gbk"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def _check(counter, text: str) -> None:
    real = len(counter.encode(text))
    assert sum(len(counter.encode(s)) for s in segments(text)) == real, repr(text)
    assert sum(len(counter.encode(w)) for w in words(text)) == real, repr(text)
    assert counter.count(text) == real, repr(text)
    assert least_tokens(text) <= real, repr(text)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_counts_of_corpus_passages_are_the_sums_of_their_segments(encoding):
    counter = get_counter(encoding)
    rng = random.Random(16)
    assert len(TEXTS) >= 8
    for path in TEXTS:
        text = _read(path)
        _check(counter, text)
        for _ in range(150):
            start = rng.randrange(len(text))
            _check(counter, text[start:start + rng.randint(1, 3000)])


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_counts_of_strings_of_the_characters_the_pre_tokenizer_treats_apart_are_the_sums(encoding):
    counter = get_counter(encoding)
    rng = random.Random(encoding)
    for _ in range(30_000):
        _check(counter, "".join(rng.choice(SPECIAL) for _ in range(rng.randint(1, 16))))


def test_segments_cut_after_a_line_break_and_between_a_full_stop_and_its_space_only():
    assert segments("One. Two\nThree\n/usr\n  four") == ["One.", " Two\n", "Three\n/usr\n  four"]
    assert segments("") == [""]
    assert "".join(segments(_read(TEXTS[0]))) == _read(TEXTS[0])


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_word_bound_holds_where_split_and_the_pre_tokenizers_disagree_on_whitespace(encoding):
    counter = get_counter(encoding)
    rng = random.Random(encoding + "least")
    chars = SPECIAL + list("\x1c\x1f./\n")
    for _ in range(30_000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(1, 16)))
        assert least_tokens(text) <= len(counter.encode(text)), repr(text)


def test_the_word_bound_counts_words_less_a_slash_after_a_line_break():
    assert least_tokens("One two  three") == 3
    assert least_tokens(".\n/usr/bin") == 1  # o200k: ".\n/" is one pre-token
    assert least_tokens("a\x1cb") == 1  # split cuts at \x1c, the encodings do not
    assert least_tokens("") == least_tokens(" \n ") == 0


def test_words_are_cut_before_a_space_that_follows_another_character_only():
    assert words("One two  three.\n four\tfive") == ["One", " two", "  three.\n four\tfive"]
    assert words(" lead") == [" lead"]
    assert "".join(words(_read(TEXTS[0]))) == _read(TEXTS[0])
