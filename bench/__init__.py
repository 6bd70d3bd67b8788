"""Benchmarks: each module prints figures; none is part of the test pass/fail."""
