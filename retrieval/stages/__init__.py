"""The stages of a retrieval, in the order :func:`retrieval.search.retrieve` runs them.

gather (dense and BM25 lists, chunk reads) -> fuse -> coverage (query terms held) -> references
(reference lists weigh less) -> context -> cut-off -> expand (neighbours, run-on sentences) ->
dedupe (repeated text) -> rerank (optional) -> novelty -> shape (what each candidate brings),
then :func:`retrieval.pack.pack`. Each stage module owns its constants.
"""
