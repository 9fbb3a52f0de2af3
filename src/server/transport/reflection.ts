/*
 * gRPC server reflection from the descriptor sets `buf build` wrote, so that grpcurl can list,
 * describe and call the services without .proto files.
 */
import { readFileSync } from 'node:fs';
import type { Server } from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';

/**
 * FileDescriptorSets written by `buf build` in `npm run gen`: lockstream's own (with imports and
 * comments), grpc.health.v1 and the reflection protocol itself.
 */
const DESCRIPTOR_SETS = ['lockstream', 'health', 'reflection'].map(
  (name) => new URL(`../../gen/${name}.binpb`, import.meta.url),
);

/**
 * Adds server reflection (grpc.reflection.v1 and v1alpha), so grpcurl can list, describe and
 * call every service on the server with no .proto files at hand, comments included.
 *
 * The descriptors come from buf rather than proto-loader: proto-loader regroups files by
 * package and drops their imports, so grpcurl cannot resolve google.protobuf.Duration
 * (grpc/grpc-node#2958), and it names map entries in a way grpcurl rejects (health's List).
 */
export function addReflection(server: Pick<Server, 'addService'>): void {
  const definition: Record<string, { fileDescriptorProtos: Uint8Array[] }> = {};
  for (const url of DESCRIPTOR_SETS) {
    // @grpc/reflection reads only `fileDescriptorProtos` from each entry of the definition.
    definition[url.pathname] = { fileDescriptorProtos: fileDescriptorProtos(readFileSync(url)) };
  }
  new ReflectionService(definition as unknown as PackageDefinition).addToServer(server);
}

/** The encoded FileDescriptorProtos of a FileDescriptorSet (`repeated FileDescriptorProto file = 1`). */
function fileDescriptorProtos(set: Uint8Array): Uint8Array[] {
  const reader = new BinaryReader(set);
  const files: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) files.push(reader.bytes());
    else reader.skip(wireType);
  }
  return files;
}
