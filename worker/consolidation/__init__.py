"""Consolidation: turning a batch of candidates into new versions of memory files."""
