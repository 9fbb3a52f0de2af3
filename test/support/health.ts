import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';

type HealthClient = grpc.Client & {
  check(
    request: { service: string },
    callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
  ): void;
  watch(request: { service: string }): grpc.ClientReadableStream<{ status: string }>;
};

const definition = protoLoader.loadSync(protoPath, { enums: String });
const { Health } = (
  grpc.loadPackageDefinition(definition) as unknown as {
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  }
).grpc.health.v1;

/** Asks `grpc.health.v1.Health/Check` at `address`; resolves with SERVING, NOT_SERVING, .... */
export async function healthOf(address: string, service = ''): Promise<string> {
  const client = new Health(address, grpc.credentials.createInsecure()) as unknown as HealthClient;
  try {
    return await new Promise((resolve, reject) => {
      client.check({ service }, (error, response) =>
        error ? reject(error) : resolve(response?.status ?? ''),
      );
    });
  } finally {
    client.close();
  }
}

/**
 * Resolves once `grpc.health.v1.Health/Watch` at `address` reports `wanted` (at once if it is
 * the status now): for a status that follows the store's session, which may pass through doubt
 * on its way back.
 */
export async function untilHealth(address: string, wanted: string, service = ''): Promise<void> {
  const client = new Health(address, grpc.credentials.createInsecure()) as unknown as HealthClient;
  const stream = client.watch({ service });
  try {
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (response: { status: string }) => {
        if (response.status === wanted) resolve();
      });
      stream.on('error', reject);
      stream.on('end', () => reject(new Error(`health watch ended before ${wanted}`)));
    });
  } finally {
    stream.cancel();
    client.close();
  }
}
