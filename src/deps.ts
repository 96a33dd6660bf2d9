import type { Kysely } from "kysely";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { Dialect, Reader } from "./db/database.ts";
import type { Database } from "./db/schema.ts";
import type { JobQueue } from "./jobs/queue.ts";
import type { OutboundClient } from "./lib/outbound.ts";
import type { SecretBox } from "./lib/secret-box.ts";
import type { Logger } from "./logger.ts";
import type { Mailer } from "./mail/mailer.ts";
import type { BlobStore } from "./storage/blob-store.ts";

/** What services need from the outside world; built once in main.ts (or by the test harness). */
export interface Deps {
  db: Kysely<Database>;
  dialect: Dialect;
  /** Reads on every request's path, outside Kysely (see `Reader`). */
  reader: Reader;
  config: Config;
  clock: Clock;
  log: Logger;
  mailer: Mailer;
  jobs: JobQueue;
  /** Outbound HTTP for webhooks and integrations, with the SSRF guard at connect time. */
  outbound: OutboundClient;
  /** Seals the secrets Plinth keeps at rest (identity provider and integration credentials). */
  secrets: SecretBox;
  /** Where files, backups' file bytes and export dumps are kept (DESIGN §16). */
  storage: BlobStore;
}
