import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";

const DATABASE_URL = process.env.DATABASE_URL;

/**
 * Several processes starting together on a new DATABASE_SCHEMA each create it and migrate it:
 * every one of them must start, whichever wins the race to create the schema.
 */
describe.runIf(DATABASE_URL)("migrating from several processes at once", () => {
  it("brings a new schema up from eight connections at once, five times over", async () => {
    const admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    try {
      for (let round = 0; round < 5; round++) {
        const schema = `t_race_${randomBytes(5).toString("hex")}`;
        const handles = Array.from({ length: 8 }, () =>
          openDatabase({ databaseUrl: DATABASE_URL, databaseSchema: schema, dataDir: tmpdir(), poolSize: 2 }),
        );
        try {
          const outcomes = await Promise.allSettled(handles.map((handle) => migrateToLatest(handle, schema)));
          expect(outcomes.filter((outcome) => outcome.status === "rejected")).toEqual([]);
          const tables = await admin.query("select 1 from information_schema.tables where table_schema = $1", [schema]);
          expect(tables.rowCount).toBeGreaterThan(10);
        } finally {
          for (const handle of handles) await handle.close();
          await admin.query(`drop schema if exists ${schema} cascade`);
        }
      }
    } finally {
      await admin.end();
    }
  });
});
