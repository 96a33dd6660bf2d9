import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addMember,
  type CallOptions,
  type CallResult,
  call,
  createApiKey,
  createOrg,
  expectError,
  expectValidation,
  type Mailbox,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
  tag,
} from "./harness.ts";

const RESIDENCIES = ["eu", "tr", "global"] as const;
const REGIONS = ["ist", "fra", "ams", "lhr", "sjc", "iad", "sin", "syd"] as const;
const SCOPES = ["full", "deploy", "read-only"] as const;
/** SPEC "Org" fields plus the record's timestamps; nothing else (no secrets) may appear. */
const ORG_KEYS = [
  "createdAt",
  "defaultRegion",
  "id",
  "ipAllowlist",
  "name",
  "planId",
  "residency",
  "slug",
  "status",
  "updatedAt",
  "webhookUrl",
];
const SLUG = /^[a-z0-9]+(-[a-z0-9]+)*$/;

let app: TestApp;
let mailbox: Mailbox;

beforeAll(async () => {
  mailbox = await startMailbox();
  // Many sign-ups from one address: lift the per-IP credential limit so it does not interfere.
  app = await startApp({ SMTP_URL: mailbox.url, AUTH_RATE_LIMIT_PER_MINUTE: "10000" });
});

afterAll(async () => {
  await app?.close();
  await mailbox?.close();
});

function expectOrg(org: any): void {
  expect(Object.keys(org).sort()).toEqual(ORG_KEYS);
  expect(org.id).toEqual(expect.any(String));
  expect(org.slug).toMatch(SLUG);
  expect(org.name).toEqual(expect.any(String));
  expect(org.planId).toEqual(expect.any(String));
  expect(org.planId.length).toBeGreaterThan(0);
  expect(RESIDENCIES).toContain(org.residency);
  expect(REGIONS).toContain(org.defaultRegion);
  expect(Array.isArray(org.ipAllowlist)).toBe(true);
  for (const entry of org.ipAllowlist) expect(entry).toEqual(expect.any(String));
  expect(org.webhookUrl === null || typeof org.webhookUrl === "string").toBe(true);
  expect(org.status).toEqual(expect.any(String));
  expect(Number.isNaN(Date.parse(org.createdAt))).toBe(false);
  expect(Number.isNaN(Date.parse(org.updatedAt))).toBe(false);
}

async function orgsOf(who: { cookie?: string; token?: string }): Promise<any[]> {
  const res = await call(app, "GET", "/orgs", who);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(Object.keys(res.body)).toEqual(["orgs"]);
  return res.body.orgs;
}

async function overview(slug: string, who: CallOptions): Promise<CallResult> {
  return call(app, "GET", `/org/${slug}/overview`, who);
}

describe("POST /org and GET /orgs", () => {
  let user: TestUser;
  beforeAll(async () => {
    user = await signUp(app);
  });

  it("creates an org with the caller as owner and lists it with the role", async () => {
    const name = `Happy Path ${tag()}`;
    const res = await call(app, "POST", "/org", {
      cookie: user.cookie,
      body: { name, residency: "eu", defaultRegion: "ams", purpose: "internal tools", teamSize: "2-10" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(Object.keys(res.body)).toEqual(["org"]);
    const org = res.body.org;
    expectOrg(org);
    expect(org).toMatchObject({
      name,
      residency: "eu",
      defaultRegion: "ams",
      ipAllowlist: [],
      webhookUrl: null,
      status: "active",
    });

    const orgs = await orgsOf({ cookie: user.cookie });
    const listed = orgs.find((o) => o.id === org.id);
    expect(listed).toEqual({ ...org, role: "owner" });
    for (const membership of orgs) {
      expect(Object.keys(membership).sort()).toEqual([...ORG_KEYS, "role"].sort());
    }

    const view = await overview(org.slug, { cookie: user.cookie });
    expect(view.status).toBe(200);
    expect(view.body).toEqual({ org, role: "owner", projectCount: 0, projects: [] });
  });

  it("applies defaults for residency and region when they are omitted", async () => {
    const org = await createOrg(app, user, `Defaults ${tag()}`);
    expectOrg(org);
    expect(org.ipAllowlist).toEqual([]);
    expect(org.webhookUrl).toBeNull();
  });

  it("lists only the caller's own orgs, each with the caller's role", async () => {
    const other = await signUp(app);
    const mine = await createOrg(app, other, `Mine ${tag()}`);
    const theirs = await createOrg(app, user, `Theirs ${tag()}`);
    const ids = (await orgsOf({ cookie: other.cookie })).map((o) => o.id);
    expect(ids).toEqual([mine.id]);
    expect((await orgsOf({ cookie: user.cookie })).map((o) => o.id)).toContain(theirs.id);
    expect((await orgsOf({ cookie: user.cookie })).map((o) => o.id)).not.toContain(mine.id);
  });

  it("a new account has no orgs", async () => {
    const fresh = await signUp(app);
    expect(await orgsOf({ cookie: fresh.cookie })).toEqual([]);
  });

  describe("validation (CreateOrgInput)", () => {
    let validator: TestUser;
    beforeAll(async () => {
      validator = await signUp(app);
    });

    async function create(body: unknown): Promise<CallResult> {
      return call(app, "POST", "/org", { cookie: validator.cookie, body });
    }

    it("accepts names of 2 and 80 characters", async () => {
      const two = await create({ name: "Ab" });
      expect(two.status, JSON.stringify(two.body)).toBe(201);
      expect(two.body.org.name).toBe("Ab");
      const long = `${tag()}${"n".repeat(72)}`;
      expect(long).toHaveLength(80);
      const eighty = await create({ name: long });
      expect(eighty.status, JSON.stringify(eighty.body)).toBe(201);
      expect(eighty.body.org.name).toBe(long);
      expect(eighty.body.org.slug).toMatch(SLUG);
    });

    it("refuses names of 1 and 81 characters, and a missing or non-string name", async () => {
      const before = (await orgsOf({ cookie: validator.cookie })).length;
      expectValidation(await create({ name: "A" }), "name");
      expectValidation(await create({ name: "n".repeat(81) }), "name");
      expectValidation(await create({}), "name");
      expectValidation(await create({ name: 42 }), "name");
      expectValidation(await create({ name: "Acme\r\nBcc: x" }), "name");
      expectValidation(await create({ name: "Tab\there" }), "name");
      // Nothing to see, or text that reads in another order than it is stored.
      expectValidation(await create({ name: "\u200b\u200b\u200b" }), "name");
      expectValidation(await create({ name: "\u00a0\u2060\u00a0" }), "name");
      expectValidation(await create({ name: "\u3164\u3164" }), "name");
      expectValidation(await create({ name: "\u2800\u2800" }), "name");
      expectValidation(await create({ name: "\u0301\u0301" }), "name");
      expectValidation(await create({ name: "\ufe0f\u034f" }), "name");
      expectValidation(await create({ name: "Acme\u202eevil" }), "name");
      expectValidation(await create({ name: "Acme\u2066x\u2069" }), "name");
      expect(await orgsOf({ cookie: validator.cookie })).toHaveLength(before);
    });

    it("keeps names in any script, emoji joined by zero-width joiners included", async () => {
      const names = [`שלום ${tag()}`, `مرحبا ${tag()}`, `Team 👩‍💻 ${tag()}`, `İstanbul ${tag()}`, `می‌خواهم ${tag()}`];
      for (const name of names) {
        const res = await create({ name });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        expect(res.body.org.name).toBe(name);
      }
    });

    it("accepts purpose and teamSize of 40 characters and refuses 41", async () => {
      const ok = await create({ name: `Purpose ${tag()}`, purpose: "p".repeat(40), teamSize: "t".repeat(40) });
      expect(ok.status, JSON.stringify(ok.body)).toBe(201);
      expectValidation(await create({ name: `Purpose ${tag()}`, purpose: "p".repeat(41) }), "purpose");
      expectValidation(await create({ name: `Team ${tag()}`, teamSize: "t".repeat(41) }), "teamSize");
    });

    it.each(RESIDENCIES)("accepts residency %s", async (residency) => {
      const res = await create({ name: `Residency ${tag()}`, residency });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.org.residency).toBe(residency);
      expect(REGIONS).toContain(res.body.org.defaultRegion);
    });

    it("refuses an unknown residency", async () => {
      expectValidation(await create({ name: `Residency ${tag()}`, residency: "mars" }), "residency");
      expectValidation(await create({ name: `Residency ${tag()}`, residency: "EU" }), "residency");
    });

    it.each(REGIONS)("accepts defaultRegion %s", async (defaultRegion) => {
      const res = await create({ name: `Region ${tag()}`, defaultRegion });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.org.defaultRegion).toBe(defaultRegion);
    });

    it("refuses an unknown defaultRegion", async () => {
      expectValidation(await create({ name: `Region ${tag()}`, defaultRegion: "mars" }), "defaultRegion");
      expectValidation(await create({ name: `Region ${tag()}`, defaultRegion: "FRA" }), "defaultRegion");
    });

    it("answers malformed JSON with 400 BAD_REQUEST", async () => {
      const res = await call(app, "POST", "/org", {
        cookie: validator.cookie,
        rawBody: "{not json",
        headers: { "content-type": "application/json" },
      });
      expectError(res, 400, "BAD_REQUEST");
    });
  });
});

describe("org slugs", () => {
  let user: TestUser;
  beforeAll(async () => {
    user = await signUp(app);
  });

  it("derives a lower-case a-z0-9- slug from the name", async () => {
    const t = tag();
    const org = await createOrg(app, user, `Slug ${t} Co., Ltd!`);
    expect(org.slug).toBe(`slug-${t}-co-ltd`);
    const loud = await createOrg(app, user, `  LOUD__${t.toUpperCase()}  & Sons  `);
    expect(loud.slug).toBe(`loud-${t}-sons`);
    const odd = await createOrg(app, user, `Ünïcödé ${t} Straße ✓`);
    expect(odd.slug).toMatch(SLUG);
    expect(odd.slug).toBe(`unicode-${t}-strasse`);
    // Letters with no accent to strip are spelt out: Turkish dotless ı, Polish ł, Danish ø.
    const turkish = await createOrg(app, user, `Işık Łódź Ørsted ${t}`);
    expect(turkish.slug).toBe(`isik-lodz-orsted-${t}`);
  });

  it("suffixes duplicates with -2, -3 and reuses a deleted org's slug", async () => {
    const t = tag();
    const name = `Dup ${t}`;
    const base = `dup-${t}`;
    const first = await createOrg(app, user, name);
    const second = await createOrg(app, user, name);
    const third = await createOrg(app, user, name);
    expect([first.slug, second.slug, third.slug]).toEqual([base, `${base}-2`, `${base}-3`]);

    const deleted = await call(app, "DELETE", `/org/${base}`, { cookie: user.cookie });
    expect(deleted.status).toBe(200);
    const reused = await createOrg(app, user, name);
    expect(reused.slug).toBe(base);
    expect(reused.id).not.toBe(first.id);

    expect((await call(app, "DELETE", `/org/${base}-2`, { cookie: user.cookie })).status).toBe(200);
    expect((await createOrg(app, user, name)).slug).toBe(`${base}-2`);
    expect((await createOrg(app, user, name)).slug).toBe(`${base}-4`);
  });

  it("keeps the slug when the org is renamed", async () => {
    const org = await createOrg(app, user, `Rename ${tag()}`);
    const res = await call(app, "PATCH", `/org/${org.slug}`, { cookie: user.cookie, body: { name: "Entirely New" } });
    expect(res.status).toBe(200);
    expect(res.body.org).toMatchObject({ id: org.id, slug: org.slug, name: "Entirely New" });
  });

  it("gives every one of concurrent same-name creations its own slug", async () => {
    const t = tag();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => call(app, "POST", "/org", { cookie: user.cookie, body: { name: `Race ${t}` } })),
    );
    for (const res of results) expect(res.status, JSON.stringify(res.body)).toBe(201);
    const slugs = results.map((res) => res.body.org.slug).sort();
    const expected = [`race-${t}`, ...Array.from({ length: 7 }, (_, i) => `race-${t}-${i + 2}`)].sort();
    expect(slugs).toEqual(expected);
  });
});

describe("PATCH /org/{slug}", () => {
  let owner: TestUser;
  let org: any;
  beforeAll(async () => {
    owner = await signUp(app);
    org = await createOrg(app, owner, `Patch ${tag()}`);
  });

  async function patch(body: unknown): Promise<CallResult> {
    return call(app, "PATCH", `/org/${org.slug}`, { cookie: owner.cookie, body });
  }

  async function current(): Promise<any> {
    const res = await overview(org.slug, { cookie: owner.cookie });
    expect(res.status).toBe(200);
    return res.body.org;
  }

  it("updates the name (2 and 80 characters) and returns {org}", async () => {
    const two = await patch({ name: "Xy" });
    expect(two.status, JSON.stringify(two.body)).toBe(200);
    expect(Object.keys(two.body)).toEqual(["org"]);
    expectOrg(two.body.org);
    expect(two.body.org).toMatchObject({ id: org.id, slug: org.slug, name: "Xy" });
    const long = "N".repeat(80);
    const eighty = await patch({ name: long });
    expect(eighty.status).toBe(200);
    expect(eighty.body.org.name).toBe(long);
    expect((await current()).name).toBe(long);
  });

  it("refuses names of 1 and 81 characters and leaves the org unchanged", async () => {
    const before = await current();
    expectValidation(await patch({ name: "X" }), "name");
    expectValidation(await patch({ name: "N".repeat(81) }), "name");
    expectValidation(await patch({ name: 7 }), "name");
    expect(await current()).toEqual(before);
  });

  it("accepts an empty body and changes nothing", async () => {
    const before = await current();
    const res = await patch({});
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ org: before });
  });

  it("accepts a PATCH with no body and no content type, and changes nothing", async () => {
    const before = await current();
    const res = await call(app, "PATCH", `/org/${org.slug}`, { cookie: owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ org: before });
  });

  it.each(REGIONS)("accepts defaultRegion %s", async (defaultRegion) => {
    const res = await patch({ defaultRegion });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.org.defaultRegion).toBe(defaultRegion);
    expect((await current()).defaultRegion).toBe(defaultRegion);
  });

  it("refuses an unknown defaultRegion, and a bad field fails the whole update", async () => {
    const before = await current();
    expectValidation(await patch({ defaultRegion: "mars" }), "defaultRegion");
    expectValidation(await patch({ name: "Valid Name", defaultRegion: "mars" }), "defaultRegion");
    expect(await current()).toEqual(before);
  });

  it("accepts IPv4, IPv6 and CIDR allowlist entries and stores them as given", async () => {
    const entries = ["192.168.1.10", "10.0.0.0/8", "2001:db8::1", "2001:db8::/32", "127.0.0.1/32", "0.0.0.0/0"];
    const res = await patch({ ipAllowlist: entries });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.org.ipAllowlist).toEqual(entries);
    expect((await current()).ipAllowlist).toEqual(entries);

    const cleared = await patch({ ipAllowlist: [] });
    expect(cleared.status).toBe(200);
    expect(cleared.body.org.ipAllowlist).toEqual([]);
    expect((await current()).ipAllowlist).toEqual([]);
  });

  it.each(["", "not-an-ip", "10.0.0.0/33", "1.2.3.4/x", "2001:db8::/129", "1.2.3.4/8/9", "256.1.1.1"])(
    "refuses allowlist entry %j and names its index",
    async (bad) => {
      const before = await current();
      expectValidation(await patch({ ipAllowlist: ["1.2.3.4", bad] }), "ipAllowlist.1");
      expect(await current()).toEqual(before);
    },
  );

  it("refuses an allowlist that is not an array", async () => {
    expectValidation(await patch({ ipAllowlist: "1.2.3.4" }), "ipAllowlist");
  });

  it("sets webhookUrl with a one-time whsec_ secret, rotates it on a new URL, and clears it with null", async () => {
    const url = "https://hooks.example.com/plinth";
    const set = await patch({ webhookUrl: url });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(Object.keys(set.body).sort()).toEqual(["org", "webhookSecret"]);
    expectOrg(set.body.org);
    expect(set.body.org.webhookUrl).toBe(url);
    const secret: string = set.body.webhookSecret;
    expect(secret).toMatch(/^whsec_.{16,}$/);

    // The secret is never shown again: not by the overview, the org list, or a later PATCH.
    const view = await overview(org.slug, { cookie: owner.cookie });
    expect(view.body.org.webhookUrl).toBe(url);
    expect(JSON.stringify(view.body)).not.toContain(secret);
    expect(JSON.stringify(view.body)).not.toContain("whsec_");
    const list = await call(app, "GET", "/orgs", { cookie: owner.cookie });
    expect(JSON.stringify(list.body)).not.toContain("whsec_");
    const rename = await patch({ name: "Renamed With Hook" });
    expect(rename.status).toBe(200);
    expect(rename.body).not.toHaveProperty("webhookSecret");
    expect(JSON.stringify(rename.body)).not.toContain("whsec_");
    const audit = await call(app, "GET", `/org/${org.slug}/audit`, { cookie: owner.cookie });
    expect(audit.status).toBe(200);
    expect(JSON.stringify(audit.body)).not.toContain("whsec_");
    const same = await patch({ webhookUrl: url });
    expect(same.status).toBe(200);
    expect(same.body).not.toHaveProperty("webhookSecret");

    const httpUrl = "http://hooks.example.com/other";
    const rotated = await patch({ webhookUrl: httpUrl });
    expect(rotated.status).toBe(200);
    expect(rotated.body.org.webhookUrl).toBe(httpUrl);
    expect(rotated.body.webhookSecret).toMatch(/^whsec_/);
    expect(rotated.body.webhookSecret).not.toBe(secret);

    const cleared = await patch({ webhookUrl: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body.org.webhookUrl).toBeNull();
    expect(cleared.body).not.toHaveProperty("webhookSecret");
    expect((await current()).webhookUrl).toBeNull();
  });

  it.each(["not a url", "ftp://hooks.example.com/x", "hooks.example.com/x", "javascript:alert(1)", ""])(
    "refuses webhookUrl %j",
    async (bad) => {
      const before = await current();
      expectValidation(await patch({ webhookUrl: bad }), "webhookUrl");
      expect(await current()).toEqual(before);
    },
  );

  it("answers 404 for a slug that does not exist", async () => {
    const res = await call(app, "PATCH", `/org/no-such-org-${tag()}`, {
      cookie: owner.cookie,
      body: { name: "Whatever" },
    });
    expectError(res, 404, "NOT_FOUND");
  });
});

describe("role matrix", () => {
  let owner: TestUser;
  let admin: TestUser;
  let developer: TestUser;
  let viewer: TestUser;
  let org: any;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    owner = await signUp(app);
    org = await createOrg(app, owner, `Matrix ${tag()}`);
    admin = (await addMember(app, mailbox, owner, org.slug, "admin")).user;
    developer = (await addMember(app, mailbox, owner, org.slug, "developer")).user;
    viewer = (await addMember(app, mailbox, owner, org.slug, "viewer")).user;
    for (const scope of SCOPES) keys[scope] = (await createApiKey(app, owner, org.slug, scope)).token;
  });

  function sessions(): [string, TestUser][] {
    return [
      ["owner", owner],
      ["admin", admin],
      ["developer", developer],
      ["viewer", viewer],
    ];
  }

  it("every role reads the overview with its own role", async () => {
    for (const [role, user] of sessions()) {
      const res = await overview(org.slug, { cookie: user.cookie });
      expect(res.status, role).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(["org", "projectCount", "projects", "role"]);
      expectOrg(res.body.org);
      expect(res.body).toMatchObject({ role, projectCount: 0, projects: [] });
      expect(res.body.org.id).toBe(org.id);
    }
  });

  it.each(SCOPES)("a %s key reads the overview as admin", async (scope) => {
    const res = await overview(org.slug, { token: keys[scope] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ role: "admin", projectCount: 0, projects: [] });
    expect(res.body.org.id).toBe(org.id);
  });

  it("GET /orgs lists the org with each member's role", async () => {
    for (const [role, user] of sessions()) {
      const orgs = await orgsOf({ cookie: user.cookie });
      const listed = orgs.find((o) => o.id === org.id);
      expect(listed?.role, role).toBe(role);
    }
    // The invited members belong to nothing else.
    for (const user of [admin, developer, viewer]) {
      expect((await orgsOf({ cookie: user.cookie })).map((o) => o.id)).toEqual([org.id]);
    }
  });

  it.each(SCOPES)("GET /orgs with a %s key lists just the key's org, as admin", async (scope) => {
    // The owner has another org; the key must not see it.
    const orgs = await orgsOf({ token: keys[scope] });
    expect(orgs).toHaveLength(1);
    expect(orgs[0].id).toBe(org.id);
    expect(orgs[0].role).toBe("admin");
    expect(Object.keys(orgs[0]).sort()).toEqual([...ORG_KEYS, "role"].sort());
  });

  it("PATCH is allowed to owner, admin and full keys", async () => {
    const callers: [string, { cookie?: string; token?: string }][] = [
      ["owner", { cookie: owner.cookie }],
      ["admin", { cookie: admin.cookie }],
      ["full key", { token: keys.full }],
    ];
    for (const [label, who] of callers) {
      const name = `By ${label} ${tag()}`;
      const res = await call(app, "PATCH", `/org/${org.slug}`, { ...who, body: { name } });
      expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
      expect(res.body.org.name).toBe(name);
    }
  });

  it("PATCH is refused (403) to developer, viewer and deploy/read-only keys", async () => {
    const before = (await overview(org.slug, { cookie: owner.cookie })).body.org;
    const callers: [string, { cookie?: string; token?: string }][] = [
      ["developer", { cookie: developer.cookie }],
      ["viewer", { cookie: viewer.cookie }],
      ["deploy key", { token: keys.deploy }],
      ["read-only key", { token: keys["read-only"] }],
    ];
    for (const [label, who] of callers) {
      const res = await call(app, "PATCH", `/org/${org.slug}`, { ...who, body: { name: `Hijack ${label}` } });
      expectError(res, 403, "FORBIDDEN");
    }
    expect((await overview(org.slug, { cookie: owner.cookie })).body.org).toEqual(before);
  });

  it("DELETE is refused (403) to admin, developer, viewer and every key", async () => {
    const callers: [string, { cookie?: string; token?: string }][] = [
      ["admin", { cookie: admin.cookie }],
      ["developer", { cookie: developer.cookie }],
      ["viewer", { cookie: viewer.cookie }],
      ...SCOPES.map((scope): [string, { token: string }] => [`${scope} key`, { token: keys[scope] as string }]),
    ];
    for (const [label, who] of callers) {
      const res = await call(app, "DELETE", `/org/${org.slug}`, who);
      expect(res.status, label).toBe(403);
      expectError(res, 403, "FORBIDDEN");
    }
    const still = await overview(org.slug, { cookie: owner.cookie });
    expect(still.status).toBe(200);
    expect((await orgsOf({ cookie: viewer.cookie })).map((o) => o.id)).toEqual([org.id]);
  });

  it.each(SCOPES)("POST /org with a %s key is 403", async (scope) => {
    const res = await call(app, "POST", "/org", { token: keys[scope], body: { name: `Key Made ${tag()}` } });
    expectError(res, 403, "FORBIDDEN");
    expect(await orgsOf({ cookie: owner.cookie })).toHaveLength(1);
  });

  it("without credentials every endpoint is 401", async () => {
    const requests: [string, string, unknown?][] = [
      ["GET", "/orgs"],
      ["POST", "/org", { name: "Anonymous Org" }],
      ["GET", `/org/${org.slug}/overview`],
      ["PATCH", `/org/${org.slug}`, { name: "Anonymous" }],
      ["DELETE", `/org/${org.slug}`],
    ];
    for (const [method, path, body] of requests) {
      expectError(await call(app, method, path, { body }), 401, "UNAUTHORIZED");
    }
  });

  it("an unknown or malformed API key and a bogus session cookie are 401", async () => {
    const bogus = [
      { token: `pak_${"0".repeat(64)}` },
      { token: "pak_short" },
      { token: "not-a-key" },
      { cookie: "plinth.session_token=bogus.signature" },
    ];
    for (const who of bogus) {
      expectError(await call(app, "GET", "/orgs", who), 401, "UNAUTHORIZED");
      expectError(await overview(org.slug, who), 401, "UNAUTHORIZED");
    }
    const basic = await call(app, "GET", "/orgs", { headers: { authorization: "Basic dXNlcjpwYXNz" } });
    expectError(basic, 401, "UNAUTHORIZED");
  });
});

describe("cross-org isolation", () => {
  let ownerA: TestUser;
  let ownerB: TestUser;
  let orgA: any;
  let orgB: any;
  let keyA: string;
  let keyB: string;

  beforeAll(async () => {
    ownerA = await signUp(app);
    ownerB = await signUp(app);
    orgA = await createOrg(app, ownerA, `Iso A ${tag()}`);
    orgB = await createOrg(app, ownerB, `Iso B ${tag()}`);
    keyA = (await createApiKey(app, ownerA, orgA.slug, "full")).token;
    keyB = (await createApiKey(app, ownerB, orgB.slug, "full")).token;
  });

  it("an owner of org A gets 404 on every route of org B", async () => {
    expectError(await overview(orgB.slug, { cookie: ownerA.cookie }), 404, "NOT_FOUND");
    const patched = await call(app, "PATCH", `/org/${orgB.slug}`, { cookie: ownerA.cookie, body: { name: "Taken" } });
    expectError(patched, 404, "NOT_FOUND");
    expectError(await call(app, "DELETE", `/org/${orgB.slug}`, { cookie: ownerA.cookie }), 404, "NOT_FOUND");
    expect((await orgsOf({ cookie: ownerA.cookie })).map((o) => o.id)).toEqual([orgA.id]);
    const view = await overview(orgB.slug, { cookie: ownerB.cookie });
    expect(view.status).toBe(200);
    expect(view.body.org).toEqual(orgB);
  });

  it("a key of org A gets 404 on every route of org B, and the other way round", async () => {
    for (const [token, target] of [
      [keyA, orgB],
      [keyB, orgA],
    ] as const) {
      expectError(await overview(target.slug, { token }), 404, "NOT_FOUND");
      const patched = await call(app, "PATCH", `/org/${target.slug}`, { token, body: { name: "Taken" } });
      expectError(patched, 404, "NOT_FOUND");
      expectError(await call(app, "DELETE", `/org/${target.slug}`, { token }), 404, "NOT_FOUND");
    }
    expect((await overview(orgB.slug, { cookie: ownerB.cookie })).body.org.name).toBe(orgB.name);
    expect((await overview(orgA.slug, { cookie: ownerA.cookie })).body.org.name).toBe(orgA.name);
  });

  it("a nonexistent slug is 404 for sessions and keys alike", async () => {
    const missing = `missing-${tag()}`;
    expectError(await overview(missing, { cookie: ownerA.cookie }), 404, "NOT_FOUND");
    expectError(await overview(missing, { token: keyA }), 404, "NOT_FOUND");
    expectError(await call(app, "DELETE", `/org/${missing}`, { cookie: ownerA.cookie }), 404, "NOT_FOUND");
  });
});

describe("DELETE /org/{slug}", () => {
  it("soft-deletes: the org is 404, leaves GET /orgs, its keys are 401, and a new org may take its slug", async () => {
    const owner = await signUp(app);
    const name = `Doomed ${tag()}`;
    const org = await createOrg(app, owner, name);
    const keep = await createOrg(app, owner, `Survivor ${tag()}`);
    const { user: viewer } = await addMember(app, mailbox, owner, org.slug, "viewer");
    const full = await createApiKey(app, owner, org.slug, "full");
    const readOnly = await createApiKey(app, owner, org.slug, "read-only");
    expect((await overview(org.slug, { token: full.token })).status).toBe(200);

    const res = await call(app, "DELETE", `/org/${org.slug}`, { cookie: owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ ok: true });

    expectError(await overview(org.slug, { cookie: owner.cookie }), 404, "NOT_FOUND");
    expectError(await overview(org.slug, { cookie: viewer.cookie }), 404, "NOT_FOUND");
    const patched = await call(app, "PATCH", `/org/${org.slug}`, { cookie: owner.cookie, body: { name: "Back" } });
    expectError(patched, 404, "NOT_FOUND");
    expectError(await call(app, "DELETE", `/org/${org.slug}`, { cookie: owner.cookie }), 404, "NOT_FOUND");
    expect((await orgsOf({ cookie: owner.cookie })).map((o) => o.id)).toEqual([keep.id]);
    expect(await orgsOf({ cookie: viewer.cookie })).toEqual([]);
    for (const key of [full, readOnly]) {
      expectError(await call(app, "GET", "/orgs", { token: key.token }), 401, "UNAUTHORIZED");
      expectError(await overview(org.slug, { token: key.token }), 401, "UNAUTHORIZED");
    }

    // Someone else takes the slug; nothing of the old org carries over to the new one.
    const stranger = await signUp(app);
    const successor = await createOrg(app, stranger, name);
    expect(successor.slug).toBe(org.slug);
    expect(successor.id).not.toBe(org.id);
    expectError(await overview(successor.slug, { cookie: owner.cookie }), 404, "NOT_FOUND");
    expectError(await overview(successor.slug, { cookie: viewer.cookie }), 404, "NOT_FOUND");
    expectError(await overview(successor.slug, { token: full.token }), 401, "UNAUTHORIZED");
    expect((await overview(successor.slug, { cookie: stranger.cookie })).body.role).toBe("owner");
  });
});

describe("a delete overlapping other writes to the org", () => {
  it("leaves them 404 or done before it, never a 500, and no live project in the deleted org", async () => {
    const owner = await signUp(app);
    for (let round = 0; round < 4; round++) {
      const org = await createOrg(app, owner, `Raced ${tag()}`);
      const as = { cookie: owner.cookie };
      // Rows the org has already, which the delete and the other writes both lock.
      const early = await call(app, "POST", `/org/${org.slug}/projects`, { ...as, body: { name: "Early" } });
      const doomed = await call(app, "POST", `/org/${org.slug}/projects`, { ...as, body: { name: "Doomed" } });
      const invited = await call(app, "POST", `/org/${org.slug}/invitations`, {
        ...as,
        body: { email: `raced-${tag()}@example.test`, role: "viewer" },
      });
      expect([early.status, doomed.status, invited.status]).toEqual([201, 201, 201]);
      const projectPath = (p: CallResult) => `/org/${org.slug}/projects/${p.body.project.slug}`;
      const results = await Promise.all([
        call(app, "DELETE", `/org/${org.slug}`, as),
        call(app, "PATCH", `/org/${org.slug}`, { ...as, body: { name: "Renamed" } }),
        call(app, "PATCH", `/org/${org.slug}`, { ...as, body: { ipAllowlist: [] } }),
        call(app, "POST", `/org/${org.slug}/projects`, { ...as, body: { name: "Late One" } }),
        call(app, "POST", `/org/${org.slug}/projects`, { ...as, body: { name: "Late Two" } }),
        call(app, "POST", `/org/${org.slug}/api-keys`, { ...as, body: { name: "late", scope: "full" } }),
        call(app, "PATCH", projectPath(early), { ...as, body: { name: "Early Renamed" } }),
        call(app, "PATCH", projectPath(early), { ...as, body: { environment: "staging" } }),
        call(app, "DELETE", projectPath(doomed), as),
        call(app, "POST", `/org/${org.slug}/members/${invited.body.invite.id}/resend`, as),
      ]);
      expect(results[0]?.status).toBe(200);
      for (const res of results.slice(1)) expect([200, 201, 404], JSON.stringify(res.body)).toContain(res.status);
      const live = await app.server.deps.db
        .selectFrom("projects")
        .select("id")
        .where("org_id", "=", org.id)
        .where("deleted_at", "is", null)
        .execute();
      expect(live).toEqual([]);
    }
  });
});

describe("IP allowlist", () => {
  let owner: TestUser;
  let org: any;
  let key: string;

  beforeAll(async () => {
    owner = await signUp(app);
    org = await createOrg(app, owner, `Fenced ${tag()}`);
    key = (await createApiKey(app, owner, org.slug, "read-only")).token;
  });

  async function setAllowlist(ipAllowlist: string[]): Promise<void> {
    const res = await call(app, "PATCH", `/org/${org.slug}`, { cookie: owner.cookie, body: { ipAllowlist } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.org.ipAllowlist).toEqual(ipAllowlist);
  }

  it("an empty allowlist lets API keys in", async () => {
    expect((await overview(org.slug, { token: key })).status).toBe(200);
  });

  it("refuses API keys from outside the list with 403, while sessions still work", async () => {
    await setAllowlist(["10.0.0.0/8"]);
    expectError(await overview(org.slug, { token: key }), 403, "FORBIDDEN");
    expectError(await call(app, "GET", "/orgs", { token: key }), 403, "FORBIDDEN");
    const session = await overview(org.slug, { cookie: owner.cookie });
    expect(session.status).toBe(200);
    expect(session.body.org.ipAllowlist).toEqual(["10.0.0.0/8"]);
  });

  it.each([{ entries: ["127.0.0.1"] }, { entries: ["127.0.0.0/8"] }, { entries: ["10.0.0.0/8", "127.0.0.1"] }])(
    "lets the key in when the list holds the caller ($entries)",
    async ({ entries }) => {
      await setAllowlist(entries);
      const res = await overview(org.slug, { token: key });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.org.ipAllowlist).toEqual(entries);
    },
  );

  it("judges the connecting address, not a spoofed X-Forwarded-For (TRUST_PROXY is off)", async () => {
    await setAllowlist(["10.0.0.0/8"]);
    const spoofed = await overview(org.slug, { token: key, headers: { "x-forwarded-for": "10.1.2.3" } });
    expectError(spoofed, 403, "FORBIDDEN");
    await setAllowlist(["127.0.0.1"]);
    const local = await overview(org.slug, { token: key, headers: { "x-forwarded-for": "192.0.2.7" } });
    expect(local.status, JSON.stringify(local.body)).toBe(200);
  });

  it("lets keys in again once the list is emptied", async () => {
    await setAllowlist(["192.0.2.0/24"]);
    expectError(await overview(org.slug, { token: key }), 403, "FORBIDDEN");
    await setAllowlist([]);
    expect((await overview(org.slug, { token: key })).status).toBe(200);
  });
});
