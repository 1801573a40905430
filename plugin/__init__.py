"""DocAnchor's edges: the Python API (:class:`plugin.api.DocAnchor`), the HTTP app with the
LobeChat plugin routes (:mod:`plugin.app`) and the CLI (:mod:`plugin.cli`). Nothing imports
this package."""
