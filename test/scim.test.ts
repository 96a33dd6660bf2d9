import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  createOrg,
  expectError,
  invitationToken,
  type Mailbox,
  ownerWithOrg,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
  uniqueEmail,
} from "./harness.ts";
import { proveDomain, startDns, type TestDns } from "./identity-kit.ts";

/**
 * SCIM 2.0 provisioning (DESIGN §12) over real HTTP, following the checks of Okta's SCIM 2.0 test
 * plan and Entra ID's SCIM validator: discovery, list with count, filter by userName (any case),
 * create, duplicate 409, unknown id 404, PUT, PATCH in both providers' forms, deactivate, delete,
 * Groups as roles, filters, errors, isolation and the audit log. The org has proven its e-mail
 * domain (DOMAIN), whose people SCIM enrolls at once; anyone else it invites (issue 31 #3, #4).
 */

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const ERROR = "urn:ietf:params:scim:api:messages:2.0:Error";
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
/** The org's proven e-mail domain. */
const DOMAIN = "scim.test";
/** A new address in the org's proven domain. */
const corpEmail = (label: string) => uniqueEmail(label).replace("@example.test", `@${DOMAIN}`);

describe("SCIM provisioning", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let token: string;
  let dns: TestDns;
  let mailbox: Mailbox;

  /** A SCIM request to the org's base URL, as its identity provider makes it. */
  const scim = (method: string, path: string, body?: unknown, as: string | null = token, orgSlug = slug) =>
    call(app, method, `/scim/v2/${orgSlug}${path}`, {
      ...(body !== undefined ? { rawBody: JSON.stringify(body) } : {}),
      headers: {
        ...(body !== undefined ? { "content-type": "application/scim+json" } : {}),
        ...(as ? { authorization: `Bearer ${as}` } : {}),
      },
    });
  const parsed = (res: { body: unknown }) => (typeof res.body === "string" ? JSON.parse(res.body) : res.body);
  const expectScimError = async (
    response: ReturnType<typeof scim>,
    status: number,
    scimType?: string,
  ): Promise<void> => {
    const res = await response;
    expect(res.status, String(res.body)).toBe(status);
    expect(res.headers.get("content-type")).toContain("application/scim+json");
    const body = parsed(res);
    expect(body.schemas).toEqual([ERROR]);
    expect(body.status).toBe(String(status));
    expect(typeof body.detail).toBe("string");
    if (scimType) expect(body.scimType).toBe(scimType);
  };
  const newUser = (email = corpEmail("scim"), extra: Record<string, unknown> = {}) => ({
    schemas: [USER],
    userName: email,
    name: { givenName: "Ada", familyName: "Lovelace" },
    emails: [{ primary: true, value: email, type: "work" }],
    active: true,
    ...extra,
  });
  const members = async () => (await call(app, "GET", `/org/${slug}/members`, { cookie: owner.cookie })).body.members;

  beforeAll(async () => {
    dns = await startDns();
    mailbox = await startMailbox();
    app = await startApp({ RATE_LIMIT_PER_MINUTE: "1000000", DNS_SERVERS: dns.servers, SMTP_URL: mailbox.url });
    ({ owner, slug } = await ownerWithOrg(app, "Provisioned Org"));
    await proveDomain(app, owner.cookie, slug, DOMAIN, dns);
    const minted = await call(app, "POST", `/org/${slug}/scim/token`, { cookie: owner.cookie });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    token = minted.body.token;
  });
  afterAll(async () => {
    await app?.close();
    await dns?.close();
    await mailbox?.close();
  });

  describe("settings and tokens", () => {
    it("shows the base URL, mints a token once and revokes it at once (admin only)", async () => {
      const other = await ownerWithOrg(app, "Token Org");
      const before = await call(app, "GET", `/org/${other.slug}/scim`, { cookie: other.owner.cookie });
      expect(before.body).toEqual({
        scimBaseUrl: `${app.config.publicUrl}/api/scim/v2/${other.slug}`,
        enabled: false,
        tokenCreatedAt: null,
      });
      const first = await call(app, "POST", `/org/${other.slug}/scim/token`, { cookie: other.owner.cookie });
      expect(first.status).toBe(201);
      expect(first.body.token).toMatch(/^scim_[A-Za-z0-9_-]{43}$/);
      const after = await call(app, "GET", `/org/${other.slug}/scim`, { cookie: other.owner.cookie });
      expect(after.body).toMatchObject({ enabled: true, tokenCreatedAt: expect.any(String) });
      expect(JSON.stringify(after.body)).not.toContain(first.body.token);
      expect((await scim("GET", "/Users", undefined, first.body.token, other.slug)).status).toBe(200);
      // A new token replaces the old one at once.
      const second = await call(app, "POST", `/org/${other.slug}/scim/token`, { cookie: other.owner.cookie });
      await expectScimError(scim("GET", "/Users", undefined, first.body.token, other.slug), 401);
      expect((await scim("GET", "/Users", undefined, second.body.token, other.slug)).status).toBe(200);
      // Org A's token on org B: 401.
      await expectScimError(scim("GET", "/Users", undefined, second.body.token, slug), 401);
      expect((await call(app, "DELETE", `/org/${other.slug}/scim`, { cookie: other.owner.cookie })).body).toEqual({
        ok: true,
      });
      await expectScimError(scim("GET", "/Users", undefined, second.body.token, other.slug), 401);
      expectError(await call(app, "DELETE", `/org/${other.slug}/scim`, { cookie: other.owner.cookie }), 409);
      const stranger = await signUp(app);
      expectError(await call(app, "POST", `/org/${other.slug}/scim/token`, { cookie: stranger.cookie }), 404);
    });

    it("answers 401 in SCIM's body without a token, or with a made-up one", async () => {
      await expectScimError(scim("GET", "/Users", undefined, null), 401);
      await expectScimError(scim("GET", "/Users", undefined, "scim_made_up"), 401);
      await expectScimError(scim("GET", "/Users", undefined, `scim_${"A".repeat(43)}`), 401);
      await expectScimError(scim("GET", "/ServiceProviderConfig", undefined, null), 401);
    });
  });

  describe("discovery", () => {
    it("serves ServiceProviderConfig, ResourceTypes and Schemas as application/scim+json", async () => {
      const config = await scim("GET", "/ServiceProviderConfig");
      expect(config.status).toBe(200);
      expect(config.headers.get("content-type")).toContain("application/scim+json");
      expect(parsed(config)).toMatchObject({
        patch: { supported: true },
        filter: { supported: true },
        bulk: { supported: false },
      });
      const types = parsed(await scim("GET", "/ResourceTypes"));
      expect(types.Resources.map((t: { id: string }) => t.id)).toEqual(["User", "Group"]);
      const schemas = parsed(await scim("GET", "/Schemas"));
      expect(schemas.Resources.map((s: { id: string }) => s.id)).toContain(USER);
    });
  });

  describe("Users (Okta's test plan)", () => {
    let created: any;
    const email = corpEmail("okta");

    it("lists users with count=1, and finds none for a random userName", async () => {
      const page = parsed(await scim("GET", "/Users?count=1&startIndex=1"));
      expect(page.schemas).toEqual(["urn:ietf:params:scim:api:messages:2.0:ListResponse"]);
      expect(page.itemsPerPage).toBe(1);
      expect(page.startIndex).toBe(1);
      expect(page.totalResults).toBeGreaterThanOrEqual(1);
      expect(page.Resources[0]).toMatchObject({ schemas: [USER], userName: owner.email, active: true });
      const none = parsed(
        await scim("GET", `/Users?filter=${encodeURIComponent(`userName eq "${uniqueEmail("nobody")}"`)}`),
      );
      expect(none).toMatchObject({ totalResults: 0, Resources: [] });
    });

    it("creates a user, reads it back, finds it by userName in any case", async () => {
      const res = await scim("POST", "/Users", newUser(email, { externalId: "okta-00u1", nickName: "ignored" }));
      expect(res.status, String(res.body)).toBe(201);
      expect(res.headers.get("content-type")).toContain("application/scim+json");
      created = parsed(res);
      expect(created).toMatchObject({
        schemas: [USER],
        id: expect.stringMatching(/^mem_/),
        userName: email,
        externalId: "okta-00u1",
        active: true,
        name: { givenName: "Ada", familyName: "Lovelace" },
        emails: [{ value: email, primary: true }],
        meta: { resourceType: "User", location: expect.stringContaining(`/scim/v2/${slug}/Users/`) },
      });
      expect(parsed(await scim("GET", `/Users/${created.id}`))).toEqual(created);
      for (const variant of [email, email.toUpperCase()]) {
        const found = parsed(await scim("GET", `/Users?filter=${encodeURIComponent(`userName eq "${variant}"`)}`));
        expect(found.totalResults).toBe(1);
        expect(found.Resources[0].id).toBe(created.id);
      }
      const listed = (await members()).find((m: { email: string }) => m.email === email);
      expect(listed).toMatchObject({ id: created.id, role: "viewer", status: "active" });
    });

    it("refuses a duplicate (in any case) with 409 uniqueness, and an unknown id with 404", async () => {
      await expectScimError(scim("POST", "/Users", newUser(email)), 409, "uniqueness");
      await expectScimError(scim("POST", "/Users", newUser(email.toUpperCase())), 409, "uniqueness");
      await expectScimError(scim("GET", "/Users/010101010101-random"), 404);
      await expectScimError(scim("GET", "/Users/mem_01jx0000000000000000000000"), 404);
      await expectScimError(scim("POST", "/Users", { schemas: [USER], name: { givenName: "x" } }), 400, "invalidValue");
      await expectScimError(scim("POST", "/Users", { schemas: [USER], userName: "not-an-email" }), 400, "invalidValue");
      const broken = await call(app, "POST", `/scim/v2/${slug}/Users`, {
        rawBody: "{not json",
        headers: { "content-type": "application/scim+json", authorization: `Bearer ${token}` },
      });
      expect(broken.status).toBe(400);
    });

    it("replaces a user's name with PUT", async () => {
      const res = await scim(
        "PUT",
        `/Users/${created.id}`,
        newUser(email, { name: { givenName: "Augusta", familyName: "King" } }),
      );
      expect(res.status, String(res.body)).toBe(200);
      expect(parsed(res)).toMatchObject({ name: { givenName: "Augusta", familyName: "King" }, active: true });
      await expectScimError(scim("PUT", `/Users/${created.id}`, newUser(corpEmail("other"))), 400, "mutability");
    });

    it("deactivates with PATCH replace (Okta's form): suspended, listed, and locked out of the org", async () => {
      const person = await signUp(app, corpEmail("person"));
      const provisioned = parsed(await scim("POST", "/Users", newUser(person.email)));
      expect((await call(app, "GET", `/org/${slug}/overview`, { cookie: person.cookie })).status).toBe(200);
      const res = await scim("PATCH", `/Users/${provisioned.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "replace", value: { active: false } }],
      });
      expect(res.status, String(res.body)).toBe(200);
      expect(parsed(res).active).toBe(false);
      expectError(await call(app, "GET", `/org/${slug}/overview`, { cookie: person.cookie }), 404);
      const orgs = await call(app, "GET", "/orgs", { cookie: person.cookie });
      expect(JSON.stringify(orgs.body)).not.toContain(slug);
      expect((await members()).find((m: { email: string }) => m.email === person.email)).toMatchObject({
        status: "suspended",
      });
      const reactivated = await scim("PATCH", `/Users/${provisioned.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "replace", value: { active: true } }],
      });
      expect(parsed(reactivated).active).toBe(true);
      expect((await call(app, "GET", `/org/${slug}/overview`, { cookie: person.cookie })).status).toBe(200);
    });

    it("takes Entra ID's PATCH forms: capitalised op, path, 'False' as a string, dotted value keys", async () => {
      const res = await scim("POST", "/Users", newUser(corpEmail("entra")));
      const user = parsed(res);
      const patched = await scim("PATCH", `/Users/${user.id}`, {
        schemas: [PATCH],
        Operations: [
          { op: "Replace", path: "active", value: "False" },
          { op: "Add", value: { "name.givenName": "Grace", "name.familyName": "Hopper" } },
          { op: "Replace", path: "externalId", value: "entra-42" },
          { op: "Add", path: "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", value: "R&D" },
        ],
      });
      expect(patched.status, String(patched.body)).toBe(200);
      expect(parsed(patched)).toMatchObject({
        active: false,
        name: { givenName: "Grace", familyName: "Hopper" },
        externalId: "entra-42",
      });
      const byExternal = parsed(await scim("GET", `/Users?filter=${encodeURIComponent('externalId eq "entra-42"')}`));
      expect(byExternal.Resources.map((u: { id: string }) => u.id)).toEqual([user.id]);
      const back = await scim("PATCH", `/Users/${user.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "replace", path: "active", value: "True" }],
      });
      expect(parsed(back).active).toBe(true);
      await expectScimError(
        scim("PATCH", `/Users/${user.id}`, { schemas: [PATCH], Operations: [{ op: "jump", value: {} }] }),
        400,
        "invalidSyntax",
      );
      await expectScimError(
        scim("PATCH", `/Users/${user.id}`, {
          schemas: [PATCH],
          Operations: [{ op: "replace", path: "active", value: "maybe" }],
        }),
        400,
        "invalidValue",
      );
      await expectScimError(scim("PATCH", `/Users/${user.id}`, { schemas: [PATCH] }), 400, "invalidSyntax");
    });

    it("deletes a user: the membership goes, the account stays", async () => {
      const user = parsed(await scim("POST", "/Users", newUser(corpEmail("gone"))));
      expect((await scim("DELETE", `/Users/${user.id}`)).status).toBe(204);
      await expectScimError(scim("GET", `/Users/${user.id}`), 404);
      await expectScimError(scim("DELETE", `/Users/${user.id}`), 404);
      expect((await members()).some((m: { id: string }) => m.id === user.id)).toBe(false);
    });

    it("leaves owners to Plinth: no suspension or removal of an owner through SCIM", async () => {
      const ownerMember = (await members()).find((m: { role: string }) => m.role === "owner");
      await expectScimError(
        scim("PATCH", `/Users/${ownerMember.id}`, {
          schemas: [PATCH],
          Operations: [{ op: "replace", value: { active: false } }],
        }),
        400,
        "mutability",
      );
      await expectScimError(scim("DELETE", `/Users/${ownerMember.id}`), 400, "mutability");
      expect((await call(app, "GET", `/org/${slug}/overview`, { cookie: owner.cookie })).status).toBe(200);
    });
  });

  describe("filters and paging", () => {
    it("filters with eq, sw, co, pr, and, or, not; pages with startIndex and count", async () => {
      const prefix = `flt${Date.now()}`;
      for (const n of [1, 2, 3]) {
        expect((await scim("POST", "/Users", newUser(`${prefix}-${n}@${DOMAIN}`))).status).toBe(201);
      }
      const query = (filter: string, extra = "") =>
        scim("GET", `/Users?filter=${encodeURIComponent(filter)}${extra}`).then((res) => parsed(res));
      expect((await query(`userName sw "${prefix}"`)).totalResults).toBe(3);
      expect((await query(`userName co "${prefix}-2"`)).totalResults).toBe(1);
      expect((await query(`userName sw "${prefix}" and not (userName eq "${prefix}-1@${DOMAIN}")`)).totalResults).toBe(
        2,
      );
      expect(
        (await query(`userName eq "${prefix}-1@${DOMAIN}" or userName eq "${prefix}-3@${DOMAIN}"`)).totalResults,
      ).toBe(2);
      expect((await query(`emails.value eq "${prefix}-2@${DOMAIN}"`)).totalResults).toBe(1);
      expect((await query(`USERNAME EQ "${prefix.toUpperCase()}-2@${DOMAIN.toUpperCase()}"`)).totalResults).toBe(1);
      const paged = await query(`userName sw "${prefix}"`, "&startIndex=2&count=1");
      expect(paged).toMatchObject({ totalResults: 3, startIndex: 2, itemsPerPage: 1 });
      expect(paged.Resources[0].userName).toBe(`${prefix}-2@${DOMAIN}`);
      for (const bad of [
        "userName eq",
        'userName zz "x"',
        '(userName eq "x"',
        "userName eq x",
        '"x" eq userName',
        'userName eq "x" and',
      ]) {
        await expectScimError(scim("GET", `/Users?filter=${encodeURIComponent(bad)}`), 400, "invalidFilter");
      }
    });
  });

  describe("Groups (roles)", () => {
    it("makes a group a role: its members hold it; add, remove (both forms), replace, delete", async () => {
      const ann = parsed(await scim("POST", "/Users", newUser(corpEmail("ann"))));
      const bob = parsed(await scim("POST", "/Users", newUser(corpEmail("bob"))));
      const roleOf = async (id: string) => (await members()).find((m: { id: string }) => m.id === id)?.role;

      const created = await scim("POST", "/Groups", {
        schemas: ["urn:ietf:params:scim:schemas:core:2.0:Group"],
        displayName: "developer",
        members: [{ value: ann.id }],
      });
      expect(created.status, String(created.body)).toBe(201);
      const group = parsed(created);
      expect(group).toMatchObject({ displayName: "developer", members: [{ value: ann.id }] });
      expect(await roleOf(ann.id)).toBe("developer");
      expect(parsed(await scim("GET", `/Users/${ann.id}`)).groups).toEqual([
        expect.objectContaining({ value: group.id, display: "developer" }),
      ]);
      await expectScimError(scim("POST", "/Groups", { displayName: "Developer" }), 409, "uniqueness");
      await expectScimError(scim("POST", "/Groups", { displayName: "Engineering" }), 400, "invalidValue");
      const found = parsed(await scim("GET", `/Groups?filter=${encodeURIComponent('displayName eq "developer"')}`));
      expect(found.Resources.map((g: { id: string }) => g.id)).toEqual([group.id]);
      const lean = parsed(await scim("GET", `/Groups/${group.id}?excludedAttributes=members`));
      expect(lean).not.toHaveProperty("members");

      // Okta: add, then remove by filter path.
      await scim("PATCH", `/Groups/${group.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "add", path: "members", value: [{ value: bob.id }] }],
      });
      expect(await roleOf(bob.id)).toBe("developer");
      await scim("PATCH", `/Groups/${group.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "remove", path: `members[value eq "${bob.id}"]` }],
      });
      expect(await roleOf(bob.id)).toBe("viewer");
      // Entra ID: Remove with the members in the value.
      await scim("PATCH", `/Groups/${group.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "Remove", path: "members", value: [{ value: ann.id }] }],
      });
      expect(await roleOf(ann.id)).toBe("viewer");
      // PUT replaces the members.
      const replaced = await scim("PUT", `/Groups/${group.id}`, {
        displayName: "developer",
        members: [{ value: bob.id }],
      });
      expect(parsed(replaced).members.map((m: { value: string }) => m.value)).toEqual([bob.id]);
      await expectScimError(
        scim("PUT", `/Groups/${group.id}`, { displayName: "admin", members: [] }),
        400,
        "mutability",
      );
      await expectScimError(
        scim("PATCH", `/Groups/${group.id}`, {
          schemas: [PATCH],
          Operations: [{ op: "add", path: "members", value: [{ value: "mem_nobody" }] }],
        }),
        400,
        "invalidValue",
      );
      // Deleting the group takes its role away.
      expect((await scim("DELETE", `/Groups/${group.id}`)).status).toBe(204);
      expect(await roleOf(bob.id)).toBe("viewer");
      await expectScimError(scim("GET", `/Groups/${group.id}`), 404);

      // An admin group gives admin: the member may now manage the org.
      const admins = parsed(await scim("POST", "/Groups", { displayName: "admin", members: [{ value: ann.id }] }));
      expect(await roleOf(ann.id)).toBe("admin");
      expect(admins.members).toHaveLength(1);
    });
  });

  describe("people outside the org's proven domain (issue 31)", () => {
    const memberOf = async (email: string) => (await members()).find((m: { email: string }) => m.email === email);
    const accept = async (person: TestUser, since: number) => {
      const invitation = invitationToken(await mailbox.waitFor(person.email, since));
      return call(app, "POST", "/invitations/accept", { cookie: person.cookie, body: { token: invitation } });
    };

    it("invites an address it does not own instead of making its account: its holder can still sign up (#3)", async () => {
      const victim = uniqueEmail("victim");
      const since = mailbox.messages.length;
      const res = await scim("POST", "/Users", newUser(victim, { externalId: "okta-victim" }));
      expect(res.status, String(res.body)).toBe(201);
      const user = parsed(res);
      expect(user).toMatchObject({ id: expect.stringMatching(/^mem_/), userName: victim, active: true });
      expect(await memberOf(victim)).toMatchObject({ status: "invited", accountId: null, role: "viewer" });
      // No account was made for the address: its holder signs up as anyone would.
      const holder = await signUp(app, victim, "The Real Holder");
      expect((await call(app, "GET", "/orgs", { cookie: holder.cookie })).body.orgs).toEqual([]);
      // Accepting the mailed invitation (as for POST …/invitations) makes them the member SCIM named.
      expect((await accept(holder, since)).status).toBe(200);
      expect(await memberOf(victim)).toMatchObject({ id: user.id, status: "active", accountId: holder.accountId });
      expect(parsed(await scim("GET", `/Users/${user.id}`))).toMatchObject({
        id: user.id,
        externalId: "okta-victim",
        active: true,
      });
    });

    it("never enrolls an existing account it does not own, nor shows or changes its name (#4)", async () => {
      const person = await signUp(app, uniqueEmail("private"), "Victoria Private");
      const since = mailbox.messages.length;
      const res = await scim(
        "POST",
        "/Users",
        newUser(person.email, { name: { givenName: "Evil", familyName: "Rename" } }),
      );
      expect(res.status, String(res.body)).toBe(201);
      const user = parsed(res);
      expect(JSON.stringify(user)).not.toContain("Victoria");
      expect(user.displayName).toBe("Evil Rename");
      // Invited, not a member: the org cannot see into the account, nor act in it.
      expect(await memberOf(person.email)).toMatchObject({ status: "invited", accountId: null, name: null });
      expect(JSON.stringify((await call(app, "GET", "/orgs", { cookie: person.cookie })).body)).not.toContain(slug);
      const renamed = await scim("PATCH", `/Users/${user.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "replace", value: { "name.givenName": "Other" } }],
      });
      expect(parsed(renamed).name.givenName).toBe("Other");
      const account = async () => (await call(app, "GET", "/account", { cookie: person.cookie })).body;
      expect(JSON.stringify(await account())).toContain("Victoria Private");
      // Once they accept, SCIM keeps its own name for them in this org; the account's stays theirs.
      expect((await accept(person, since)).status).toBe(200);
      expect(parsed(await scim("GET", `/Users/${user.id}`)).displayName).toBe("Other Rename");
      await scim(
        "PUT",
        `/Users/${user.id}`,
        newUser(person.email, { name: { givenName: "Third", familyName: "Name" } }),
      );
      expect(parsed(await scim("GET", `/Users/${user.id}`)).displayName).toBe("Third Name");
      expect(JSON.stringify(await account())).toContain("Victoria Private");
    });

    it("enrolls an existing account of the proven domain at once, still without renaming it (#4)", async () => {
      const person = await signUp(app, corpEmail("employee"), "Own Name");
      const user = parsed(await scim("POST", "/Users", newUser(person.email)));
      expect(await memberOf(person.email)).toMatchObject({
        id: user.id,
        status: "active",
        accountId: person.accountId,
      });
      expect(user.displayName).toBe("Ada Lovelace");
      const account = (await call(app, "GET", "/account", { cookie: person.cookie })).body;
      expect(JSON.stringify(account)).toContain("Own Name");
    });

    it("treats an invited user as a user: groups set its role, DELETE revokes the invitation", async () => {
      const email = uniqueEmail("invitee");
      const user = parsed(await scim("POST", "/Users", newUser(email)));
      await expectScimError(scim("POST", "/Users", newUser(email)), 409, "uniqueness");
      const group = parsed(await scim("POST", "/Groups", { displayName: "viewer", members: [] }));
      const developers = parsed(
        await scim("GET", `/Groups?filter=${encodeURIComponent('displayName eq "developer"')}`),
      );
      const developer = developers.Resources[0] ?? parsed(await scim("POST", "/Groups", { displayName: "developer" }));
      await scim("PATCH", `/Groups/${developer.id}`, {
        schemas: [PATCH],
        Operations: [{ op: "add", path: "members", value: [{ value: user.id }] }],
      });
      expect(await memberOf(email)).toMatchObject({ status: "invited", role: "developer" });
      expect(
        parsed(await scim("GET", `/Groups/${developer.id}`)).members.map((m: { value: string }) => m.value),
      ).toContain(user.id);
      const found = parsed(await scim("GET", `/Users?filter=${encodeURIComponent(`userName eq "${email}"`)}`));
      expect(found.Resources.map((u: { id: string }) => u.id)).toEqual([user.id]);
      expect((await scim("DELETE", `/Users/${user.id}`)).status).toBe(204);
      expect(await memberOf(email)).toBeUndefined();
      await expectScimError(scim("GET", `/Users/${user.id}`), 404);
      expect((await scim("DELETE", `/Groups/${group.id}`)).status).toBe(204);
    });
  });

  it("audits every change with SCIM as the actor", async () => {
    const user = parsed(await scim("POST", "/Users", newUser(corpEmail("audited"))));
    await scim("PATCH", `/Users/${user.id}`, {
      schemas: [PATCH],
      Operations: [{ op: "replace", value: { active: false } }],
    });
    await scim("DELETE", `/Users/${user.id}`);
    const audit = await call(app, "GET", `/org/${slug}/audit?action=member.*&limit=200`, { cookie: owner.cookie });
    const rows = audit.body.events.filter((e: { target: { id: string } }) => e.target.id === user.id);
    expect(rows.map((e: { action: string }) => e.action)).toEqual([
      "member.deprovisioned",
      "member.suspended",
      "member.provisioned",
    ]);
    for (const row of rows) expect(row.actor.type).toBe("scim");
    const tokens = await call(app, "GET", `/org/${slug}/audit?action=scim.*`, { cookie: owner.cookie });
    expect(tokens.body.events.map((e: { action: string }) => e.action)).toContain("scim.token_created");
  });

  it("keeps orgs apart: another org's members are not found with this org's token", async () => {
    const other = await signUp(app);
    const otherSlug = (await createOrg(app, other, "Elsewhere")).slug;
    const theirs = (await call(app, "GET", `/org/${otherSlug}/members`, { cookie: other.cookie })).body.members[0];
    await expectScimError(scim("GET", `/Users/${theirs.id}`), 404);
    await expectScimError(scim("DELETE", `/Users/${theirs.id}`), 404);
  });
});
