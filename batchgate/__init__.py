"""batchgate: a self-hosted LLM Batch API gateway.

This package holds the `batchgate` command line (`batchgate.cli`), the process launcher used
by `batchgate up`, the simulated upstream, and the generated protobuf stubs (`batchgate.v1`,
`batchgate.internal.v1`). The services themselves live in the `services` package.
"""

__version__ = "0.1.0"
