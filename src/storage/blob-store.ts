/**
 * Where Plinth keeps bytes that are not rows (DESIGN §16): workspace files, the file bytes a
 * backup holds, export dumps. A local directory (the embedded default) or an S3 bucket, behind
 * one interface, so that the domains never know which.
 *
 * Keys are `/`-separated paths built by `keys.ts`. Objects are written once and never changed
 * in place: a `put` is seen whole or not at all, and a `copy` may share the bytes of its source.
 */
export interface BlobStore {
  readonly kind: "local" | "s3";
  /** Makes the store ready to use (the directory, the bucket); called once at start. */
  prepare(): Promise<void>;
  /** Throws when the store cannot be reached (readiness). */
  check(): Promise<void>;
  /**
   * Streams `body` into `key`, replacing what was there; the object exists only once whole and
   * durable. An error from `body` (a byte limit, a client gone) leaves nothing behind.
   */
  put(key: string, body: BlobBody): Promise<{ size: number }>;
  /** The object's bytes, streamed; null when there is no such object. */
  get(key: string): Promise<{ body: ReadableStream<Uint8Array>; size: number } | null>;
  /** Whether the object exists. */
  has(key: string): Promise<boolean>;
  /** Copies `from` to `to` (on the server, or a hard link); false when `from` does not exist. A copy is new: its time is now. */
  copy(from: string, to: string): Promise<boolean>;
  /** Deletes the objects; missing ones are no error. */
  delete(keys: readonly string[]): Promise<void>;
  /** Deletes every object under `prefix` (which ends with `/`). */
  deletePrefix(prefix: string): Promise<void>;
  /** Every whole object under `prefix` (which ends with `/`). */
  list(prefix: string): AsyncIterable<StoredObject>;
  /** Removes what uploads cut short (a crash, a lost connection) left under `prefix` before `before`. */
  removeIncomplete(prefix: string, before: Date): Promise<void>;
}

/** What a put reads: a stream (a Node `Readable` is one), or bytes at hand. */
export type BlobBody = AsyncIterable<Uint8Array> | Uint8Array | string;

export interface StoredObject {
  key: string;
  size: number;
  modifiedAt: Date;
  /** Set on objects that share their bytes with others (hard links): the same value, the same bytes. */
  sharedAs?: string;
}

/** `body` as an async iterable of byte chunks. */
export async function* chunksOf(body: BlobBody): AsyncIterable<Uint8Array> {
  if (typeof body === "string") yield Buffer.from(body, "utf8");
  else if (body instanceof Uint8Array) yield body;
  else yield* body;
}

/** A key's shape: `/`-separated segments of letters, digits, `_`, `-` and `.`, none `.` or `..`. */
const SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,255}$/;

/** Refuses a key (or a prefix ending in `/`) that is not one Plinth builds: never a path out of the store. */
export function assertKey(key: string, { prefix = false } = {}): void {
  const body = prefix ? key.replace(/\/$/, "") : key;
  if ((prefix && !key.endsWith("/")) || !body.split("/").every((segment) => SEGMENT.test(segment))) {
    throw new Error(`not a storage ${prefix ? "prefix" : "key"}: ${JSON.stringify(key)}`);
  }
}
