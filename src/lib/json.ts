/** Columns holding JSON are TEXT on both dialects; these keep the (de)serialisation in one place. */
export function toJsonColumn(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

export function fromJsonColumn<T>(value: string | null | undefined, fallback: T): T {
  if (value === null || value === undefined) return fallback;
  return JSON.parse(value) as T;
}
