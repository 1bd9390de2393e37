"""Process-level plumbing: the embedded Redis server and connection factories."""
