"""Retrieval: hybrid search packed under a token budget (:mod:`retrieval.search`), read-more
windows (:mod:`retrieval.read`), and the pure packing and rendering they share."""
