"""Real, in-memory implementations of store protocols for pure tests (not mocks)."""
