"""pdfminer.six through :mod:`ingest.parsers.pdf_miner`: its per-token ``log.debug`` calls are
skipped while its loggers do not log DEBUG (they were about 1.5 million calls over
../shared/corpus/pdf), and logged again when they do, with the same text either way."""

from __future__ import annotations

import logging

import pytest

from ingest.parsers import pdf_miner
from tests.conftest import CORPUS

DMCA = CORPUS / "pdf" / "dmca.pdf"


def _debug_calls(monkeypatch) -> list[str]:
    """Names of the pdfminer loggers each ``Logger.debug`` call went to (any level)."""
    calls: list[str] = []
    real = logging.Logger.debug

    def counted(self, *args, **kwargs):
        if self.name.startswith("pdfminer"):
            calls.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(logging.Logger, "debug", counted)
    return calls


def test_no_per_token_debug_call_while_pdfminer_does_not_log_debug(monkeypatch):
    monkeypatch.setattr(logging.getLogger("pdfminer"), "level", logging.WARNING)
    calls = _debug_calls(monkeypatch)
    text = dict(pdf_miner.pages(DMCA.read_bytes(), {2}, max_pages=1000))[2]
    assert "copyright" in text.lower()
    assert calls.count("pdfminer.psparser") == 0 and calls.count("pdfminer.pdfinterp") == 0


def test_debug_records_come_back_when_pdfminer_logs_debug(monkeypatch, caplog):
    data = DMCA.read_bytes()
    quiet = dict(pdf_miner.pages(data, {2}, max_pages=1000))[2]
    with caplog.at_level(logging.DEBUG, logger="pdfminer"):
        loud = dict(pdf_miner.pages(data, {2}, max_pages=1000))[2]
    assert loud == quiet
    assert any(r.name == "pdfminer.psparser" and r.levelno == logging.DEBUG for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pdfminer"):
        dict(pdf_miner.pages(data, {2}, max_pages=1000))
    assert not [r for r in caplog.records if r.levelno == logging.DEBUG]


@pytest.mark.parametrize("name", ["pdfminer.psparser", "pdfminer.pdfinterp"])
def test_the_quiet_logger_still_warns(name, caplog):
    import importlib

    pdf_miner._quiet_debug()
    module = importlib.import_module(name)
    with caplog.at_level(logging.WARNING, logger=name):
        module.log.warning("a warning %s", "kept")
    assert [r.getMessage() for r in caplog.records if r.name == name] == ["a warning kept"]
