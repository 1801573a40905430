"""DocAnchor's core: settings, errors, token counting, the embedder, the Chroma store and
the data types shared by ``ingest``, ``retrieval``, ``summarize`` and ``plugin``.

Nothing here imports those packages: dependencies point one way
(plugin -> retrieval/ingest/summarize -> docanchor). Nothing is loaded at import time.
"""

__version__ = "0.1.0"
