"""Context assembly for agents: a long conversation made to fit its model's window under a hard
budget, with what leaves the prompt stored as ordinary documents of the conversation's namespace.

- :mod:`~retrieval.assembly.turns`: the conversation (messages, turns, rounds, tool-call pairing).
- :mod:`~retrieval.assembly.pressure`: pressure, tiers, the predicted reserve, blocks of rounds.
- :mod:`~retrieval.assembly.references`: offloads, their documents and the references that replace them.
- :mod:`~retrieval.assembly.draft`: the prompt being planned and its token accounting.
- :mod:`~retrieval.assembly.optimise`: spill, trim, compact, offload, enforce the budget.
- :mod:`~retrieval.assembly.execute`: storing (fail-open) and evidence.
- :mod:`~retrieval.assembly.assemble`: the five phases; :mod:`~retrieval.assembly.compact`: the
  compaction flows (continue, handoff).
- :mod:`~retrieval.assembly.explain`: the EXPLAIN trace; :mod:`~retrieval.assembly.ports`: what
  is passed in (storing, summarising, evidence).
"""
