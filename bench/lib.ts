/** Helpers the benchmark runners share. */
import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * Creates a database named `<prefix>_<random>` through the maintenance database at `adminUrl`.
 * `drop` removes it (once; later calls do nothing), forcing out any connection still open.
 */
export async function createDatabase(
  adminUrl: string,
  prefix: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(4).toString("hex")}`;
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await run(`create database ${name}`);
  let dropped = false;
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      await run(`drop database if exists ${name} with (force)`);
    },
  };
}

/** Signs a fresh account up through the API; returns its session cookie (`plinth.session_token=…`). */
export async function signUpCookie(url: string, name = "Bench User"): Promise<string> {
  const response = await fetch(`${url}/api/auth/sign-up/email`, {
    method: "POST",
    // better-auth refuses a cookie-less POST without an Origin it trusts (PUBLIC_URL).
    headers: { "content-type": "application/json", origin: url },
    body: JSON.stringify({
      email: `bench-${randomBytes(4).toString("hex")}@example.test`,
      password: "correct-horse-battery-staple",
      name,
    }),
  });
  if (response.status !== 200) throw new Error(`sign-up failed: ${response.status} ${await response.text()}`);
  const cookie = response.headers
    .getSetCookie()
    .find((c) => c.startsWith("plinth.session_token="))
    ?.split(";")[0];
  if (!cookie) throw new Error("sign-up returned no plinth.session_token cookie");
  return cookie;
}
