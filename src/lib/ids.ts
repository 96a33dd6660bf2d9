import { createHash, randomFillSync } from "node:crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"; // Crockford base32, lower-case
const RANDOM_CHARS = 16;

/** Random bytes drawn a block at a time: one `randomFillSync` per 256 ids instead of one per id. */
const pool = Buffer.alloc(RANDOM_CHARS * 256);
let poolOffset = pool.length;

function encodeTime(ms: number): string {
  let out = "";
  let rest = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/**
 * `prefix_` + 10 chars of millisecond time + 16 random chars. Ids sort by creation time,
 * which keeps "newest first" listings stable, and the prefix says what the id names.
 */
export function newId(prefix: string, now: Date = new Date()): string {
  if (poolOffset + RANDOM_CHARS > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  let tail = "";
  for (let i = poolOffset; i < poolOffset + RANDOM_CHARS; i++) tail += ALPHABET[(pool[i] as number) & 31];
  poolOffset += RANDOM_CHARS;
  return `${prefix}_${encodeTime(now.getTime())}${tail}`;
}

/**
 * An id shaped like `newId`'s, with its time part from `at` and its tail drawn from a hash of
 * `seed`: the same seed always gives the same id (idempotent writes), and ids made at about the
 * same time still sort together, so their index entries land on the same few B-tree pages.
 */
export function derivedId(prefix: string, at: Date, seed: string): string {
  const digest = createHash("sha256").update(seed).digest();
  let tail = "";
  for (let i = 0; i < RANDOM_CHARS; i++) tail += ALPHABET[(digest[i] as number) & 31];
  return `${prefix}_${encodeTime(at.getTime())}${tail}`;
}

/**
 * The least id of `prefix` made at `at` or later: every id of `prefix` below it was made before
 * `at`, so a primary key finds a table's rows older than a time without an index on their time.
 */
export function firstIdAt(prefix: string, at: Date): string {
  return `${prefix}_${encodeTime(at.getTime())}`;
}

const ID_TAIL = /^[0-9a-hjkmnp-tv-z]{26}$/;

/** Whether `text` has the shape of an id `newId(prefix)` makes, so that one that cannot be is refused unread. */
export function isIdOf(prefix: string, text: string): boolean {
  return (
    text.length === prefix.length + 27 && text.startsWith(`${prefix}_`) && ID_TAIL.test(text.slice(prefix.length + 1))
  );
}
