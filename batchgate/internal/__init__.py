"""Generated stubs for the internal APIs (protos/batchgate/internal). Do not edit."""
