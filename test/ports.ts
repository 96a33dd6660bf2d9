import { createServer } from "node:net";

/**
 * A port for a child process to listen on. Drawn below Linux's ephemeral range (32768–60999):
 * a port taken with `listen(0)` and released is free again at once, and another test's
 * `listen(0)` can get it before the child binds it (one flaky CI run did exactly that).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (!bound) continue;
    await new Promise((resolve) => server.close(resolve));
    return port;
  }
}
