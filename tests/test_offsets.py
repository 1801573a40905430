"""Offset runs between normalised and decoded text (docanchor.offsets), on real normalisation."""

from __future__ import annotations

from docanchor.offsets import decode_runs, encode_runs, runs_from_origin, slice_runs, source_offset
from ingest.normalise import normalise, normalise_map, normalise_runs


def test_runs_map_every_offset_like_the_origin_map():
    original = "Fish \u00bd kg\r\nMacron \u00af here\r\n\ufb01ne \u2460 end"
    text, origin = normalise_map(original)
    runs = runs_from_origin(origin)
    assert len(runs) < len(origin)
    assert all(source_offset(runs, i) == origin[i] for i in range(len(origin)))
    assert decode_runs(encode_runs(runs)) == runs and decode_runs("") == () and decode_runs(None) == ()
    part = slice_runs(runs, 10, 20)
    assert part[0][0] == 10 and all(source_offset(part, i) == origin[i] for i in range(10, 21))
    assert source_offset(part, 9) is None and source_offset((), 3) is None


def test_text_already_normal_has_one_run_and_slices_normalise_back():
    assert normalise_runs("plain ascii\nonly") == ("plain ascii\nonly", ((0, 0),))
    original = "a\u00bdb\r\nc"
    text, runs = normalise_runs(original)
    assert text == "a1\u20442b\nc"
    s, e = source_offset(runs, 1), source_offset(runs, 4)
    assert normalise(original[s:e]) == text[1:4]
