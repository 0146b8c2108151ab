"""State that outlives a request: the latch store and its snapshot file."""
