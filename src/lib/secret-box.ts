import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from "node:crypto";

const PREFIX = "enc:v1:";
const IV_BYTES = 12;
const TAG_BYTES = 16;

interface Key {
  id: string;
  bytes: Buffer;
}

/** A 256-bit key derived from a configured secret (HKDF-SHA256), and a short id that names it without revealing it. */
function deriveKey(secret: string): Key {
  const bytes = Buffer.from(hkdfSync("sha256", secret, "plinth", "secrets at rest v1", 32));
  return { id: createHmac("sha256", bytes).update("key id").digest("base64url").slice(0, 8), bytes };
}

/**
 * Seals secrets kept at rest (an identity provider's client secret, an integration's API key)
 * with AES-256-GCM: `enc:v1:<key id>:<iv>:<ciphertext and tag>`. Each value is bound to its
 * `context` (the row it belongs to), so a sealed value copied into another row does not open.
 * Values sealed under a previous key still open, so the key can be rotated (`resealed` tells
 * which stored values to write again); a value stored before sealing existed opens as itself.
 */
export class SecretBox {
  private readonly current: Key;
  private readonly keys: Map<string, Key>;

  constructor(secret: string, previous: readonly string[] = []) {
    this.current = deriveKey(secret);
    this.keys = new Map([this.current, ...previous.map(deriveKey)].map((key) => [key.id, key]));
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.current.bytes, iv);
    cipher.setAAD(Buffer.from(context));
    const sealed = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
    return `${PREFIX}${this.current.id}:${iv.toString("base64url")}:${sealed.toString("base64url")}`;
  }

  /** The plaintext of a sealed value (or an unsealed one as it is); throws when it cannot be opened. */
  open(stored: string, context: string): string {
    if (!stored.startsWith(PREFIX)) return stored;
    const [keyId, iv, sealed] = stored.slice(PREFIX.length).split(":");
    const key = this.keys.get(keyId ?? "");
    if (!key || !iv || !sealed) {
      throw new Error(
        `a secret at rest is sealed with key ${keyId}, which is neither ENCRYPTION_KEY nor a previous one`,
      );
    }
    const bytes = Buffer.from(sealed, "base64url");
    const decipher = createDecipheriv("aes-256-gcm", key.bytes, Buffer.from(iv, "base64url"));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - TAG_BYTES)), decipher.final()]).toString(
      "utf8",
    );
  }

  sealJson(value: unknown, context: string): string {
    return this.seal(JSON.stringify(value), context);
  }

  openJson<T>(stored: string | null | undefined, context: string, fallback: T): T {
    if (stored === null || stored === undefined) return fallback;
    return JSON.parse(this.open(stored, context)) as T;
  }

  /** Whether a stored value should be written again: unsealed, or sealed under a previous key. */
  needsResealing(stored: string): boolean {
    return !stored.startsWith(`${PREFIX}${this.current.id}:`);
  }
}
