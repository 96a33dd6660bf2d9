import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addMember,
  call,
  createApiKey,
  createOrg,
  expectError,
  expectNoContent,
  expectValidation,
  invitationToken,
  type Mailbox,
  mailText,
  type ReceivedMail,
  signUp,
  sleep,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
  uniqueEmail,
  until,
} from "./harness.ts";

/** Links in mails must use PUBLIC_URL, not the address the server happens to listen on. */
const PUBLIC_URL = "http://console.plinth.test";
const DAY_MS = 86_400_000;

type Role = "owner" | "admin" | "developer" | "viewer";
type Who = Role | "full" | "deploy" | "read-only" | "none";
const EVERYONE: Who[] = ["owner", "admin", "developer", "viewer", "full", "deploy", "read-only", "none"];

type Member = any;

async function startAppWithMailbox(): Promise<{ app: TestApp; mailbox: Mailbox }> {
  const mailbox = await startMailbox();
  // Many sign-ups come from 127.0.0.1 in one minute; the per-address sign-up limit is not under test here.
  const app = await startApp({ SMTP_URL: mailbox.url, PUBLIC_URL, AUTH_RATE_LIMIT_PER_MINUTE: "10000" });
  return { app, mailbox };
}

describe("members and invitations", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  /** Every invitation token seen in this block; none may ever show up in an audit row. */
  const tokensSeen: string[] = [];
  const orgsSeen: { slug: string; owner: TestUser }[] = [];

  beforeAll(async () => {
    ({ app, mailbox } = await startAppWithMailbox());
  });
  afterAll(async () => {
    await app?.close();
    await mailbox?.close();
  });

  // ---- helpers bound to this block's app ----

  async function newOrg(name = "Members Org"): Promise<{ owner: TestUser; slug: string; ownerMemberId: string }> {
    const owner = await signUp(app, uniqueEmail("owner"), "Olive Owner");
    const org = await createOrg(app, owner, name);
    orgsSeen.push({ slug: org.slug, owner });
    const members = await list(org.slug, owner);
    return { owner, slug: org.slug, ownerMemberId: members[0].id };
  }

  function as(who: { cookie?: string; token?: string } | undefined) {
    if (!who) return {};
    return who.cookie ? { cookie: who.cookie } : { token: who.token as string };
  }

  async function list(slug: string, who: { cookie?: string; token?: string }): Promise<Member[]> {
    const res = await call(app, "GET", `/org/${slug}/members`, as(who));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.members;
  }

  function invite(slug: string, who: { cookie?: string; token?: string } | undefined, body: unknown) {
    return call(app, "POST", `/org/${slug}/invitations`, { ...as(who), body });
  }

  /** Invites `email` and returns the invitation id and the token from the mail that arrived. */
  async function inviteAndReadMail(
    slug: string,
    who: { cookie?: string; token?: string },
    email: string,
    role: "admin" | "developer" | "viewer",
  ): Promise<{ id: string; token: string; mail: ReceivedMail }> {
    const since = mailbox.messages.length;
    const res = await invite(slug, who, { email, role });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const mail = await mailbox.waitFor(email, since);
    const token = invitationToken(mail);
    tokensSeen.push(token);
    return { id: res.body.invite.id, token, mail };
  }

  function accept(user: { cookie?: string; token?: string } | undefined, token: unknown) {
    return call(app, "POST", "/invitations/accept", { ...as(user), body: { token } });
  }

  async function audit(slug: string, owner: TestUser) {
    const res = await call(app, "GET", `/org/${slug}/audit?limit=500`, { cookie: owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.events as any[];
  }

  // ---- invitation flow ----

  describe("invitation flow", () => {
    it("puts the org's name on one line of the mail, whatever line breaks it holds", async () => {
      // The API refuses such a name now; one stored before that still reaches mail.
      const { owner, slug } = await newOrg("Acme");
      await app.server.deps.db
        .updateTable("orgs")
        .set({ name: "Acme\r\nAccept here instead: https://evil.example/x" })
        .where("slug", "=", slug)
        .execute();
      const email = uniqueEmail("spoofed");
      const { mail } = await inviteAndReadMail(slug, { cookie: owner.cookie }, email, "viewer");
      const lines = mailText(mail).split(/\r?\n/);
      expect(lines.filter((line) => line.startsWith("Accept here instead"))).toEqual([]);
      expect(lines.some((line) => line.includes('"Acme  Accept here instead: https://evil.example/x"'))).toBe(true);
    });

    it("invites by mail through SMTP, lists the pending invitation, and the invitee joins with the invited role", async () => {
      const { owner, slug } = await newOrg("Flow Org");
      const email = uniqueEmail("invitee");

      const since = mailbox.messages.length;
      const res = await invite(slug, owner, { email, role: "developer" });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.invite).toMatchObject({ email, role: "developer" });
      expect(res.body.invite.id).toEqual(expect.any(String));
      const inviteId: string = res.body.invite.id;

      // The mail is delivered over real SMTP to the invitee, with the accept link on PUBLIC_URL.
      const mail = await mailbox.waitFor(email, since);
      expect(mail.to).toEqual([email]);
      const text = mailText(mail);
      expect(text).toContain(`${PUBLIC_URL}/accept-invite?token=`);
      const token = invitationToken(mail);
      tokensSeen.push(token);
      expect(token.length).toBeGreaterThanOrEqual(20);
      // The token is not the invitation id (ids are listed to every member).
      expect(token).not.toBe(inviteId);
      expect(text).not.toContain(`${app.url}/accept-invite`);

      // The pending invitation is listed with the documented member shape.
      const pending = await list(slug, owner);
      expect(pending).toHaveLength(2);
      const ownerEntry = pending.find((m: Member) => m.accountId === owner.accountId);
      expect(ownerEntry).toMatchObject({
        email: owner.email,
        name: "Olive Owner",
        role: "owner",
        status: "active",
      });
      expect(ownerEntry.id).toEqual(expect.any(String));
      expect(Number.isNaN(Date.parse(ownerEntry.joinedAt))).toBe(false);
      const invitedEntry = pending.find((m: Member) => m.email === email);
      expect(invitedEntry).toMatchObject({ id: inviteId, accountId: null, role: "developer", status: "invited" });
      expect(invitedEntry.joinedAt).toBeNull();
      for (const m of pending) {
        for (const key of ["id", "accountId", "email", "name", "role", "status", "joinedAt"]) {
          expect(m).toHaveProperty(key);
        }
      }

      // The invitee signs up with the invited address after the invitation was sent, and accepts.
      const invitee = await signUp(app, email, "Ivy Invitee");
      const accepted = await accept(invitee, token);
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(200);
      expect(accepted.body).toEqual({ orgSlug: slug });

      const after = await list(slug, owner);
      expect(after).toHaveLength(2);
      const joined = after.find((m: Member) => m.email === email);
      expect(joined).toMatchObject({
        accountId: invitee.accountId,
        name: "Ivy Invitee",
        role: "developer",
        status: "active",
      });
      expect(Number.isNaN(Date.parse(joined.joinedAt))).toBe(false);
      expect(after.some((m: Member) => m.status === "invited")).toBe(false);

      // The new member sees the org with the invited role, and may read the member list.
      const orgs = await call(app, "GET", "/orgs", { cookie: invitee.cookie });
      expect(orgs.body.orgs).toEqual([expect.objectContaining({ slug, role: "developer" })]);
      expect((await list(slug, invitee)).map((m: Member) => m.id).sort()).toEqual(
        after.map((m: Member) => m.id).sort(),
      );

      // Audit: invited then joined; the token appears nowhere.
      const events = await audit(slug, owner);
      const invited = events.find((e) => e.action === "member.invited");
      expect(invited).toBeDefined();
      expect(invited.actor).toMatchObject({ type: "account", id: owner.accountId });
      expect(invited.data).toMatchObject({ email, role: "developer" });
      const joinedEvent = events.find((e) => e.action === "member.joined");
      expect(joinedEvent).toBeDefined();
      expect(joinedEvent.actor).toMatchObject({ type: "account", id: invitee.accountId });
      expect(joinedEvent.target).toMatchObject({ type: "member", id: joined.id });
      expect(JSON.stringify(events)).not.toContain(token);
    });

    it("accepts an invitation for an account that existed before the invitation", async () => {
      const { owner, slug } = await newOrg();
      const existing = await signUp(app, uniqueEmail("existing"), "Eve Existing");
      const { token } = await inviteAndReadMail(slug, owner, existing.email, "viewer");
      const res = await accept(existing, token);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.orgSlug).toBe(slug);
      const members = await list(slug, owner);
      expect(members.find((m: Member) => m.accountId === existing.accountId)).toMatchObject({
        role: "viewer",
        status: "active",
      });
    });

    it("matches the invited address case-insensitively", async () => {
      const { owner, slug } = await newOrg();
      const email = uniqueEmail("mixed");
      const shouted = email.toUpperCase();
      const since = mailbox.messages.length;
      const res = await invite(slug, owner, { email: shouted, role: "admin" });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const token = invitationToken(await mailbox.waitFor(email, since));
      tokensSeen.push(token);
      const user = await signUp(app, email);
      expect((await accept(user, token)).status).toBe(200);
      expect((await list(slug, owner)).find((m: Member) => m.accountId === user.accountId)?.role).toBe("admin");
      // Once a member, the address in any case is a conflict.
      expectError(await invite(slug, owner, { email: shouted, role: "viewer" }), 409, "CONFLICT");
    });

    it("an API key with full scope can invite; the audit row names the key as actor", async () => {
      const { owner, slug } = await newOrg();
      const key = await createApiKey(app, owner, slug, "full");
      const email = uniqueEmail("bykey");
      const { id, token } = await inviteAndReadMail(slug, key, email, "developer");
      const user = await signUp(app, email);
      expect((await accept(user, token)).status).toBe(200);
      const events = await audit(slug, owner);
      const invited = events.find((e) => e.action === "member.invited" && e.target.id === id);
      expect(invited?.actor).toMatchObject({ type: "api_key", id: key.id });
    });
  });

  // ---- InviteInput validation ----

  describe("InviteInput validation", () => {
    let owner: TestUser;
    let slug: string;
    beforeAll(async () => {
      ({ owner, slug } = await newOrg("Validation Org"));
    });

    it.each([
      ["not an e-mail", { email: "not-an-email", role: "viewer" }, "email"],
      ["an e-mail without domain", { email: "someone@", role: "viewer" }, "email"],
      ["a number as e-mail", { email: 42, role: "viewer" }, "email"],
      ["role owner", { email: "owner-invite@example.test", role: "owner" }, "role"],
      ["role superuser", { email: "super-invite@example.test", role: "superuser" }, "role"],
      ["missing e-mail", { role: "viewer" }, "email"],
      ["missing role", { email: "norole@example.test" }, "role"],
    ])("%s → 422 naming the field", async (_label, body, field) => {
      expectValidation(await invite(slug, owner, body), field);
    });

    it("an empty object names both fields", async () => {
      const res = await invite(slug, owner, {});
      expectValidation(res, "email");
      expectValidation(res, "role");
    });

    it("malformed JSON → 400", async () => {
      const res = await call(app, "POST", `/org/${slug}/invitations`, {
        cookie: owner.cookie,
        rawBody: "{not json",
        headers: { "content-type": "application/json" },
      });
      expectError(res, 400, "BAD_REQUEST");
    });

    it("rejected invitations create nothing", async () => {
      const members = await list(slug, owner);
      expect(members).toHaveLength(1);
      expect(members[0].accountId).toBe(owner.accountId);
    });
  });

  // ---- accept rules ----

  describe("accepting", () => {
    let owner: TestUser;
    let slug: string;
    beforeAll(async () => {
      ({ owner, slug } = await newOrg("Accept Org"));
    });

    it("a different signed-in account → 403, and the invitation stays usable by the invitee", async () => {
      const email = uniqueEmail("right");
      const { token } = await inviteAndReadMail(slug, owner, email, "developer");
      const stranger = await signUp(app, uniqueEmail("stranger"));
      expectError(await accept(stranger, token), 403, "FORBIDDEN");
      // The stranger did not join.
      const orgs = await call(app, "GET", "/orgs", { cookie: stranger.cookie });
      expect(orgs.body.orgs).toEqual([]);
      expectError(await call(app, "GET", `/org/${slug}/members`, { cookie: stranger.cookie }), 404, "NOT_FOUND");
      // The owner of the org is a different account too.
      expectError(await accept(owner, token), 403, "FORBIDDEN");
      const invitee = await signUp(app, email);
      expect((await accept(invitee, token)).status).toBe(200);
    });

    it("an unknown token → 404", async () => {
      const user = await signUp(app);
      expectError(await accept(user, "no-such-invitation-token-0123456789abcdef"), 404, "NOT_FOUND");
    });

    it("the same token twice → the second fails", async () => {
      const email = uniqueEmail("twice");
      const { token } = await inviteAndReadMail(slug, owner, email, "viewer");
      const invitee = await signUp(app, email);
      expect((await accept(invitee, token)).status).toBe(200);
      const again = await accept(invitee, token);
      expect([404, 409]).toContain(again.status);
      expect(again.body.error.code).toBe(again.status === 404 ? "NOT_FOUND" : "CONFLICT");
      expect((await list(slug, owner)).filter((m: Member) => m.email === email)).toHaveLength(1);
    });

    it("the same token accepted concurrently → exactly one succeeds, the others 404/409", async () => {
      // A few rounds, so that the requests really overlap at least once.
      for (let round = 0; round < 3; round++) {
        const email = uniqueEmail("race");
        const { token } = await inviteAndReadMail(slug, owner, email, "viewer");
        const invitee = await signUp(app, email);
        const results = await Promise.all([1, 2, 3, 4, 5, 6].map(() => accept(invitee, token)));
        const statuses = results.map((r) => r.status);
        const context = `round ${round}: ${JSON.stringify(results.map((r) => r.body))}`;
        expect(
          statuses.filter((s) => s === 200),
          context,
        ).toHaveLength(1);
        for (const s of statuses.filter((s) => s !== 200)) expect([404, 409], context).toContain(s);
        expect((await list(slug, owner)).filter((m: Member) => m.email === email)).toHaveLength(1);
      }
    });

    it("an empty or missing token → 422 naming token", async () => {
      const user = await signUp(app);
      expectValidation(await accept(user, ""), "token");
      expectValidation(await call(app, "POST", "/invitations/accept", { cookie: user.cookie, body: {} }), "token");
      expectValidation(await accept(user, 123), "token");
    });

    it("no session → 401", async () => {
      const email = uniqueEmail("nosession");
      const { token } = await inviteAndReadMail(slug, owner, email, "viewer");
      expectError(await accept(undefined, token), 401, "UNAUTHORIZED");
      // A stale or forged session cookie is no session either.
      expectError(
        await call(app, "POST", "/invitations/accept", {
          cookie: "plinth.session_token=forged.value",
          body: { token },
        }),
        401,
        "UNAUTHORIZED",
      );
      // The invitation is still pending.
      expect((await list(slug, owner)).find((m: Member) => m.email === email)?.status).toBe("invited");
    });

    it("an API key → 403 (accepting needs a signed-in account)", async () => {
      const email = uniqueEmail("bykey");
      const { token } = await inviteAndReadMail(slug, owner, email, "viewer");
      const key = await createApiKey(app, owner, slug, "full");
      expectError(await accept(key, token), 403, "FORBIDDEN");
      expect((await list(slug, owner)).find((m: Member) => m.email === email)?.status).toBe("invited");
    });

    it("an invitation to an org that was deleted → 404", async () => {
      const other = await newOrg("Doomed Org");
      const email = uniqueEmail("doomed");
      const { token } = await inviteAndReadMail(other.slug, other.owner, email, "viewer");
      const del = await call(app, "DELETE", `/org/${other.slug}`, { cookie: other.owner.cookie });
      expect(del.status, JSON.stringify(del.body)).toBe(200);
      const invitee = await signUp(app, email);
      expectError(await accept(invitee, token), 404, "NOT_FOUND");
    });
  });

  // ---- duplicates ----

  describe("duplicate invitations", () => {
    let owner: TestUser;
    let slug: string;
    beforeAll(async () => {
      ({ owner, slug } = await newOrg("Dup Org"));
    });

    it("inviting an existing member → 409", async () => {
      const { user } = await addMember(app, mailbox, owner, slug, "developer");
      expectError(await invite(slug, owner, { email: user.email, role: "admin" }), 409, "CONFLICT");
      expectError(await invite(slug, owner, { email: owner.email, role: "viewer" }), 409, "CONFLICT");
    });

    it("inviting an address with a live pending invitation → 409, and no second mail", async () => {
      const email = uniqueEmail("pending");
      const first = await inviteAndReadMail(slug, owner, email, "viewer");
      const since = mailbox.messages.length;
      expectError(await invite(slug, owner, { email, role: "admin" }), 409, "CONFLICT");
      const pendings = (await list(slug, owner)).filter((m: Member) => m.email === email);
      expect(pendings).toHaveLength(1);
      expect(pendings[0]).toMatchObject({ id: first.id, role: "viewer", status: "invited" });
      // Give a stray mail a moment to arrive, then make sure none did.
      await sleep(200);
      expect(mailbox.messages.slice(since).filter((m) => m.to.includes(email))).toHaveLength(0);
    });

    it("concurrent invitations of one address → exactly one 201, the rest 409", async () => {
      const email = uniqueEmail("concurrent");
      const results = await Promise.all([1, 2, 3, 4].map(() => invite(slug, owner, { email, role: "developer" })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses, JSON.stringify(results.map((r) => r.body))).toEqual([201, 409, 409, 409]);
      expect((await list(slug, owner)).filter((m: Member) => m.email === email)).toHaveLength(1);
    });

    it("after a revoke the address can be invited again", async () => {
      const email = uniqueEmail("again");
      const first = await inviteAndReadMail(slug, owner, email, "viewer");
      expectNoContent(await call(app, "DELETE", `/org/${slug}/members/${first.id}`, { cookie: owner.cookie }));
      const second = await inviteAndReadMail(slug, owner, email, "admin");
      expect(second.id).not.toBe(first.id);
      const user = await signUp(app, email);
      expectError(await accept(user, first.token), 404, "NOT_FOUND");
      expect((await accept(user, second.token)).status).toBe(200);
      expect((await list(slug, owner)).find((m: Member) => m.accountId === user.accountId)?.role).toBe("admin");
    });

    it("a removed member can be invited again and rejoin", async () => {
      const { user, memberId } = await addMember(app, mailbox, owner, slug, "viewer");
      expectNoContent(await call(app, "DELETE", `/org/${slug}/members/${memberId}`, { cookie: owner.cookie }));
      const { token } = await inviteAndReadMail(slug, owner, user.email, "developer");
      expect((await accept(user, token)).status).toBe(200);
      const rejoined = (await list(slug, owner)).filter((m: Member) => m.email === user.email);
      expect(rejoined).toHaveLength(1);
      expect(rejoined[0]).toMatchObject({ accountId: user.accountId, role: "developer", status: "active" });
    });
  });

  // ---- resend ----

  describe("resend", () => {
    let owner: TestUser;
    let slug: string;
    beforeAll(async () => {
      ({ owner, slug } = await newOrg("Resend Org"));
    });

    it("sends the mails of overlapping resends in order: the last to arrive carries the token that works", async () => {
      const email = uniqueEmail("overlap");
      const first = await inviteAndReadMail(slug, owner, email, "developer");
      const since = mailbox.messages.length;
      // The first resend's mail is held at the server while the second resend is asked for.
      const release = mailbox.hold(email);
      const resend = () => call(app, "POST", `/org/${slug}/members/${first.id}/resend`, { cookie: owner.cookie });
      expect((await resend()).status).toBe(200);
      await until("the first resend's mail to be held", () => mailbox.pending(email));
      expect((await resend()).status).toBe(200);
      // The second mail waits for the first, which is still going out.
      await sleep(1_000);
      expect(mailbox.messages.slice(since).filter((m) => m.to.includes(email))).toHaveLength(0);
      release();
      await until("both mails", () => mailbox.messages.slice(since).filter((m) => m.to.includes(email)).length === 2);
      const [older, newer] = mailbox.messages.slice(since).filter((m) => m.to.includes(email));
      const invitee = await signUp(app, email);
      expectError(await accept(invitee, invitationToken(older!)), 404, "NOT_FOUND");
      const ok = await accept(invitee, invitationToken(newer!));
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    });

    it("sends a new mail with a new token; the old token stops working and the new one works", async () => {
      const email = uniqueEmail("resend");
      const first = await inviteAndReadMail(slug, owner, email, "developer");
      const since = mailbox.messages.length;
      const res = await call(app, "POST", `/org/${slug}/members/${first.id}/resend`, { cookie: owner.cookie });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toEqual({ ok: true });
      const mail = await mailbox.waitFor(email, since);
      expect(mail.to).toEqual([email]);
      expect(mailText(mail)).toContain(`${PUBLIC_URL}/accept-invite?token=`);
      const newToken = invitationToken(mail);
      tokensSeen.push(newToken);
      expect(newToken).not.toBe(first.token);

      // Still one pending invitation, same id.
      const pendings = (await list(slug, owner)).filter((m: Member) => m.email === email);
      expect(pendings).toEqual([expect.objectContaining({ id: first.id, status: "invited", role: "developer" })]);

      const invitee = await signUp(app, email);
      expectError(await accept(invitee, first.token), 404, "NOT_FOUND");
      const ok = await accept(invitee, newToken);
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      expect(ok.body).toEqual({ orgSlug: slug });
      expect((await list(slug, owner)).find((m: Member) => m.email === email)).toMatchObject({
        accountId: invitee.accountId,
        role: "developer",
        status: "active",
      });

      const events = await audit(slug, owner);
      const text = JSON.stringify(events);
      expect(text).not.toContain(first.token);
      expect(text).not.toContain(newToken);
    });

    it("on an active member id → 409", async () => {
      const { memberId } = await addMember(app, mailbox, owner, slug, "viewer");
      expectError(
        await call(app, "POST", `/org/${slug}/members/${memberId}/resend`, { cookie: owner.cookie }),
        409,
        "CONFLICT",
      );
      const members = await list(slug, owner);
      const ownerId = members.find((m: Member) => m.accountId === owner.accountId).id;
      expectError(
        await call(app, "POST", `/org/${slug}/members/${ownerId}/resend`, { cookie: owner.cookie }),
        409,
        "CONFLICT",
      );
    });

    it("on an unknown id → 404", async () => {
      for (const id of ["inv_00000000000000000000000000", "mem_00000000000000000000000000", "nonsense"]) {
        expectError(
          await call(app, "POST", `/org/${slug}/members/${id}/resend`, { cookie: owner.cookie }),
          404,
          "NOT_FOUND",
        );
      }
    });

    it("on an accepted or revoked invitation → 404, and no mail is sent", async () => {
      const accepted = await inviteAndReadMail(slug, owner, uniqueEmail("acc"), "viewer");
      const user = await signUp(app, accepted.mail.to[0] as string);
      expect((await accept(user, accepted.token)).status).toBe(200);
      const revoked = await inviteAndReadMail(slug, owner, uniqueEmail("rev"), "viewer");
      expectNoContent(await call(app, "DELETE", `/org/${slug}/members/${revoked.id}`, { cookie: owner.cookie }));
      const since = mailbox.messages.length;
      for (const id of [accepted.id, revoked.id]) {
        expectError(
          await call(app, "POST", `/org/${slug}/members/${id}/resend`, { cookie: owner.cookie }),
          404,
          "NOT_FOUND",
        );
      }
      await sleep(200);
      expect(mailbox.messages.length).toBe(since);
    });
  });

  // ---- revoke ----

  describe("revoking an invitation", () => {
    it("DELETE on a pending invitation → 204 without body; it leaves the list and its token fails", async () => {
      const { owner, slug } = await newOrg("Revoke Org");
      const email = uniqueEmail("revoked");
      const { id, token } = await inviteAndReadMail(slug, owner, email, "admin");
      const res = await call(app, "DELETE", `/org/${slug}/members/${id}`, { cookie: owner.cookie });
      expectNoContent(res);
      expect(res.headers.get("content-type")).toBeNull();
      expect((await list(slug, owner)).some((m: Member) => m.email === email || m.id === id)).toBe(false);
      const invitee = await signUp(app, email);
      expectError(await accept(invitee, token), 404, "NOT_FOUND");
      // Revoking twice: the invitation is gone.
      expectError(await call(app, "DELETE", `/org/${slug}/members/${id}`, { cookie: owner.cookie }), 404, "NOT_FOUND");
      expect(JSON.stringify(await audit(slug, owner))).not.toContain(token);
    });
  });

  // ---- role changes ----

  describe("role changes", () => {
    let owner: TestUser;
    let slug: string;
    let ownerMemberId: string;
    let admin: { user: TestUser; memberId: string };
    let dev: { user: TestUser; memberId: string };

    beforeAll(async () => {
      ({ owner, slug, ownerMemberId } = await newOrg("Roles Org"));
      admin = await addMember(app, mailbox, owner, slug, "admin");
      dev = await addMember(app, mailbox, owner, slug, "developer");
    });

    function patch(who: { cookie?: string; token?: string }, id: string, body: unknown) {
      return call(app, "PATCH", `/org/${slug}/members/${id}`, { ...as(who), body });
    }

    async function roleOf(id: string): Promise<Role> {
      return (await list(slug, owner)).find((m: Member) => m.id === id)?.role;
    }

    it("an admin sets viewer, admin and developer on a non-owner", async () => {
      for (const role of ["viewer", "admin", "developer"] as const) {
        const res = await patch(admin.user, dev.memberId, { role });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body).toEqual({ ok: true });
        expect(await roleOf(dev.memberId)).toBe(role);
      }
      // The member's own view follows.
      const orgs = await call(app, "GET", "/orgs", { cookie: dev.user.cookie });
      expect(orgs.body.orgs.find((o: { slug: string }) => o.slug === slug)?.role).toBe("developer");
      const events = await audit(slug, owner);
      const changes = events.filter((e) => e.action === "member.role_changed" && e.target.id === dev.memberId);
      expect(changes).toHaveLength(3);
      expect(changes.find((e) => e.data.to === "viewer")?.data).toMatchObject({ from: "developer", to: "viewer" });
      expect(changes[0].actor).toMatchObject({ type: "account", id: admin.user.accountId });
    });

    it("an admin granting owner → 403", async () => {
      expectError(await patch(admin.user, dev.memberId, { role: "owner" }), 403, "FORBIDDEN");
      expect(await roleOf(dev.memberId)).toBe("developer");
    });

    it("an admin demoting an owner → 403", async () => {
      for (const role of ["admin", "developer", "viewer"]) {
        expectError(await patch(admin.user, ownerMemberId, { role }), 403, "FORBIDDEN");
      }
      expect(await roleOf(ownerMemberId)).toBe("owner");
    });

    it("the last owner cannot be demoted, removed, or leave → 409", async () => {
      expectError(await patch(owner, ownerMemberId, { role: "admin" }), 409, "CONFLICT");
      expectError(await call(app, "DELETE", `/org/${slug}/members/${ownerMemberId}`, { cookie: owner.cookie }), 409);
      expect(await roleOf(ownerMemberId)).toBe("owner");
    });

    it("role must be one of the enum → 422 naming role", async () => {
      expectValidation(await patch(owner, dev.memberId, { role: "superuser" }), "role");
      expectValidation(await patch(owner, dev.memberId, { role: "" }), "role");
      expectValidation(await patch(owner, dev.memberId, {}), "role");
      expectValidation(await patch(owner, dev.memberId, { role: 3 }), "role");
      expect(await roleOf(dev.memberId)).toBe("developer");
    });

    it("a pending invitation's role can be changed, but never to owner", async () => {
      const email = uniqueEmail("inv-role");
      const { id, token } = await inviteAndReadMail(slug, owner, email, "viewer");
      expect((await patch(admin.user, id, { role: "admin" })).status).toBe(200);
      expectValidation(await patch(owner, id, { role: "owner" }), "role");
      expect(await roleOf(id)).toBe("admin");
      const invitee = await signUp(app, email);
      expect((await accept(invitee, token)).status).toBe(200);
      expect((await list(slug, owner)).find((m: Member) => m.accountId === invitee.accountId)?.role).toBe("admin");
    });

    it("an unknown member id → 404", async () => {
      expectError(await patch(owner, "mem_00000000000000000000000000", { role: "viewer" }), 404, "NOT_FOUND");
      expectError(await patch(admin.user, "nonsense", { role: "viewer" }), 404, "NOT_FOUND");
    });

    it("an owner grants owner; with two owners one can be demoted, and then the other is the last", async () => {
      const granted = await patch(owner, dev.memberId, { role: "owner" });
      expect(granted.status, JSON.stringify(granted.body)).toBe(200);
      expect(await roleOf(dev.memberId)).toBe("owner");
      // Now an admin can touch neither owner.
      expectError(await patch(admin.user, dev.memberId, { role: "viewer" }), 403, "FORBIDDEN");
      // The second owner demotes the first.
      const demoted = await patch(dev.user, ownerMemberId, { role: "admin" });
      expect(demoted.status, JSON.stringify(demoted.body)).toBe(200);
      expect(await roleOf(ownerMemberId)).toBe("admin");
      // The remaining owner is now the last one.
      expectError(await patch(dev.user, dev.memberId, { role: "developer" }), 409, "CONFLICT");
      // Restore: the new owner makes the original owner owner again, then steps down.
      expect((await patch(dev.user, ownerMemberId, { role: "owner" })).status).toBe(200);
      expect((await patch(owner, dev.memberId, { role: "developer" })).status).toBe(200);
      expect(await roleOf(ownerMemberId)).toBe("owner");
      expect(await roleOf(dev.memberId)).toBe("developer");
      const events = await audit(slug, owner);
      expect(
        events.some(
          (e) =>
            e.action === "member.role_changed" &&
            e.target.id === dev.memberId &&
            e.data.to === "owner" &&
            e.actor.id === owner.accountId,
        ),
      ).toBe(true);
    });

    it("two owners demoting each other at the same time leave at least one owner", async () => {
      for (let round = 0; round < 3; round++) {
        const a = await newOrg(`Race Org ${round}`);
        const b = await addMember(app, mailbox, a.owner, a.slug, "admin");
        expect(
          (
            await call(app, "PATCH", `/org/${a.slug}/members/${b.memberId}`, {
              cookie: a.owner.cookie,
              body: { role: "owner" },
            })
          ).status,
        ).toBe(200);
        const results = await Promise.all([
          call(app, "PATCH", `/org/${a.slug}/members/${b.memberId}`, {
            cookie: a.owner.cookie,
            body: { role: "admin" },
          }),
          call(app, "PATCH", `/org/${a.slug}/members/${a.ownerMemberId}`, {
            cookie: b.user.cookie,
            body: { role: "admin" },
          }),
        ]);
        const owners = (
          await call(app, "GET", `/org/${a.slug}/members`, { cookie: a.owner.cookie })
        ).body.members.filter((m: Member) => m.role === "owner");
        expect(owners, `owners after the race (round ${round})`).toHaveLength(1);
        // One wins; the other is refused as the last owner (409) or, if it sees the winner's change
        // first, as a caller who is no longer an owner (403). Never both.
        const statuses = results.map((r) => r.status);
        expect(
          statuses.filter((s) => s === 200),
          JSON.stringify(results.map((r) => r.body)),
        ).toHaveLength(1);
        expect([403, 409]).toContain(statuses.find((s) => s !== 200));
      }
    });

    it("two owners leaving at the same time leave at least one owner", async () => {
      for (let round = 0; round < 3; round++) {
        const a = await newOrg(`Leave Race ${round}`);
        const b = await addMember(app, mailbox, a.owner, a.slug, "admin");
        expect(
          (
            await call(app, "PATCH", `/org/${a.slug}/members/${b.memberId}`, {
              cookie: a.owner.cookie,
              body: { role: "owner" },
            })
          ).status,
        ).toBe(200);
        const results = await Promise.all([
          call(app, "DELETE", `/org/${a.slug}/members/${b.memberId}`, { cookie: b.user.cookie }),
          call(app, "DELETE", `/org/${a.slug}/members/${a.ownerMemberId}`, { cookie: a.owner.cookie }),
        ]);
        // Both leaving would leave an org with no owner (and no members at all).
        expect(results.map((r) => r.status).sort(), `statuses of the two leaves (round ${round})`).toEqual([204, 409]);
        const stayed = results[0]?.status === 409 ? b.user : a.owner;
        const owners = (
          await call(app, "GET", `/org/${a.slug}/members`, { cookie: stayed.cookie })
        ).body.members.filter((m: Member) => m.role === "owner");
        expect(owners).toHaveLength(1);
      }
    });

    it("a role change takes effect on the member's very next request, with the same session", async () => {
      const member = await addMember(app, mailbox, owner, slug, "developer");
      const cookie = member.user.cookie;
      const overview = () => call(app, "GET", `/org/${slug}/overview`, { cookie });
      const auditRead = () => call(app, "GET", `/org/${slug}/audit`, { cookie });
      expect((await overview()).body.role).toBe("developer");
      expectError(await auditRead(), 403, "FORBIDDEN");

      expect((await patch(owner, member.memberId, { role: "admin" })).status).toBe(200);
      expect((await overview()).body.role).toBe("admin");
      expect((await auditRead()).status).toBe(200);

      expect((await patch(owner, member.memberId, { role: "viewer" })).status).toBe(200);
      expect((await overview()).body.role).toBe("viewer");
      expectError(await auditRead(), 403, "FORBIDDEN");
    });
  });

  // ---- removal ----

  describe("removal", () => {
    let owner: TestUser;
    let slug: string;
    let ownerMemberId: string;
    let admin: { user: TestUser; memberId: string };

    beforeAll(async () => {
      ({ owner, slug, ownerMemberId } = await newOrg("Removal Org"));
      admin = await addMember(app, mailbox, owner, slug, "admin");
    });

    function del(who: { cookie?: string; token?: string }, id: string) {
      return call(app, "DELETE", `/org/${slug}/members/${id}`, as(who));
    }

    it("an admin removes a developer: 204, gone from the list, their session loses the org", async () => {
      const dev = await addMember(app, mailbox, owner, slug, "developer");
      expect((await list(slug, dev.user)).length).toBeGreaterThan(0);
      expectNoContent(await del(admin.user, dev.memberId));
      expect((await list(slug, owner)).some((m: Member) => m.id === dev.memberId)).toBe(false);
      expectError(await call(app, "GET", `/org/${slug}/members`, { cookie: dev.user.cookie }), 404, "NOT_FOUND");
      expectError(await call(app, "GET", `/org/${slug}/overview`, { cookie: dev.user.cookie }), 404, "NOT_FOUND");
      expect((await call(app, "GET", "/orgs", { cookie: dev.user.cookie })).body.orgs).toEqual([]);
      // The removed member's id is gone.
      expectError(await del(admin.user, dev.memberId), 404, "NOT_FOUND");
      expectError(
        await call(app, "PATCH", `/org/${slug}/members/${dev.memberId}`, {
          cookie: admin.user.cookie,
          body: { role: "viewer" },
        }),
        404,
        "NOT_FOUND",
      );
      const events = await audit(slug, owner);
      const removed = events.find((e) => e.action === "member.removed" && e.target.id === dev.memberId);
      expect(removed).toBeDefined();
      expect(removed.actor).toMatchObject({ type: "account", id: admin.user.accountId });
      expect(removed.data).toMatchObject({ accountId: dev.user.accountId });
    });

    it("a viewer removing someone else → 403", async () => {
      const viewer = await addMember(app, mailbox, owner, slug, "viewer");
      const other = await addMember(app, mailbox, owner, slug, "developer");
      expectError(await del(viewer.user, other.memberId), 403, "FORBIDDEN");
      expectError(await del(viewer.user, admin.memberId), 403, "FORBIDDEN");
      expectError(await del(viewer.user, ownerMemberId), 403, "FORBIDDEN");
      const ids = (await list(slug, owner)).map((m: Member) => m.id);
      expect(ids).toEqual(expect.arrayContaining([other.memberId, admin.memberId, ownerMemberId, viewer.memberId]));
    });

    it("any member may leave, even a viewer", async () => {
      const left: { user: TestUser; memberId: string }[] = [];
      for (const role of ["viewer", "developer", "admin"] as const) {
        const m = await addMember(app, mailbox, owner, slug, role);
        expectNoContent(await del(m.user, m.memberId));
        expect((await list(slug, owner)).some((x: Member) => x.id === m.memberId)).toBe(false);
        expectError(await call(app, "GET", `/org/${slug}/members`, { cookie: m.user.cookie }), 404, "NOT_FOUND");
        left.push(m);
      }
      // Each departure is audited, with the member who left as actor.
      const events = await audit(slug, owner);
      for (const m of left) {
        const row = events.find(
          (e) => e.target.id === m.memberId && e.action.startsWith("member.") && e.action !== "member.joined",
        );
        expect(row, `audit row for ${m.memberId}`).toBeDefined();
        expect(["member.left", "member.removed"]).toContain(row.action);
        expect(row.actor).toMatchObject({ type: "account", id: m.user.accountId });
      }
    });

    it("an admin cannot remove an owner → 403; an owner can remove an admin", async () => {
      expectError(await del(admin.user, ownerMemberId), 403, "FORBIDDEN");
      const other = await addMember(app, mailbox, owner, slug, "admin");
      expectNoContent(await del(owner, other.memberId));
      expect((await list(slug, owner)).some((m: Member) => m.id === other.memberId)).toBe(false);
    });

    it("with two owners, an owner may leave and another owner may be removed by an owner", async () => {
      const second = await addMember(app, mailbox, owner, slug, "admin");
      expect(
        (
          await call(app, "PATCH", `/org/${slug}/members/${second.memberId}`, {
            cookie: owner.cookie,
            body: { role: "owner" },
          })
        ).status,
      ).toBe(200);
      // An admin cannot remove the second owner either.
      expectError(await del(admin.user, second.memberId), 403, "FORBIDDEN");
      expectNoContent(await del(second.user, second.memberId));
      // The original owner is the last one again.
      expectError(await del(owner, ownerMemberId), 409, "CONFLICT");

      const third = await addMember(app, mailbox, owner, slug, "developer");
      expect(
        (
          await call(app, "PATCH", `/org/${slug}/members/${third.memberId}`, {
            cookie: owner.cookie,
            body: { role: "owner" },
          })
        ).status,
      ).toBe(200);
      expectNoContent(await del(owner, third.memberId));
      const owners = (await list(slug, owner)).filter((m: Member) => m.role === "owner");
      expect(owners.map((m: Member) => m.id)).toEqual([ownerMemberId]);
    });
  });

  // ---- role matrix ----

  describe("role matrix", () => {
    let slug: string;
    let owner: TestUser;
    let ownerMemberId: string;
    const principals: Partial<Record<Who, { cookie?: string; token?: string }>> = {};
    /** A developer whose role the matrix flips and who must survive every refused removal. */
    let target: { user: TestUser; memberId: string };
    /** A pending invitation that every refused resend/revoke must leave alone. */
    let pendingInvite: { id: string; token: string; email: string };

    beforeAll(async () => {
      ({ owner, slug, ownerMemberId } = await newOrg("Matrix Org"));
      principals.owner = { cookie: owner.cookie };
      for (const role of ["admin", "developer", "viewer"] as const) {
        principals[role] = { cookie: (await addMember(app, mailbox, owner, slug, role)).user.cookie };
      }
      for (const scope of ["full", "deploy", "read-only"] as const) {
        principals[scope] = { token: (await createApiKey(app, owner, slug, scope)).token };
      }
      target = await addMember(app, mailbox, owner, slug, "developer");
      const email = uniqueEmail("matrix-pending");
      const inv = await inviteAndReadMail(slug, owner, email, "viewer");
      pendingInvite = { id: inv.id, token: inv.token, email };
    });

    function who(w: Who) {
      return w === "none" ? {} : as(principals[w]);
    }

    const ADMIN_ONLY: Record<Who, number> = {
      owner: 200,
      admin: 200,
      full: 200,
      developer: 403,
      viewer: 403,
      deploy: 403,
      "read-only": 403,
      none: 401,
    };
    const OWNER_ONLY: Record<Who, number> = {
      owner: 200,
      admin: 403,
      full: 403,
      developer: 403,
      viewer: 403,
      deploy: 403,
      "read-only": 403,
      none: 401,
    };

    it.each(EVERYONE)("GET members as %s", async (w) => {
      const res = await call(app, "GET", `/org/${slug}/members`, who(w));
      if (w === "none") {
        expectError(res, 401, "UNAUTHORIZED");
        return;
      }
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const members: Member[] = res.body.members;
      expect(members.some((m) => m.id === ownerMemberId && m.role === "owner")).toBe(true);
      expect(members.some((m) => m.id === pendingInvite.id && m.status === "invited")).toBe(true);
    });

    it("a revoked API key → 401 on every members endpoint", async () => {
      const key = await createApiKey(app, owner, slug, "full");
      const revoke = await call(app, "DELETE", `/org/${slug}/api-keys/${key.id}`, { cookie: owner.cookie });
      expect(revoke.status).toBeLessThan(300);
      const opts = { token: key.token };
      expectError(await call(app, "GET", `/org/${slug}/members`, opts), 401, "UNAUTHORIZED");
      expectError(
        await call(app, "POST", `/org/${slug}/invitations`, {
          ...opts,
          body: { email: uniqueEmail(), role: "viewer" },
        }),
        401,
        "UNAUTHORIZED",
      );
      expectError(
        await call(app, "PATCH", `/org/${slug}/members/${target.memberId}`, { ...opts, body: { role: "viewer" } }),
        401,
        "UNAUTHORIZED",
      );
      expectError(await call(app, "DELETE", `/org/${slug}/members/${target.memberId}`, opts), 401, "UNAUTHORIZED");
      expectError(
        await call(app, "POST", `/org/${slug}/members/${pendingInvite.id}/resend`, opts),
        401,
        "UNAUTHORIZED",
      );
    });

    it.each(EVERYONE)("POST invitations as %s", async (w) => {
      const email = uniqueEmail(`matrix-${w}`);
      const since = mailbox.messages.length;
      const res = await invite(slug, who(w), { email, role: "viewer" });
      const expected = ADMIN_ONLY[w] === 200 ? 201 : ADMIN_ONLY[w];
      if (expected === 201) {
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        expect(res.body.invite).toMatchObject({ email, role: "viewer" });
        tokensSeen.push(invitationToken(await mailbox.waitFor(email, since)));
      } else {
        expectError(res, expected, expected === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
        expect((await list(slug, owner)).some((m: Member) => m.email === email)).toBe(false);
      }
    });

    it.each(EVERYONE)("PATCH a non-owner's role as %s", async (w) => {
      const before: Role = (await list(slug, owner)).find((m: Member) => m.id === target.memberId).role;
      const next: Role = before === "developer" ? "viewer" : "developer";
      const res = await call(app, "PATCH", `/org/${slug}/members/${target.memberId}`, {
        ...who(w),
        body: { role: next },
      });
      const after: Role = (await list(slug, owner)).find((m: Member) => m.id === target.memberId).role;
      if (ADMIN_ONLY[w] === 200) {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(after).toBe(next);
      } else {
        expectError(res, ADMIN_ONLY[w], ADMIN_ONLY[w] === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
        expect(after).toBe(before);
      }
    });

    it.each(EVERYONE)("PATCH granting owner as %s", async (w) => {
      const res = await call(app, "PATCH", `/org/${slug}/members/${target.memberId}`, {
        ...who(w),
        body: { role: "owner" },
      });
      const after: Role = (await list(slug, owner)).find((m: Member) => m.id === target.memberId).role;
      if (OWNER_ONLY[w] === 200) {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(after).toBe("owner");
        // Put it back (two owners: allowed).
        const back = await call(app, "PATCH", `/org/${slug}/members/${target.memberId}`, {
          cookie: owner.cookie,
          body: { role: "developer" },
        });
        expect(back.status).toBe(200);
      } else {
        expectError(res, OWNER_ONLY[w], OWNER_ONLY[w] === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
        expect(after).not.toBe("owner");
      }
    });

    it.each(EVERYONE.filter((w) => w !== "owner"))("PATCH demoting the owner as %s", async (w) => {
      const res = await call(app, "PATCH", `/org/${slug}/members/${ownerMemberId}`, {
        ...who(w),
        body: { role: "admin" },
      });
      expectError(res, OWNER_ONLY[w], OWNER_ONLY[w] === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
      expect((await list(slug, owner)).find((m: Member) => m.id === ownerMemberId).role).toBe("owner");
    });

    it.each(EVERYONE)("POST resend as %s", async (w) => {
      const since = mailbox.messages.length;
      const res = await call(app, "POST", `/org/${slug}/members/${pendingInvite.id}/resend`, who(w));
      if (ADMIN_ONLY[w] === 200) {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        const token = invitationToken(await mailbox.waitFor(pendingInvite.email, since));
        tokensSeen.push(token);
        expect(token).not.toBe(pendingInvite.token);
        pendingInvite.token = token;
      } else {
        expectError(res, ADMIN_ONLY[w], ADMIN_ONLY[w] === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
      }
    });

    it.each(EVERYONE)("DELETE a member as %s", async (w) => {
      if (ADMIN_ONLY[w] === 200) {
        const victim = await addMember(app, mailbox, owner, slug, "viewer");
        expectNoContent(await call(app, "DELETE", `/org/${slug}/members/${victim.memberId}`, who(w)));
        expect((await list(slug, owner)).some((m: Member) => m.id === victim.memberId)).toBe(false);
      } else {
        const res = await call(app, "DELETE", `/org/${slug}/members/${target.memberId}`, who(w));
        expectError(res, ADMIN_ONLY[w], ADMIN_ONLY[w] === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
        expect((await list(slug, owner)).some((m: Member) => m.id === target.memberId)).toBe(true);
      }
    });

    it.each(EVERYONE.filter((w) => w !== "owner"))("DELETE the owner as %s", async (w) => {
      const res = await call(app, "DELETE", `/org/${slug}/members/${ownerMemberId}`, who(w));
      expectError(res, OWNER_ONLY[w], OWNER_ONLY[w] === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
      expect((await list(slug, owner)).some((m: Member) => m.id === ownerMemberId)).toBe(true);
    });

    it.each(EVERYONE)("DELETE (revoke) a pending invitation as %s", async (w) => {
      if (ADMIN_ONLY[w] === 200) {
        const inv = await inviteAndReadMail(slug, owner, uniqueEmail("revoke-me"), "developer");
        expectNoContent(await call(app, "DELETE", `/org/${slug}/members/${inv.id}`, who(w)));
        expect((await list(slug, owner)).some((m: Member) => m.id === inv.id)).toBe(false);
      } else {
        const res = await call(app, "DELETE", `/org/${slug}/members/${pendingInvite.id}`, who(w));
        expectError(res, ADMIN_ONLY[w], ADMIN_ONLY[w] === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
        expect((await list(slug, owner)).some((m: Member) => m.id === pendingInvite.id)).toBe(true);
      }
    });

    it("the pending invitation survived every refused call and its newest token still works", async () => {
      const invitee = await signUp(app, pendingInvite.email);
      const res = await accept(invitee, pendingInvite.token);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect((await list(slug, owner)).find((m: Member) => m.accountId === invitee.accountId)?.role).toBe("viewer");
    });
  });

  // ---- cross-org isolation ----

  describe("cross-org isolation", () => {
    let a: { owner: TestUser; slug: string; ownerMemberId: string };
    let b: { owner: TestUser; slug: string; ownerMemberId: string };
    let adminA: TestUser;
    let memberB: { user: TestUser; memberId: string };
    let inviteB: { id: string; token: string };

    beforeAll(async () => {
      a = await newOrg("Org A");
      b = await newOrg("Org B");
      adminA = (await addMember(app, mailbox, a.owner, a.slug, "admin")).user;
      memberB = await addMember(app, mailbox, b.owner, b.slug, "developer");
      inviteB = await inviteAndReadMail(b.slug, b.owner, uniqueEmail("b-pending"), "viewer");
    });

    it("an admin of A managing B's member and invitation ids through A's slug → 404", async () => {
      for (const id of [memberB.memberId, b.ownerMemberId, inviteB.id]) {
        expectError(
          await call(app, "PATCH", `/org/${a.slug}/members/${id}`, { cookie: adminA.cookie, body: { role: "viewer" } }),
          404,
          "NOT_FOUND",
        );
        expectError(
          await call(app, "DELETE", `/org/${a.slug}/members/${id}`, { cookie: adminA.cookie }),
          404,
          "NOT_FOUND",
        );
      }
      expectError(
        await call(app, "POST", `/org/${a.slug}/members/${inviteB.id}/resend`, { cookie: adminA.cookie }),
        404,
        "NOT_FOUND",
      );
      // A's owner too.
      expectError(
        await call(app, "DELETE", `/org/${a.slug}/members/${memberB.memberId}`, { cookie: a.owner.cookie }),
        404,
        "NOT_FOUND",
      );
    });

    it("an admin of A using B's slug → 404 on every members endpoint", async () => {
      const opts = { cookie: adminA.cookie };
      expectError(await call(app, "GET", `/org/${b.slug}/members`, opts), 404, "NOT_FOUND");
      expectError(
        await call(app, "PATCH", `/org/${b.slug}/members/${memberB.memberId}`, { ...opts, body: { role: "viewer" } }),
        404,
        "NOT_FOUND",
      );
      expectError(await call(app, "DELETE", `/org/${b.slug}/members/${memberB.memberId}`, opts), 404, "NOT_FOUND");
      expectError(await call(app, "DELETE", `/org/${b.slug}/members/${inviteB.id}`, opts), 404, "NOT_FOUND");
      expectError(await call(app, "POST", `/org/${b.slug}/members/${inviteB.id}/resend`, opts), 404, "NOT_FOUND");
      expectError(
        await call(app, "POST", `/org/${b.slug}/invitations`, {
          ...opts,
          body: { email: uniqueEmail(), role: "admin" },
        }),
        404,
        "NOT_FOUND",
      );
    });

    it("a full key of A on B → 404", async () => {
      const key = await createApiKey(app, a.owner, a.slug, "full");
      const opts = { token: key.token };
      expectError(await call(app, "GET", `/org/${b.slug}/members`, opts), 404, "NOT_FOUND");
      expectError(
        await call(app, "PATCH", `/org/${b.slug}/members/${memberB.memberId}`, { ...opts, body: { role: "viewer" } }),
        404,
        "NOT_FOUND",
      );
      expectError(await call(app, "DELETE", `/org/${b.slug}/members/${memberB.memberId}`, opts), 404, "NOT_FOUND");
      expectError(await call(app, "POST", `/org/${b.slug}/members/${inviteB.id}/resend`, opts), 404, "NOT_FOUND");
      expectError(
        await call(app, "POST", `/org/${b.slug}/invitations`, {
          ...opts,
          body: { email: uniqueEmail(), role: "admin" },
        }),
        404,
        "NOT_FOUND",
      );
      // And A's slug with B's ids.
      expectError(await call(app, "DELETE", `/org/${a.slug}/members/${memberB.memberId}`, opts), 404, "NOT_FOUND");
    });

    it("B is untouched", async () => {
      const members = await list(b.slug, b.owner);
      expect(members.find((m: Member) => m.id === memberB.memberId)).toMatchObject({
        role: "developer",
        status: "active",
      });
      expect(members.find((m: Member) => m.id === inviteB.id)).toMatchObject({ role: "viewer", status: "invited" });
      // B's invitation token still works for its invitee.
      const invitee = await signUp(app, members.find((m: Member) => m.id === inviteB.id).email);
      expect((await accept(invitee, inviteB.token)).body).toEqual({ orgSlug: b.slug });
    });
  });

  // ---- audit: every member action, never a token ----

  describe("audit trail", () => {
    it("records invited, joined, role_changed and removed, and never an invitation token", async () => {
      const { owner, slug } = await newOrg("Audit Org");
      const { user, memberId } = await addMember(app, mailbox, owner, slug, "developer");
      expect(
        (
          await call(app, "PATCH", `/org/${slug}/members/${memberId}`, {
            cookie: owner.cookie,
            body: { role: "admin" },
          })
        ).status,
      ).toBe(200);
      expectNoContent(await call(app, "DELETE", `/org/${slug}/members/${memberId}`, { cookie: owner.cookie }));
      const events = await audit(slug, owner);
      const actions = events.map((e) => e.action);
      for (const action of ["member.invited", "member.joined", "member.role_changed", "member.removed"]) {
        expect(actions).toContain(action);
      }
      expect(events.find((e) => e.action === "member.role_changed")?.data).toMatchObject({
        from: "developer",
        to: "admin",
      });
      expect(events.find((e) => e.action === "member.joined")?.actor.id).toBe(user.accountId);
      // Filter by action prefix works for member events.
      const filtered = await call(app, "GET", `/org/${slug}/audit?action=member.*`, { cookie: owner.cookie });
      expect(filtered.status).toBe(200);
      expect(filtered.body.events.length).toBeGreaterThanOrEqual(4);
      expect(filtered.body.events.every((e: { action: string }) => e.action.startsWith("member."))).toBe(true);
    });

    it("no audit row of any org in this run contains an invitation token", async () => {
      expect(tokensSeen.length).toBeGreaterThan(10);
      for (const { slug, owner } of orgsSeen) {
        const res = await call(app, "GET", `/org/${slug}/audit?limit=500`, { cookie: owner.cookie });
        if (res.status !== 200) continue; // deleted orgs, or orgs whose original owner stepped down
        const text = JSON.stringify(res.body.events);
        for (const token of tokensSeen) expect(text).not.toContain(token);
      }
    });
  });
});

// ---- expiry, on its own app because it moves the clock ----

describe("invitation expiry", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  beforeAll(async () => {
    ({ app, mailbox } = await startAppWithMailbox());
  });
  afterAll(async () => {
    await app?.close();
    await mailbox?.close();
  });

  async function inviteAndRead(slug: string, owner: TestUser, email: string) {
    const since = mailbox.messages.length;
    const res = await call(app, "POST", `/org/${slug}/invitations`, {
      cookie: owner.cookie,
      body: { email, role: "developer" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return { id: res.body.invite.id as string, token: invitationToken(await mailbox.waitFor(email, since)) };
  }

  it("is valid for 7 days; after 8 days accept → 409, resend and re-invite give working tokens", async () => {
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Expiry Org");
    const early = uniqueEmail("early");
    const late = uniqueEmail("late");
    const reinvited = uniqueEmail("reinvited");
    const inviteEarly = await inviteAndRead(slug, owner, early);
    const inviteLate = await inviteAndRead(slug, owner, late);
    const inviteAgain = await inviteAndRead(slug, owner, reinvited);
    const earlyUser = await signUp(app, early);
    const lateUser = await signUp(app, late);
    const againUser = await signUp(app, reinvited);

    app.clock.advance(6 * DAY_MS);
    expect(
      (await call(app, "POST", "/invitations/accept", { cookie: earlyUser.cookie, body: { token: inviteEarly.token } }))
        .status,
    ).toBe(200);

    app.clock.advance(2 * DAY_MS);
    const expired = await call(app, "POST", "/invitations/accept", {
      cookie: lateUser.cookie,
      body: { token: inviteLate.token },
    });
    expectError(expired, 409, "CONFLICT");
    const listed = (await call(app, "GET", `/org/${slug}/members`, { cookie: owner.cookie })).body.members;
    expect(listed.find((m: Member) => m.id === inviteLate.id)?.status).toBe("expired");
    expect(listed.some((m: Member) => m.accountId === lateUser.accountId)).toBe(false);

    // Resend revives it with a new token and a new expiry.
    const since = mailbox.messages.length;
    expect(
      (await call(app, "POST", `/org/${slug}/members/${inviteLate.id}/resend`, { cookie: owner.cookie })).status,
    ).toBe(200);
    const fresh = invitationToken(await mailbox.waitFor(late, since));
    expect(fresh).not.toBe(inviteLate.token);
    expectError(
      await call(app, "POST", "/invitations/accept", { cookie: lateUser.cookie, body: { token: inviteLate.token } }),
      404,
      "NOT_FOUND",
    );
    expect(
      (await call(app, "POST", "/invitations/accept", { cookie: lateUser.cookie, body: { token: fresh } })).status,
    ).toBe(200);

    // An expired invitation does not block a new one for the same address; the old token is dead.
    const second = await inviteAndRead(slug, owner, reinvited);
    expect(second.id).not.toBe(inviteAgain.id);
    expectError(
      await call(app, "POST", "/invitations/accept", { cookie: againUser.cookie, body: { token: inviteAgain.token } }),
      404,
      "NOT_FOUND",
    );
    expect(
      (await call(app, "POST", "/invitations/accept", { cookie: againUser.cookie, body: { token: second.token } }))
        .status,
    ).toBe(200);

    const members = (await call(app, "GET", `/org/${slug}/members`, { cookie: owner.cookie })).body.members;
    for (const user of [earlyUser, lateUser, againUser]) {
      expect(members.find((m: Member) => m.accountId === user.accountId)).toMatchObject({
        role: "developer",
        status: "active",
      });
    }
    expect(members.filter((m: Member) => m.status !== "active")).toEqual([]);
  });
});

describe("the accept-invite page the mail links to", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(() => app.close());

  // The console's screen (test/console covers accepting in a browser).
  it("is the console's, with no Referer to carry the token on, never echoing the token", async () => {
    const token = "<script>alert(1)</script>";
    const res = await fetch(`${app.url}/accept-invite?token=${encodeURIComponent(token)}`, {
      headers: { accept: "text/html" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    const html = await res.text();
    expect(html).toContain('<div id="app">');
    expect(html).not.toContain(token);
    expect(html).not.toContain("alert(1)");
  });
});
