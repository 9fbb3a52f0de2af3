import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Server } from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';

/** `buf build` output (a FileDescriptorSet with imports and comments), written by `npm run gen`. */
const DESCRIPTOR_SET = fileURLToPath(new URL('../../gen/lockstream.binpb', import.meta.url));

/**
 * Adds server reflection (grpc.reflection.v1 and v1alpha), so grpcurl can list, describe and
 * call the service with no .proto files at hand, comments included.
 *
 * The descriptors come from buf rather than proto-loader: proto-loader regroups files by
 * package and drops their imports, and grpcurl then cannot resolve google.protobuf.Duration
 * (grpc/grpc-node#2958).
 */
export function addReflection(server: Pick<Server, 'addService'>): void {
  const files = fileDescriptorProtos(readFileSync(DESCRIPTOR_SET));
  // @grpc/reflection reads only `fileDescriptorProtos` from each entry of the definition.
  const definition = { 'lockstream.v1': { fileDescriptorProtos: files } };
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
