"""Generated protobuf/gRPC stubs for the public API (protos/batchgate/v1). Do not edit."""
