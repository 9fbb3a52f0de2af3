"""The generated lockstream.v1 protobuf and gRPC modules (from proto/lockstream/v1)."""
