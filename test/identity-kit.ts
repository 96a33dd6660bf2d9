import dns2 from "dns2";
import { expect } from "vitest";
import { call, type TestApp } from "./harness.ts";
import { freePort } from "./ports.ts";

/**
 * What the identity tests share: a real DNS server (dns2, UDP) whose TXT records a test publishes
 * (start the app with `DNS_SERVERS: dns.servers`), and an org's domain proof through the API.
 */
export interface TestDns {
  /** For DNS_SERVERS. */
  servers: string;
  /** TXT records by name. */
  txt: Map<string, string[]>;
  close(): Promise<void>;
}

export async function startDns(): Promise<TestDns> {
  const txt = new Map<string, string[]>();
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      const response = dns2.Packet.createResponseFromRequest(request);
      const name = request.questions[0]?.name ?? "";
      const records = txt.get(name);
      if (!records) response.header.rcode = 3;
      for (const data of records ?? []) {
        response.answers.push({ name, type: dns2.Packet.TYPE.TXT, class: dns2.Packet.CLASS.IN, ttl: 1, data } as never);
      }
      send(response);
    },
  });
  const port = await freePort();
  await server.listen({ udp: { port, address: "127.0.0.1" } });
  return { servers: `127.0.0.1:${port}`, txt, close: () => server.close() };
}

/** Publishes the TXT record the org's SSO names and has the org verify it: its emailDomain is proven. */
export async function proveSsoDomain(app: TestApp, cookie: string, slug: string, dns: TestDns): Promise<void> {
  const sso = (await call(app, "GET", `/org/${slug}/sso`, { cookie })).body.sso;
  expect(sso?.domainVerification, "the org's SSO names no emailDomain").toBeTruthy();
  dns.txt.set(sso.domainVerification.name, [sso.domainVerification.value]);
  const verified = await call(app, "POST", `/org/${slug}/sso/verify-domain`, { cookie });
  expect(verified.status, JSON.stringify(verified.body)).toBe(200);
  expect(verified.body.sso.domainVerification.verifiedAt).toBeTruthy();
}

/**
 * Gives the org a proven e-mail domain without single sign-on: a disabled SSO configuration
 * naming `domain`, verified by DNS (what SCIM needs to enroll the domain's people directly).
 */
export async function proveDomain(app: TestApp, cookie: string, slug: string, domain: string, dns: TestDns) {
  const put = await call(app, "PUT", `/org/${slug}/sso`, {
    cookie,
    body: { type: "saml", enabled: false, emailDomain: domain },
  });
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  await proveSsoDomain(app, cookie, slug, dns);
}
