import pg from "pg";
import type { Deps } from "../deps.ts";
import { jobsChannel } from "./queue.ts";

/** The longest `stop` waits for the server to acknowledge the connection's end. */
const END_WAIT_MS = 1_000;

/**
 * A worker's ear on PostgreSQL: LISTENs for the NOTIFYs of enqueues in any process and wakes the
 * worker with the kinds they name. Polling covers the gaps while the connection is down, and it
 * is opened again every `retryMs` until it is back. The first attempt (`start`) fails if it
 * cannot connect; later ones only log.
 */
export class JobNotifications {
  private client: pg.Client | undefined;
  private stopped = false;

  constructor(
    private readonly deps: Deps,
    private readonly retryMs: number,
    /** Called with the kinds enqueued, or with none after a gap (look at the whole queue). */
    private readonly wake: (kinds?: readonly string[]) => void,
  ) {}

  start(): Promise<void> {
    return this.connect(false);
  }

  /**
   * Stops listening (no reconnection from now on) and closes the connection, waiting at most
   * END_WAIT_MS: a connection a NAT dropped without a word would keep `end()` waiting for minutes.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      client.end().then(
        () => true,
        () => true,
      ),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), END_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    // pg keeps the socket as `connection.stream`, which it does not type.
    if (!ended) (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }

  private async connect(reconnecting: boolean): Promise<void> {
    const { databaseUrl } = this.deps.config;
    if (!databaseUrl || this.stopped) return;
    const client = new pg.Client({ connectionString: databaseUrl });
    let lost = false;
    const lose = (error: unknown) => {
      // pg reports a dropped connection more than once (the server's notice, then the closed
      // socket): one reconnection per connection, or each drop would double them.
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      void client.end().catch(() => {});
      this.deps.log.warn({ err: error }, "job notification connection failed; polling until it is back");
      if (!this.stopped) setTimeout(() => void this.connect(true), this.retryMs).unref();
    };
    client.on("notification", (message) => this.wake(message.payload ? message.payload.split(",") : undefined));
    client.on("error", lose);
    try {
      await client.connect();
      await client.query(`LISTEN "${jobsChannel(this.deps.config.databaseSchema)}"`);
    } catch (error) {
      if (!reconnecting) {
        lost = true;
        await client.end().catch(() => {});
        throw error;
      }
      lose(error);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    // Anything enqueued while the connection was down was not heard: look at the whole queue.
    if (reconnecting) this.wake();
  }
}
