"""Benchmarks: batchgate next to what a user would otherwise do, measured side by side.

Run `python -m bench --help` (or `make bench ARGS="…"`). Benchmarks print figures and write a
JSON record under bench/results/; they never assert, and they are not part of `make test`
(except a tiny smoke run that keeps them working).
"""
