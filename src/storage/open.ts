import type { Config } from "../config.ts";
import { UnavailableError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { BlobStore } from "./blob-store.ts";
import { LocalBlobStore } from "./local.ts";
import { S3BlobStore } from "./s3.ts";

/** The blob store STORAGE_URL names: its S3 bucket, or (unset) DATA_DIR. */
export function openBlobStore(config: Config, log: Logger): BlobStore {
  return config.storage ? new S3BlobStore(config.storage, log) : new LocalBlobStore(config.dataDir);
}

/**
 * Makes the store ready at start. A bucket that cannot be reached does not stop the start: the
 * requests that need it answer 503 meanwhile and readiness says so, and it may be back in a moment.
 */
export async function prepareBlobStore(store: BlobStore, log: Logger): Promise<void> {
  try {
    await store.prepare();
  } catch (error) {
    if (!(error instanceof UnavailableError)) throw error;
    log.warn("object storage cannot be reached; requests that need it answer 503 until it can");
  }
}
