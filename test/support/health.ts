import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';

type HealthClient = grpc.Client & {
  check(
    request: { service: string },
    callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
  ): void;
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
