"""Chaos tests: killed processes, restarted or full Redis, skewed clocks, hung dependencies."""
