/** JSON with bigints (fencing tokens) as decimal strings, as grpcurl prints uint64. */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, field: unknown) =>
    typeof field === 'bigint' ? field.toString() : field,
  );
}
