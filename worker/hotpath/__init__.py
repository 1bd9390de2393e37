"""hotpath."""
