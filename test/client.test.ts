import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_TYPES, clientTypes } from "../scripts/client-types.ts";
import { createPlinthClient, createWorkspaceClient } from "../src/client/index.ts";
import { call, createActiveProject, createApiKey, ownerWithOrg, startApp, type TestApp } from "./harness.ts";

/**
 * The SDK (`plinth/client`, DESIGN §14): its committed types are what the app's documents
 * generate now; its clients talk to a real server, typed; and misuse fails to compile.
 */

const ROOT = path.resolve(import.meta.dirname, "..");

describe("the SDK", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ RATE_LIMIT_PER_MINUTE: "100000" });
  });
  afterAll(() => app.close());

  it("has the types the app's two documents generate now (run `npm run generate` after changing a route)", async () => {
    for (const [name, served] of [
      ["control", "/openapi.json"],
      ["workspace", "/workspace/openapi.json"],
    ] as const) {
      const document = (await call(app, "GET", served)).body;
      const committed = readFileSync(path.join(ROOT, CLIENT_TYPES[name]), "utf8");
      expect(committed, `${CLIENT_TYPES[name]} is stale: run npm run generate`).toBe(
        await clientTypes(document, `GET /api${served}`),
      );
    }
  });

  it("calls the control and workspace APIs, with answers and errors as typed", async () => {
    const { owner, slug } = await ownerWithOrg(app, "SDK Org");
    const key = await createApiKey(app, owner, slug, "full");
    const plinth = createPlinthClient({ url: app.url, apiKey: key.token });

    const created = await plinth.POST("/org/{slug}/projects", {
      params: { path: { slug } },
      body: { name: "SDK Shop" },
    });
    expect(created.response.status).toBe(201);
    expect(created.data?.project).toMatchObject({ slug: "sdk-shop", status: "provisioning" });
    expect(created.data?.adminToken).toMatch(/^wsa_/);
    const listed = await plinth.GET("/org/{slug}/projects", { params: { path: { slug } } });
    expect(listed.data?.projects.map((project) => project.slug)).toContain("sdk-shop");

    const missing = await plinth.GET("/org/{slug}/projects/{projectSlug}", {
      params: { path: { slug, projectSlug: "nope" } },
    });
    expect(missing.response.status).toBe(404);
    expect(missing.data).toBeUndefined();
    expect(missing.error?.error.code).toBe("NOT_FOUND");
    expect(missing.error?.error.requestId).toBe(missing.response.headers.get("x-request-id"));

    const anonymous = createPlinthClient({ url: `${app.url}/` });
    expect((await anonymous.GET("/orgs")).error?.error.code).toBe("UNAUTHORIZED");
    expect((await anonymous.GET("/plans")).data?.plans.length).toBeGreaterThan(0);

    const project = await createActiveProject(app, owner, slug, "SDK Workspace");
    const workspace = createWorkspaceClient({ workspaceUrl: `${app.url}/w/${project.id}`, token: project.adminToken });
    expect((await workspace.POST("/collections", { body: { slug: "posts" } })).response.status).toBe(201);
    const item = await workspace.POST("/items/{collection}", {
      params: { path: { collection: "posts" } },
      body: { title: "Hello", tags: ["a"] },
    });
    expect(item.response.status).toBe(201);
    const id: string | undefined = item.data?.item.id;
    expect(id).toEqual(expect.any(String));
    const read = await workspace.GET("/items/{collection}/{id}", {
      params: { path: { collection: "posts", id: id as string } },
    });
    expect(read.data?.item).toMatchObject({ id, title: "Hello", tags: ["a"] });
  });

  it("refuses to compile wrong paths, path parameters, body field types, fields and codes", () => {
    const fixture = path.join(ROOT, "test/fixtures/client-misuse.ts");
    const lines = readFileSync(fixture, "utf8").split("\n");
    // Each line after a directive must fail; without the directives, exactly those lines do.
    const expected = lines.flatMap((line, i) => (line.trim().startsWith("// @ts-expect-error") ? [i] : []));
    expect(expected.length).toBeGreaterThanOrEqual(10);
    const stripped = path.join(ROOT, "test/fixtures/client-misuse.stripped.ts");
    writeFileSync(
      stripped,
      lines.map((line) => (line.trim().startsWith("// @ts-expect-error") ? "" : line)).join("\n"),
    );
    try {
      const config = ts.getParsedCommandLineOfConfigFile(
        path.join(ROOT, "tsconfig.json"),
        {},
        {
          ...ts.sys,
          onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
            throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
          },
        },
      );
      if (!config) throw new Error("tsconfig.json could not be read");
      const program = ts.createProgram([stripped], config.options);
      const failing = ts
        .getPreEmitDiagnostics(program)
        .filter((diagnostic) => diagnostic.file?.fileName === stripped && diagnostic.start !== undefined)
        .map((diagnostic) => diagnostic.file?.getLineAndCharacterOfPosition(diagnostic.start as number).line);
      // The stripped file keeps the line numbers: each directive's line is empty, its target next.
      expect([...new Set(failing)].sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(expected.map((line) => line + 1));
    } finally {
      rmSync(stripped, { force: true });
    }
  });
});
