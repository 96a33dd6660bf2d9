import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, createOrg, signUp, startApp, type TestApp } from "./harness.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startApp();
});
afterAll(() => app.close());

describe("smoke", () => {
  it("signs up, creates an org and lists it", async () => {
    const user = await signUp(app);
    const org = await createOrg(app, user, "Smoke Org");
    const res = await call(app, "GET", "/orgs", { cookie: user.cookie });
    expect(res.status).toBe(200);
    expect(res.body.orgs.map((o: { slug: string }) => o.slug)).toEqual([org.slug]);
  });
});
