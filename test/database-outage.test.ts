import { randomBytes } from "node:crypto";
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deps } from "../src/deps.ts";
import { JobNotifications } from "../src/jobs/notifications.ts";
import { call, sleep, startApp, type TestApp, until } from "./harness.ts";

const DATABASE_URL = process.env.DATABASE_URL;

/**
 * PostgreSQL connections end under a running process: the server restarts or fails over, an
 * administrator or an idle timeout ends them. The process carries on: the pool replaces its
 * connections, and the worker opens its LISTEN connection again, once per drop.
 */
describe.runIf(DATABASE_URL)("PostgreSQL connections ended under a running process", () => {
  const name = `plinth_outage_${randomBytes(4).toString("hex")}`;
  let admin: pg.Client;
  let app: TestApp;

  /** This test's connections (its own database), by the query they last ran. */
  async function connections(): Promise<{ pid: number; query: string }[]> {
    const result = await admin.query<{ pid: number; query: string }>(
      "select pid, query from pg_stat_activity where datname = $1",
      [name],
    );
    return result.rows;
  }

  async function endAll(): Promise<void> {
    await admin.query("select pg_terminate_backend(pid) from pg_stat_activity where datname = $1", [name]);
  }

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    await admin.query(`create database ${name}`);
    const url = new URL(DATABASE_URL as string);
    url.pathname = `/${name}`;
    app = await startApp({ DATABASE_URL: url.toString() });
  });

  afterAll(async () => {
    await app?.close();
    await admin?.query(`drop database if exists ${name} with (force)`);
    await admin?.end();
  });

  it("keeps serving, and keeps one LISTEN connection, however often they are ended", async () => {
    const listening = async () => (await connections()).filter((c) => c.query.startsWith("LISTEN")).length;
    await until("the worker to LISTEN", async () => (await listening()) === 1);
    for (let round = 1; round <= 3; round++) {
      await endAll();
      // The idle pool connections are gone: the next request opens new ones.
      await until(`round ${round}: the API to answer again`, async () => {
        const health = await call(app, "GET", "/health");
        return health.status === 200 && health.body.database === "ok";
      });
      await until(`round ${round}: LISTEN again`, async () => (await listening()) === 1);
      // Given time for a second reconnection, none comes.
      await sleep(1_500);
      expect(await listening()).toBe(1);
    }
  });
});

/**
 * A LISTEN connection that a NAT or load balancer dropped without a word: the server never
 * answers the end of it. Stopping must not wait for that (a worker's SIGTERM drains, then
 * releases its leases, within its bounds).
 */
describe.runIf(DATABASE_URL)("the job notification connection, gone silent", () => {
  it("stops within a second and a half when the server no longer answers", async () => {
    const target = new URL(DATABASE_URL as string);
    let frozen = false;
    const sockets: Socket[] = [];
    // Half-open allowed: a FIN from the client is not answered, as nothing answers a dropped peer.
    const proxy = createNetServer({ allowHalfOpen: true }, (client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname);
      sockets.push(client, upstream);
      client.on("data", (chunk) => {
        if (!frozen) upstream.write(chunk);
      });
      upstream.on("data", (chunk) => {
        if (!frozen) client.write(chunk);
      });
      client.on("error", () => {});
      upstream.on("error", () => {});
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const via = new URL(DATABASE_URL as string);
    via.host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const deps = {
      config: { databaseUrl: via.toString(), databaseSchema: undefined },
      log: { warn() {}, error() {} },
    } as unknown as Deps;
    const notifications = new JobNotifications(deps, 60_000, () => {});
    try {
      await notifications.start();
      frozen = true;
      const started = Date.now();
      await notifications.stop();
      expect(Date.now() - started).toBeLessThan(1_500);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
