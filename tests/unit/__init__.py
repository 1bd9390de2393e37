"""Unit tests: pure code, no external service."""
