"""Ingest: detect a file's type, parse it into normalised text and blocks, chunk, embed, store,
and build its anchor. Entry points: :func:`ingest.stream.ingest_document` and :func:`ingest.stream.ingest_stream`."""
