"""An abstractive summary of offloaded turns, written by an OpenAI-compatible chat endpoint.

Off by default (``DOCANCHOR_SUMMARY_LLM_URL`` empty): compaction then uses the deterministic
extractive summary of :mod:`summarize.conversation`, which every test but the endpoint's own uses. When a
URL is set, ``POST {url}/chat/completions`` is sent the turns as text with the request shape of
OpenAI's Chat Completions API (``model``, ``messages``, ``max_tokens``, ``temperature`` 0); the
answer's first choice is the summary, cut to ``max_tokens`` tokens. Its bytes depend on the
endpoint, so it is not deterministic.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Sequence

from docanchor.errors import FetchError
from docanchor.tokens import TokenCounter
from docanchor.types import TurnText

INSTRUCTION = (
    "Summarise the conversation turns below for the assistant that continues this conversation. "
    "Keep the user's goal, every fact, number, name, decision and open question, and which turn each "
    "came from. Write plain lines, no preamble."
)
_TURN_CHARS = 4_000
"""The start of each turn sent to the endpoint, in characters (a tool result may be a whole book)."""


def abstractive_summary(turns: Sequence[TurnText], max_tokens: int, counter: TokenCounter, *, url: str,
                        model: str, api_key: str = "", timeout_s: float = 60.0) -> str:
    """The endpoint's summary of ``turns``, at most ``max_tokens`` tokens of ``counter``.

    Raises:
        FetchError: ``summary_llm_failed`` when the endpoint cannot be reached, times out,
            answers an error status or a body without a message (the caller falls back to the
            extractive summary).
    """
    transcript = "\n\n".join(f"[turn {t.turn} {t.speaker}]\n{t.text[:_TURN_CHARS]}" for t in turns)
    body = {"model": model, "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": transcript}]}
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    request = urllib.request.Request(url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = json.loads(response.read())
        text = answer["choices"][0]["message"]["content"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:  # URLError and timeouts are OSErrors
        raise FetchError(f"The summary endpoint {url} gave no summary ({type(exc).__name__}); the extractive "
                         "summary is used instead.", code="summary_llm_failed") from exc
    if not isinstance(text, str) or not text.strip():
        raise FetchError(f"The summary endpoint {url} answered an empty summary.", code="summary_llm_failed")
    return counter.truncate(text.strip(), max_tokens)
