"""Retrieval: candidates, fusion, sections and packing under a token budget; budgets derived from the conversation."""
