"""Generated stubs for the internal APIs v1 (protos/batchgate/internal/v1). Do not edit."""
