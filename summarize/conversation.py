"""The extractive summary of offloaded conversation turns: at most ``max_tokens`` tokens, the same
bytes for the same turns.

Shape::

    Turns 3–17 (extractive summary):
    - turn 3 user: Read the 2024 State of the Union and list its fee proposals.
    - turn 5 tool read_file: State of the Union 2024 …
    - turn 6 assistant: The address says credit card late fees fall from $32 to $8. Overdraft fees fall to $3.

One line per chosen turn, in turn order, holding the turn's chosen sentences in their order (each
at most :data:`SENTENCE_TOKENS` tokens, cut with "…"). Sentences are chosen by priority until no
further one fits: the best sentence of the first and the last user turn (what the conversation is
about, what is asked now), then of the assistant turns (what was stated: the facts), then the
assistant turns' further sentences that hold a fact (an answer's port or date is often its second
sentence), then the other user turns' requests (what was asked), then tool results; within a group
by how many of the sentence's terms other turns share (:func:`summarize.central.terms`), recent
turns first on a tie. A sentence whose terms the chosen ones already hold (:data:`REPEAT_SHARE` of
them) adds nothing and is left out (the first and last user turns excepted) -- unless it adds a
fact: numbers and names (:data:`FACT`) that no one chosen sentence holds together (``Vessel 3 uses
berth 17`` after ``Vessel 1 uses berth 12``; terms alone leave out numbers, so every such line
looked like a repeat of the first). A turn's best sentence is its first readable one for a user
(the request) and its best-shared one otherwise (:func:`summarize.central.readable`). Nothing
depends on time or randomness.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from docanchor.tokens import TokenCounter
from docanchor.types import TurnText
from summarize.anchor import clip
from summarize.central import readable, split_sentences, terms

SENTENCE_TOKENS = 60
"""Longest line body kept per turn, in tokens (longer sentences are cut and end with "…")."""
_PRIORITY = {"assistant": 1, "user": 3}
"""Group order after the first and last user turns (0): an assistant's statement carries the fact a
question asks for, then its further sentences holding a fact (:data:`FURTHER_RANK`), then the other
user turns; tool results and anything else come last (:data:`OTHER_RANK`)."""
FURTHER_RANK = 2
"""The group of an assistant turn's sentences after its best one that hold a fact (:data:`FACT`):
after every assistant turn's best sentence, before the other user turns' requests."""
OTHER_RANK = 4
"""The last group: tool results and any other speaker's best sentence."""
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
    speakers = {turn.turn: turn.speaker for turn in turns}
    chosen: dict[int, dict[int, str]] = {}
    held: set[str] = set()
    facts: list[frozenset[str]] = []
    for candidate in sorted(_candidates(turns, shared, counter)):
        line_terms, line_facts = set(terms(candidate.body)), frozenset(FACT.findall(candidate.body))
        new_fact = bool(line_facts) and not any(line_facts <= held_facts for held_facts in facts)
        if candidate.rank and not new_fact and len(line_terms & held) >= REPEAT_SHARE * len(line_terms):
            continue  # nothing new (a line without terms or facts says nothing new either)
        trial = {**chosen, candidate.turn: {**chosen.get(candidate.turn, {}), candidate.pos: candidate.body}}
        if counter.count(_render(head, trial, speakers)) <= max_tokens:
            chosen = trial
            held |= line_terms
            facts.append(line_facts)
    return _render(head, chosen, speakers)


@dataclass(frozen=True, order=True)
class _Candidate:
    """A sentence the summary may take, ordered as they are tried: by rank (group), then the most
    shared first, then the most recent turn, then sentence order."""

    rank: int
    negative_score: float
    negative_turn: int
    pos: int
    body: str = field(compare=False)

    @property
    def turn(self) -> int:
        return -self.negative_turn


def _candidates(turns: Sequence[TurnText], shared: Counter, counter: TokenCounter) -> Iterator[_Candidate]:
    """Every turn's best sentence, ranked by speaker (:data:`_PRIORITY`), and an assistant turn's
    further sentences that hold a fact (:data:`FURTHER_RANK`); each cut at :data:`SENTENCE_TOKENS`."""
    users = [t.turn for t in turns if t.speaker == "user"]
    ends = {users[0], users[-1]} if users else set()
    for turn in turns:
        scored = _scored_sentences(turn, shared)
        if not scored:
            continue
        best = min(scored)
        for key in scored:
            _, negative_score, pos, sentence = key
            if key == best:
                rank = 0 if turn.turn in ends else _PRIORITY.get(turn.speaker, OTHER_RANK)
            elif turn.speaker == "assistant" and FACT.search(sentence):
                rank = FURTHER_RANK
            else:
                continue
            yield _Candidate(rank, negative_score, -turn.turn, pos, clip(counter, sentence, SENTENCE_TOKENS))


def _scored_sentences(turn: TurnText, shared: Counter) -> list[tuple[bool, float, int, str]]:
    """A turn's sentences as ``(unreadable, -score, position, sentence)``, the least the turn's best:
    score is the terms other turns share per √terms (0 for a user's, whose first readable sentence
    is the request)."""
    scored = []
    for pos, sentence in enumerate(split_sentences(turn.text[:_FIRST_CHARS])):
        ts = terms(sentence)
        score = round(sum(1 for t in ts if shared[t] >= 2) / math.sqrt(len(ts) or 1), 6)
        scored.append((not readable(sentence, strict=False), -score if turn.speaker != "user" else 0.0, pos, sentence))
    return scored


def _render(head: str, chosen: dict[int, dict[int, str]], speakers: dict[int, str]) -> str:
    """The heading and one line per turn, its chosen sentences in their order."""
    lines = (f"- turn {n} {speakers[n]}: " + " ".join(chosen[n][p] for p in sorted(chosen[n])) for n in sorted(chosen))
    return "\n".join([head, *lines])
