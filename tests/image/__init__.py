"""`make test-image`: the container image built and its containers run (opt-in; see README)."""
