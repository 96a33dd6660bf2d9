/**
 * Tenant errors (DESIGN §10), through the real HTTP API on SQLite and PostgreSQL: the workspace
 * API's answers of status 400 and above are recorded per project, listed newest first with their
 * filters, bounded per project and in time (those of requests without valid workspace credentials
 * apart from the others), and readable by any member of the org.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import {
  TENANT_ERRORS_PER_PROJECT,
  UNAUTHENTICATED_ERRORS_PER_PROJECT,
} from "../src/domains/tenant-errors/recorder.ts";
import { pruneTenantErrors } from "../src/domains/tenant-errors/service.ts";
import { newId } from "../src/lib/ids.ts";
import {
  addMember,
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  expectError,
  expectValidation,
  inParallel,
  type Mailbox,
  signUp,
  sleep,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

type TenantError = {
  id: string;
  at: string;
  method: string;
  path: string;
  status: number;
  code: string;
  message: string;
  requestId: string | null;
  authenticated: boolean;
};

describe("tenant errors", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let owner: TestUser;
  let slug: string;
  let project: { id: string; slug: string; adminToken: string };

  const errorsPath = (query = "") => `/org/${slug}/projects/${project.slug}/errors${query}`;
  const list = async (query = "", who: { cookie?: string; token?: string } = { cookie: owner.cookie }) => {
    const res = await call(app, "GET", errorsPath(query), who);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.errors as TenantError[];
  };

  beforeAll(async () => {
    mailbox = await startMailbox();
    app = await startApp({ SMTP_URL: mailbox.url, RATE_LIMIT_PER_MINUTE: "100000" });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Errors Org")).slug;
    project = await createActiveProject(app, owner, slug, "Erring");
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await mailbox?.close();
  });

  it("records the workspace's 401, 404 and 422 answers, newest first, and nothing for successes", async () => {
    const admin = { token: project.adminToken };
    expect(
      (await callWorkspace(app, project.id, "POST", "/collections", { ...admin, body: { slug: "posts" } })).status,
    ).toBe(201);
    expect((await callWorkspace(app, project.id, "GET", "/items/posts", admin)).status).toBe(200);
    const unauthorized = await callWorkspace(app, project.id, "GET", "/items/posts", { token: "wsa_wrong" });
    expect(unauthorized.status).toBe(401);
    const missing = await callWorkspace(app, project.id, "GET", "/items/posts/itm_nope?x=secret", admin);
    expect(missing.status).toBe(404);
    const invalid = await callWorkspace(app, project.id, "POST", "/collections", { ...admin, body: { slug: "" } });
    expect(invalid.status).toBe(422);
    // A made-up project records nothing anywhere.
    expect((await callWorkspace(app, "prj_00000000000000000000000000", "GET", "/items/posts", admin)).status).toBe(404);

    const errors = await until("three errors recorded", async () => {
      const found = await list();
      return found.length >= 3 ? found : undefined;
    });
    expect(errors).toHaveLength(3);
    expect(errors.map((e) => e.status)).toEqual([422, 404, 401]);
    const [validation, notFound, refused] = errors as [TenantError, TenantError, TenantError];
    expect(notFound).toMatchObject({
      method: "GET",
      path: `/w/${project.id}/api/items/posts/itm_nope`,
      status: 404,
      code: "NOT_FOUND",
      requestId: missing.body.error.requestId,
      authenticated: true,
    });
    expect(notFound.message).toBeTruthy();
    expect(validation).toMatchObject({ method: "POST", status: 422, code: "VALIDATION", authenticated: true });
    // A bad token: recorded, flagged as a request without valid workspace credentials.
    expect(refused).toMatchObject({
      status: 401,
      code: "UNAUTHORIZED",
      requestId: unauthorized.body.error.requestId,
      authenticated: false,
    });
    expect(Date.parse(notFound.at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it("filters by status and since, and pages", async () => {
    expect((await list("?status=4xx")).length).toBe(3);
    expect((await list("?status=404")).map((e) => e.status)).toEqual([404]);
    expect(await list("?status=5xx")).toEqual([]);
    expect(await list(`?since=${Date.now() + 60_000}`)).toEqual([]);
    expect((await list(`?since=${new Date(Date.now() - 60_000).toISOString()}`)).length).toBe(3);
    expect((await list("?authenticated=true")).map((e) => e.status)).toEqual([422, 404]);
    expect((await list("?authenticated=false")).map((e) => e.status)).toEqual([401]);
    const [first, second] = [await list("?limit=1"), await list("?limit=1&offset=1")];
    expect(first).toHaveLength(1);
    expect(second[0]?.id).not.toBe(first[0]?.id);
    for (const status of ["4XY", "99", "abc", "6xx"]) {
      expectValidation(await call(app, "GET", errorsPath(`?status=${status}`), { cookie: owner.cookie }), "status");
    }
    expectValidation(await call(app, "GET", errorsPath("?since=yesterday"), { cookie: owner.cookie }), "since");
    expectValidation(
      await call(app, "GET", errorsPath("?authenticated=yes"), { cookie: owner.cookie }),
      "authenticated",
    );
    expectValidation(await call(app, "GET", errorsPath("?limit=501"), { cookie: owner.cookie }), "limit");
  });

  it("keeps the newest 10,000 per project, and 7 days", async () => {
    const { deps } = app.server;
    // 10,000 older errors already recorded.
    const old = new Date(Date.now() - 60 * 60_000);
    const rows = Array.from({ length: TENANT_ERRORS_PER_PROJECT }, () => ({
      id: newId("ter", old),
      project_id: project.id,
      at: old.toISOString(),
      method: "GET",
      path: "/w/old",
      status: 404,
      code: "NOT_FOUND",
      message: "old",
      request_id: null,
    }));
    for (let i = 0; i < rows.length; i += 500)
      await deps.db
        .insertInto("tenant_errors")
        .values(rows.slice(i, i + 500))
        .execute();
    /** The project's rows; of requests with (1) or without (0) valid workspace credentials only. */
    const count = async (authenticated?: 0 | 1) => {
      let query = deps.db
        .selectFrom("tenant_errors")
        .select((eb) => eb.fn.countAll().as("n"))
        .where("project_id", "=", project.id);
      if (authenticated !== undefined) query = query.where("authenticated", "=", authenticated);
      return Number((await query.executeTakeFirstOrThrow()).n);
    };
    expect(await count()).toBe(TENANT_ERRORS_PER_PROJECT + 3);
    expect(
      (await callWorkspace(app, project.id, "GET", "/items/nowhere/itm_x", { token: project.adminToken })).status,
    ).toBe(404);
    await until("the newest kept", async () => (await count(1)) === TENANT_ERRORS_PER_PROJECT || undefined);
    // The unauthenticated 401 of the first test is not theirs to push out: it has its own budget.
    expect(await count(0)).toBe(1);
    expect((await list("?limit=1"))[0]?.path).toBe(`/w/${project.id}/api/items/nowhere/itm_x`);

    app.clock.advance(8 * DAY_MS);
    try {
      await pruneTenantErrors(deps);
    } finally {
      app.clock.advance(-8 * DAY_MS);
    }
    expect(await count()).toBe(0);
  });

  it("keeps errors of requests without valid credentials apart: flagged, the newest 20, never crowding out the others (#12)", async () => {
    const flooded = await createActiveProject(app, owner, slug, "Flooded");
    const admin = { token: flooded.adminToken };
    const listed = async (query = "") => {
      const res = await call(app, "GET", `/org/${slug}/projects/${flooded.slug}/errors${query}`, {
        cookie: owner.cookie,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.errors as TenantError[];
    };
    const invalid = await callWorkspace(app, flooded.id, "POST", "/collections", { ...admin, body: { slug: "" } });
    expect(invalid.status).toBe(422);
    const validationId = invalid.body.error.requestId as string;
    await until("the 422 recorded", async () => (await listed()).some((e) => e.requestId === validationId));

    // 300 requests of someone who knows the project's id and nothing else: no token, made-up
    // tokens of every kind, failed sign-ins, each at a path of their choosing; the project's own
    // admin errs meanwhile too.
    const ours: string[] = [];
    await inParallel(
      Array.from({ length: 300 }, (_, i) => i),
      async (i) => {
        const path = `/items/flood-${i}/itm_${i}`;
        const res =
          i % 50 === 49
            ? await callWorkspace(app, flooded.id, "POST", "/auth/sign-in", {
                body: { email: `nobody-${i}@example.com`, password: "not the password" },
              })
            : i % 3 === 0
              ? await callWorkspace(app, flooded.id, "GET", path)
              : await callWorkspace(app, flooded.id, "DELETE", path, {
                  token: i % 3 === 1 ? `wsa_${i.toString(16).padStart(64, "0")}` : `made-up-${i}`,
                });
        expect(res.status, JSON.stringify(res.body)).toBe(401);
        if (i % 60 === 0) {
          const mine = await callWorkspace(app, flooded.id, "GET", `/items/mine/itm_${i}`, admin);
          expect(mine.status).toBe(404);
          ours.push(mine.body.error.requestId);
        }
      },
    );
    expect(ours).toHaveLength(5);
    // One more, in a second of its own: the newest unauthenticated error is recorded.
    await sleep(1_100);
    const last = await callWorkspace(app, flooded.id, "GET", "/items/flood-last/itm_x");
    expect(last.status).toBe(401);
    const lastId = last.body.error.requestId as string;
    const unauthenticated = await until("the flood written and trimmed", async () => {
      const found = await listed("?authenticated=false&limit=500");
      return found.some((e) => e.requestId === lastId) && found.length <= UNAUTHENTICATED_ERRORS_PER_PROJECT
        ? found
        : undefined;
    });

    // Still visible, flagged, the newest first.
    expect(unauthenticated[0]).toMatchObject({
      requestId: lastId,
      path: `/w/${flooded.id}/api/items/flood-last/itm_x`,
      status: 401,
      code: "UNAUTHORIZED",
      authenticated: false,
    });
    for (const error of unauthenticated) {
      expect(error).toMatchObject({ status: 401, authenticated: false });
      expect(error.path).toMatch(new RegExp(`^/w/${flooded.id}/api/(items/flood-|auth/sign-in)`));
    }
    // Every one of the project's own errors, made during the flood or before it, is kept.
    const authenticated = await listed("?authenticated=true");
    expect(authenticated.map((e) => e.requestId).sort()).toEqual([...ours, validationId].sort());
    for (const error of authenticated) expect(error.authenticated).toBe(true);
    // And the default page shows them all, beside at most 20 of the flood.
    const page = await listed();
    expect(page.map((e) => e.requestId)).toEqual(expect.arrayContaining([...ours, validationId]));
    expect(page.find((e) => e.requestId === validationId)).toMatchObject({ status: 422, authenticated: true });
    const flagged = page.filter((e) => !e.authenticated);
    expect(flagged.length).toBeGreaterThan(0);
    expect(flagged.length).toBeLessThanOrEqual(UNAUTHENTICATED_ERRORS_PER_PROJECT);
    expect(page).toHaveLength(authenticated.length + unauthenticated.length);
  });

  it("is for every member; other orgs and anonymous callers are refused", async () => {
    const viewer = await addMember(app, mailbox, owner, slug, "viewer");
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    await list("", { cookie: viewer.user.cookie });
    await list("", { token: readOnly.token });
    const outsider = await signUp(app);
    const theirs = await createOrg(app, outsider, "Elsewhere");
    const theirKey = await createApiKey(app, outsider, theirs.slug, "full");
    expectError(await call(app, "GET", errorsPath(), { cookie: outsider.cookie }), 404, "NOT_FOUND");
    expectError(await call(app, "GET", errorsPath(), { token: theirKey.token }), 404, "NOT_FOUND");
    expectError(await call(app, "GET", errorsPath(), {}), 401, "UNAUTHORIZED");
    expectError(
      await call(app, "GET", `/org/${slug}/projects/nope/errors`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
  });
});
