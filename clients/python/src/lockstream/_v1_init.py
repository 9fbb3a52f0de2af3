"""The generated lockstream.v1 protobuf and gRPC modules (from proto/lockstream/v1): lockstream_pb2
and lockstream_pb2_grpc (LockService), election_pb2 and election_pb2_grpc (ElectionService),
records_pb2 and records_pb2_grpc (RecordService)."""
