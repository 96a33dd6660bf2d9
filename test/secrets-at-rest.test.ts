import { afterAll, describe, expect, it } from "vitest";
import { call, ownerWithOrg, type Receiver, startApp, startReceiver, type TestApp } from "./harness.ts";

/**
 * Secrets at rest (issue 31 #13): an identity provider's client secret and an integration's
 * credentials are sealed (AES-256-GCM) under ENCRYPTION_KEY (else a key derived from the auth
 * secret); a rotation (ENCRYPTION_KEY new, ENCRYPTION_KEY_PREVIOUS old) reseals them at start,
 * and a process without the key they are sealed with refuses to start rather than serve them.
 */

const KEY_ONE = "first-encryption-key-first-encryption-key";
const KEY_TWO = "second-encryption-key-second-encryption-key";
const CLIENT_SECRET = "oidc-client-secret-kept-sealed";
const TOKEN = "ghp_token-kept-sealed-0123456789";

describe("secrets at rest (#13)", () => {
  const apps: TestApp[] = [];
  let receiver: Receiver;
  afterAll(async () => {
    // Those sharing the first one's database close before it.
    for (const app of apps.reverse()) await app.close();
    await receiver?.close();
  });

  it("seals SSO and integration credentials, reseals them under a new key, and needs the key to start", async () => {
    receiver = await startReceiver();
    const env = { ALLOW_PRIVATE_WEBHOOK_URLS: "true", RATE_LIMIT_PER_MINUTE: "100000" };
    const first = await startApp({ ...env, ENCRYPTION_KEY: KEY_ONE });
    apps.push(first);
    const { owner, slug, orgId } = await ownerWithOrg(first, "Sealed Org");
    const sso = await call(first, "PUT", `/org/${slug}/sso`, {
      cookie: owner.cookie,
      body: {
        type: "oidc",
        enabled: false,
        config: { issuer: "http://127.0.0.1:9/", clientId: "plinth", clientSecret: CLIENT_SECRET },
      },
    });
    expect(sso.status, JSON.stringify(sso.body)).toBe(200);
    const integration = await call(first, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: { kind: "github", config: { repo: "acme/app", token: TOKEN, apiUrl: receiver.url } },
    });
    expect(integration.status, JSON.stringify(integration.body)).toBe(201);
    const integrationId = integration.body.integration.id;

    const { db } = first.server.deps;
    const stored = async () => ({
      sso: (await db.selectFrom("sso_configs").select("config").where("org_id", "=", orgId).executeTakeFirstOrThrow())
        .config,
      integration: (
        await db.selectFrom("integrations").select("config").where("id", "=", integrationId).executeTakeFirstOrThrow()
      ).config,
    });
    const keyIdOf = (sealed: string) => /^enc:v1:([^:]+):/.exec(sealed)?.[1];
    const sealedOnce = await stored();
    for (const value of Object.values(sealedOnce)) {
      expect(value).toMatch(/^enc:v1:/);
      expect(value).not.toContain(CLIENT_SECRET);
      expect(value).not.toContain(TOKEN);
    }
    // Opened where they are used: the test send carries the token.
    const sent = async (app: TestApp) => {
      const since = receiver.requests.length;
      const test = await call(app, "POST", `/org/${slug}/integrations/${integrationId}/test`, { cookie: owner.cookie });
      expect(test.status, JSON.stringify(test.body)).toBe(200);
      return receiver.requests.slice(since).at(-1)?.headers.authorization;
    };
    expect(await sent(first)).toBe(`Bearer ${TOKEN}`);

    // A value written before sealing existed is sealed at the next start.
    await db
      .updateTable("sso_configs")
      .set({
        config: JSON.stringify({ issuer: "http://127.0.0.1:9/", clientId: "plinth", clientSecret: CLIENT_SECRET }),
      })
      .where("org_id", "=", orgId)
      .execute();

    // Rotation: the new key seals, the previous one still opens; every value is resealed at start.
    const rotated = await startApp(
      { ...env, ENCRYPTION_KEY: KEY_TWO, ENCRYPTION_KEY_PREVIOUS: KEY_ONE },
      {
        shareDatabaseWith: first,
      },
    );
    apps.push(rotated);
    const resealed = await stored();
    for (const value of Object.values(resealed)) {
      expect(value).toMatch(/^enc:v1:/);
      expect(keyIdOf(value)).not.toBe(keyIdOf(sealedOnce.sso));
      expect(value).not.toContain(CLIENT_SECRET);
    }
    const read = await call(rotated, "GET", `/org/${slug}/sso`, { cookie: owner.cookie });
    expect(read.body.sso.config).toEqual({
      issuer: "http://127.0.0.1:9/",
      clientId: "plinth",
      clientSecret: "••••aled",
    });
    expect(await sent(rotated)).toBe(`Bearer ${TOKEN}`);

    // The new key alone is enough once resealed.
    const after = await startApp({ ...env, ENCRYPTION_KEY: KEY_TWO }, { shareDatabaseWith: first });
    apps.push(after);
    expect(await sent(after)).toBe(`Bearer ${TOKEN}`);

    // Without the key they are sealed with, a process says so and does not start.
    await expect(startApp({ ...env, ENCRYPTION_KEY: KEY_ONE }, { shareDatabaseWith: first })).rejects.toThrow(
      /ENCRYPTION_KEY/,
    );
  });
});
