"""The extractive summary of offloaded conversation turns: at most ``max_tokens`` tokens, the same
bytes for the same turns.

Shape::

    Turns 3–17 (extractive summary):
    - turn 3 user: Read the 2024 State of the Union and list its fee proposals.
    - turn 6 assistant: The address says credit card late fees fall from $32 to $8.
    - turn 5 tool read_file: State of the Union 2024 …

One line per chosen turn, in turn order, each the turn's best sentence (at most
:data:`SENTENCE_TOKENS` tokens, cut with "…"). Turns are chosen by priority until no further line
fits: the first and the last user turn (what the conversation is about, what is asked now), then
assistant turns (what was stated: the facts), then the other user turns (what was asked), then
tool results; within a group by how many of the sentence's terms other turns share
(:func:`summarize.central.terms`), recent turns first on a tie. A line whose terms the chosen
lines already hold (:data:`REPEAT_SHARE` of them) adds nothing and is left out (the first and last
user turns excepted) -- unless it adds a fact: numbers and names (:data:`FACT`) that no one chosen
line holds together (``Vessel 3 uses berth 17`` after ``Vessel 1 uses berth 12``; terms alone
leave out numbers, so every such line looked like a repeat of the first). A turn's best sentence is its first readable one for a user (the
request) and its best-shared one otherwise (:func:`summarize.central.readable`). Nothing depends on
time or randomness.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

from docanchor.tokens import TokenCounter
from docanchor.types import TurnText
from summarize.anchor import clip
from summarize.central import readable, split_sentences, terms

SENTENCE_TOKENS = 60
"""Longest line body kept per turn, in tokens (longer sentences are cut and end with "…")."""
_PRIORITY = {"assistant": 1, "user": 2}
"""Group order after the first and last user turns (0): an assistant's statement carries the fact a
question asks for; tool results and anything else come last (3)."""
FACT = re.compile(r"\d+(?:[.,:]\d+)*|(?<=[^\s.!?:]\s)[A-Z][\w'-]+")
"""A line's facts: numbers (``12``, ``3.5``, ``14:30``) and names (a capitalised word not
starting a sentence)."""
REPEAT_SHARE = 0.7
"""A line is left out when this share of its terms is already in the chosen lines."""
_FIRST_CHARS = 2_000
"""Only the start of a long turn is split into sentences (a tool result can be a whole book)."""


def heading(turns: Sequence[TurnText]) -> str:
    """The summary's first line, naming the turns it covers."""
    first, last = turns[0].turn, turns[-1].turn
    span = f"Turn {first}" if first == last else f"Turns {first}–{last}"
    return f"{span} (extractive summary):"


def extractive_summary(turns: Sequence[TurnText], max_tokens: int, counter: TokenCounter) -> str:
    """The summary of ``turns`` (oldest first), at most ``max_tokens`` tokens of ``counter``.

    Args:
        turns: the offloaded messages, in conversation order; empty gives ``""``.
        max_tokens: the most tokens the summary may have (the heading alone when nothing more fits;
            ``""`` when not even that fits).
        counter: the tokenizer the summary is measured with (the prompt's).

    Returns:
        The heading line and one line per chosen turn, in turn order (see the module docstring).
    """
    if not turns:
        return ""
    head = heading(turns)
    if counter.count(head) > max_tokens:
        return ""
    shared = Counter(t for turn in turns for t in set(terms(turn.text[:_FIRST_CHARS])))
    candidates = sorted((rank, -score, -turn.turn, line) for rank, score, turn, line in _candidates(turns, shared, counter))
    chosen: dict[int, str] = {}
    held: set[str] = set()
    facts: list[frozenset[str]] = []
    for rank, _, negative_turn, line in candidates:
        body = line.split(": ", 1)[-1]
        line_terms, line_facts = set(terms(body)), frozenset(FACT.findall(body))
        new_fact = bool(line_facts) and not any(line_facts <= held_facts for held_facts in facts)
        if rank and not new_fact and len(line_terms & held) >= REPEAT_SHARE * len(line_terms):
            continue  # nothing new (a line without terms or facts says nothing new either)
        trial = {**chosen, -negative_turn: line}
        if counter.count(_render(head, trial)) <= max_tokens:
            chosen = trial
            held |= line_terms
            facts.append(line_facts)
    return _render(head, chosen)


def _candidates(turns: Sequence[TurnText], shared: Counter, counter: TokenCounter):
    users = [t.turn for t in turns if t.speaker == "user"]
    ends = {users[0], users[-1]} if users else set()
    for turn in turns:
        sentence, score = _best_sentence(turn, shared)
        if not sentence:
            continue
        rank = 0 if turn.turn in ends else _PRIORITY.get(turn.speaker, 3)
        body = clip(counter, sentence, SENTENCE_TOKENS)
        yield rank, score, turn, f"- turn {turn.turn} {turn.speaker}: {body}"


def _best_sentence(turn: TurnText, shared: Counter) -> tuple[str, float]:
    """A turn's sentence for the summary and its score (terms other turns share, per √terms)."""
    sentences = split_sentences(turn.text[:_FIRST_CHARS])
    if not sentences:
        return "", 0.0
    scored = []
    for pos, sentence in enumerate(sentences):
        ts = terms(sentence)
        score = round(sum(1 for t in ts if shared[t] >= 2) / math.sqrt(len(ts) or 1), 6)
        scored.append((not readable(sentence, strict=False), -score if turn.speaker != "user" else 0, pos, sentence))
    _, neg, _, best = min(scored)
    return best, -neg


def _render(head: str, lines: dict[int, str]) -> str:
    return "\n".join([head, *(lines[n] for n in sorted(lines))])
