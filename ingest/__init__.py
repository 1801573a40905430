"""Ingest: detect a file's type, parse it into normalised text and blocks, chunk, embed, store,
and build its anchor. Entry point: :func:`ingest.pipeline.ingest_document`."""
