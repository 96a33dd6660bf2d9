import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_CATALOG } from "../src/mcp/catalog.ts";
import {
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  expectStatus,
  type Mailbox,
  ownerWithOrg,
  type Receiver,
  signUp,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
  tag,
  until,
} from "./harness.ts";

/**
 * The MCP server (DESIGN §13) through the SDK's own client over real HTTP: what each key sees and
 * may call, that a tool answers what its REST operation answers and changes what it changes
 * (audit rows and workspace webhooks included), and every refusal.
 */

const ENV = {
  ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  WORKER_POLL_MS: "50",
  RATE_LIMIT_PER_MINUTE: "1000000",
};

/** An MCP client of the app, connected (initialized) as `token`. */
async function connect(app: TestApp, token: string): Promise<Client> {
  const client = new Client({ name: "plinth-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${app.url}/api/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

async function toolNames(client: Client): Promise<string[]> {
  return (await client.listTools()).tools.map((tool) => tool.name).sort();
}

async function callTool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** A successful tool result's structured content, after checking that its text says the same. */
function answer(result: CallToolResult): any {
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  const text = (result.content[0] as { text: string }).text;
  expect(JSON.parse(text)).toEqual(result.structuredContent);
  return result.structuredContent;
}

/** A tool error's text. */
function refusal(result: CallToolResult): string {
  expect(result.isError, JSON.stringify(result.structuredContent)).toBe(true);
  return (result.content[0] as { text: string }).text;
}

/** One raw MCP POST, for what the SDK's client would never send. */
function rawPost(app: TestApp, body: string, headers: Record<string, string> = {}) {
  return fetch(`${app.url}/api/mcp`, {
    method: "POST",
    headers: { accept: "application/json, text/event-stream", "content-type": "application/json", ...headers },
    body,
  });
}

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
});

const ALL_TOOLS = TOOL_CATALOG.map((tool) => tool.name).sort();
const READ_TOOLS = TOOL_CATALOG.filter((tool) => tool.operation.startsWith("GET "))
  .map((tool) => tool.name)
  .sort();

describe("MCP server", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;
  let project: { id: string; slug: string };
  let full: { token: string; id: string };
  let deploy: { token: string; id: string };
  let readOnly: { token: string; id: string };
  let fullClient: Client;

  beforeAll(async () => {
    mailbox = await startMailbox();
    app = await startApp({ ...ENV, SMTP_URL: mailbox.url });
    receiver = await startReceiver();
    ({ owner, slug } = await ownerWithOrg(app, "Agents"));
    project = await createActiveProject(app, owner, slug, "Base");
    full = await createApiKey(app, owner, slug, "full");
    deploy = await createApiKey(app, owner, slug, "deploy");
    readOnly = await createApiKey(app, owner, slug, "read-only");
    fullClient = await connect(app, full.token);
  });
  afterAll(async () => {
    await fullClient?.close();
    await receiver?.close();
    await app?.close();
    await mailbox?.close();
  });

  describe("the tools", () => {
    it("GET /api/mcp/tools lists every tool, to anyone, with a description and its hints", async () => {
      const res = await call(app, "GET", "/mcp/tools");
      expectStatus(res, 200);
      expect(res.body.tools.map((tool: { name: string }) => tool.name).sort()).toEqual(ALL_TOOLS);
      for (const tool of res.body.tools) {
        expect(Object.keys(tool).sort()).toEqual(["description", "destructiveHint", "name", "readOnlyHint"]);
        expect(tool.name).toMatch(/^[a-z]+(_[a-z]+)+$/);
        expect(tool.description.length).toBeGreaterThan(20);
        if (tool.readOnlyHint) expect(tool.destructiveHint).toBe(false);
      }
      const byName = new Map(res.body.tools.map((tool: { name: string }) => [tool.name, tool]));
      expect(byName.get("list_projects")).toMatchObject({ readOnlyHint: true, destructiveHint: false });
      expect(byName.get("delete_project")).toMatchObject({ readOnlyHint: false, destructiveHint: true });
      expect(byName.get("restore_project")).toMatchObject({ readOnlyHint: false, destructiveHint: true });
      expect(byName.get("create_project")).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    });

    it("has a tool for every REST operation DESIGN §13 names, and a route for every tool", async () => {
      const control = (await call(app, "GET", "/openapi.json")).body;
      const workspace = (await call(app, "GET", "/workspace/openapi.json")).body;
      const operations = (document: any) =>
        Object.entries<Record<string, unknown>>(document.paths).flatMap(([path, item]) =>
          Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
        );
      // Org overview, members, projects and every lifecycle action, deploys, backups and
      // restores, restore window, branches, domains, tenant errors (all under a project), usage
      // and history, alarms, the audit log, webhooks and deliveries.
      const agentAreas =
        /^\w+ (\/org\/\{slug\}\/(overview|members|invitations|projects|usage|alarms|audit|webhooks)(\/|$)|\/webhooks\/\{id\}\/test$)/;
      const wanted = operations(control).filter((operation) => agentAreas.test(operation));
      // Per project, the workspace's collections and items (and its webhooks).
      const workspaceWanted = operations(workspace).filter((operation) =>
        /^\w+ \/(collections|items|webhooks)/.test(operation),
      );
      expect(wanted.length).toBeGreaterThan(40);
      const tools = new Map(TOOL_CATALOG.map((tool) => [`${tool.api} ${tool.operation}`, tool.name]));
      for (const operation of wanted) expect(tools.get(`control ${operation}`), operation).toBeDefined();
      for (const operation of workspaceWanted) expect(tools.get(`workspace ${operation}`), operation).toBeDefined();
      for (const tool of TOOL_CATALOG) {
        const operationsOfItsApi = tool.api === "control" ? operations(control) : operations(workspace);
        expect(operationsOfItsApi, tool.name).toContain(tool.operation);
      }
      expect(new Set(ALL_TOOLS).size).toBe(ALL_TOOLS.length);
    });

    it("shows a full key every tool, a deploy key reads and lifecycle, a read-only key reads only", async () => {
      expect(await toolNames(fullClient)).toEqual(ALL_TOOLS);

      const readOnlyClient = await connect(app, readOnly.token);
      const readOnlyTools = (await readOnlyClient.listTools()).tools;
      expect(readOnlyTools.map((tool) => tool.name).sort()).toEqual(READ_TOOLS);
      for (const tool of readOnlyTools) expect(tool.annotations?.readOnlyHint).toBe(true);
      await readOnlyClient.close();

      const deployClient = await connect(app, deploy.token);
      const deployTools = await toolNames(deployClient);
      await deployClient.close();
      for (const name of ["create_project", "pause_project", "create_backup", "restore_project", "create_branch"]) {
        expect(deployTools).toContain(name);
      }
      // Admin actions (DESIGN §4), and workspace writes, are beyond a deploy key.
      for (const name of [
        "delete_project",
        "create_domain",
        "create_alarm",
        "invite_member",
        "create_webhook",
        "create_item",
      ]) {
        expect(deployTools).not.toContain(name);
      }
      for (const name of READ_TOOLS) expect(deployTools).toContain(name);
    });

    it("lists each tool with its input schema and annotations", async () => {
      const tools = (await fullClient.listTools()).tools;
      const get = (name: string) => tools.find((tool) => tool.name === name);
      expect(get("pause_project")).toMatchObject({
        inputSchema: { type: "object", properties: { projectSlug: { type: "string" } }, required: ["projectSlug"] },
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
      });
      expect(get("create_project")?.inputSchema).toMatchObject({
        properties: { name: { type: "string", minLength: 2, maxLength: 60 } },
        required: ["name"],
      });
      // The org is always the key's own: no tool asks for it (a collection's slug is another thing).
      for (const tool of tools.filter((t) => t.name !== "create_collection")) {
        expect(Object.keys(tool.inputSchema.properties ?? {}), tool.name).not.toContain("slug");
      }
      expect(get("create_item")?.inputSchema).toMatchObject({ required: ["projectId", "collection", "data"] });
      expect(get("list_projects")?.inputSchema.properties).toMatchObject({ limit: { type: "integer" } });
    });

    it("narrows the list and the calls to a key's mcpTools; a read-only key still never writes", async () => {
      const pinned = await createApiKey(app, owner, slug, "full", { mcpTools: ["list_projects", "pause_project"] });
      const client = await connect(app, pinned.token);
      expect(await toolNames(client)).toEqual(["list_projects", "pause_project"]);
      expect(answer(await callTool(client, "list_projects")).projects.length).toBeGreaterThan(0);
      const before = (await call(app, "GET", `/org/${slug}/projects`, { cookie: owner.cookie })).body.projects.length;
      expect(refusal(await callTool(client, "create_project", { name: "Pinned" }))).toMatch(
        /create_project is not in this API key's mcpTools allow-list/,
      );
      expect((await call(app, "GET", `/org/${slug}/projects`, { cookie: owner.cookie })).body.projects).toHaveLength(
        before,
      );
      await client.close();

      const pinnedReadOnly = await createApiKey(app, owner, slug, "read-only", {
        mcpTools: ["list_projects", "pause_project"],
      });
      const readClient = await connect(app, pinnedReadOnly.token);
      expect(await toolNames(readClient)).toEqual(["list_projects"]);
      expect(refusal(await callTool(readClient, "pause_project", { projectSlug: project.slug }))).toMatch(
        /scope 'read-only' does not allow pause_project/,
      );
      await readClient.close();
      const read = await call(app, "GET", `/org/${slug}/projects/${project.slug}`, { cookie: owner.cookie });
      expect(read.body.project.status).toBe("active");
    });

    it("refuses a key naming a tool that does not exist (422 naming the item)", async () => {
      const res = await call(app, "POST", `/org/${slug}/api-keys`, {
        cookie: owner.cookie,
        body: { name: "bad", scope: "full", mcpTools: ["list_projects", "drop_database"] },
      });
      expectStatus(res, 422);
      expect(res.body.error.details).toEqual([
        { path: "mcpTools.1", message: expect.stringContaining("not an MCP tool") },
      ]);
      const document = (await call(app, "GET", "/openapi.json")).body;
      expect(document.components.schemas.ApiKeyInput.properties.mcpTools.description).toContain("`restore_project`");
    });
  });

  describe("calls", () => {
    it("answers a read tool exactly as its REST operation answers", async () => {
      const asKey = { token: full.token };
      const pairs: [string, Record<string, unknown>, string][] = [
        ["get_org_overview", {}, `/org/${slug}/overview`],
        ["list_projects", {}, `/org/${slug}/projects`],
        ["get_project", { projectSlug: project.slug }, `/org/${slug}/projects/${project.slug}`],
        ["list_members", {}, `/org/${slug}/members`],
        [
          "list_deploys",
          { projectSlug: project.slug, limit: 5 },
          `/org/${slug}/projects/${project.slug}/deploys?limit=5`,
        ],
        ["list_branches", { projectSlug: project.slug }, `/org/${slug}/projects/${project.slug}/branches`],
        ["list_webhooks", {}, `/org/${slug}/webhooks`],
        ["list_collections", { projectId: project.id }, null as unknown as string],
      ];
      for (const [name, args, path] of pairs) {
        const viaMcp = answer(await callTool(fullClient, name, args));
        const viaRest =
          path === null
            ? await callWorkspace(app, project.id, "GET", "/collections", asKey)
            : await call(app, "GET", path, asKey);
        expectStatus(viaRest, 200);
        expect(viaMcp, name).toEqual(viaRest.body);
      }
    });

    it("creates and pauses a project that REST then sees, audited with the key as the actor", async () => {
      const created = answer(await callTool(fullClient, "create_project", { name: "Made By Agent" }));
      expect(created.project).toMatchObject({ name: "Made By Agent", status: "provisioning" });
      expect(created.project.adminToken).toMatch(/^wsa_/);
      const projectSlug = created.project.slug;
      await until("the agent's project to be active", async () => {
        const read = answer(await callTool(fullClient, "get_project", { projectSlug }));
        return read.project.status === "active";
      });
      const paused = answer(await callTool(fullClient, "pause_project", { projectSlug }));
      expect(paused.project.status).toBe("paused");

      const viaRest = await call(app, "GET", `/org/${slug}/projects/${projectSlug}`, { cookie: owner.cookie });
      expect(viaRest.body.project).toMatchObject({ id: created.project.id, status: "paused" });
      const audit = await call(app, "GET", `/org/${slug}/audit?action=project.*&limit=50`, { cookie: owner.cookie });
      const rows = audit.body.events.filter(
        (event: { target: { id: string } }) => event.target.id === created.project.id,
      );
      const actions = rows.map((event: { action: string }) => event.action);
      expect(actions).toEqual(expect.arrayContaining(["project.created", "project.paused"]));
      for (const row of rows.filter((event: { action: string }) =>
        ["project.created", "project.paused"].includes(event.action),
      )) {
        expect(row.actor).toMatchObject({ type: "api_key", id: full.id });
        expect(row.ip).toBe("127.0.0.1");
      }
      // Resumed through MCP too: a lifecycle action within a deploy key's scope.
      const deployClient = await connect(app, deploy.token);
      expect(answer(await callTool(deployClient, "resume_project", { projectSlug })).project.status).toBe("active");
      await deployClient.close();
    });

    it("creates items whose events reach a workspace webhook receiver", async () => {
      const hook = answer(
        await callTool(fullClient, "create_workspace_webhook", {
          projectId: project.id,
          name: "agent hook",
          url: `${receiver.url}/items`,
          events: ["items:notes:created"],
        }),
      );
      expect(hook.webhook).toMatchObject({ name: "agent hook", active: true });
      answer(await callTool(fullClient, "create_collection", { projectId: project.id, slug: "notes" }));
      const item = answer(
        await callTool(fullClient, "create_item", {
          projectId: project.id,
          collection: "notes",
          data: { title: "from an agent", tags: ["mcp"] },
        }),
      );
      const delivery = await receiver.waitFor("the created item's delivery", (request) => request.path === "/items");
      const body = JSON.parse(delivery.body);
      expect(body).toMatchObject({ channel: "items:notes", event: "created" });
      expect(body.data).toMatchObject({ title: "from an agent", tags: ["mcp"] });

      const id = item.item?.id ?? item.id;
      const read = answer(await callTool(fullClient, "get_item", { projectId: project.id, collection: "notes", id }));
      const viaRest = await callWorkspace(app, project.id, "GET", `/items/notes/${id}`, { token: full.token });
      expect(read).toEqual(viaRest.body);
      answer(
        await callTool(fullClient, "update_item", {
          projectId: project.id,
          collection: "notes",
          id,
          data: { done: true },
        }),
      );
      const listed = answer(
        await callTool(fullClient, "list_items", { projectId: project.id, collection: "notes", limit: 10 }),
      );
      expect(JSON.stringify(listed)).toContain('"done":true');
      const deleted = answer(
        await callTool(fullClient, "delete_item", { projectId: project.id, collection: "notes", id }),
      );
      expect(deleted).toEqual({ ok: true });
      const gone = await callWorkspace(app, project.id, "GET", `/items/notes/${id}`, { token: full.token });
      expectStatus(gone, 404);
    });

    it("lets a deploy key back up and branch, and refuses it what its scope does not hold", async () => {
      const deployClient = await connect(app, deploy.token);
      const backup = answer(await callTool(deployClient, "create_backup", { projectSlug: project.slug }));
      expect(backup.backup).toMatchObject({ status: expect.any(String) });
      expect(refusal(await callTool(deployClient, "delete_project", { projectSlug: project.slug }))).toMatch(
        /scope 'deploy' does not allow delete_project/,
      );
      expect(
        refusal(await callTool(deployClient, "create_item", { projectId: project.id, collection: "notes", data: {} })),
      ).toMatch(/scope 'deploy' does not allow create_item/);
      await deployClient.close();
      const still = await call(app, "GET", `/org/${slug}/projects/${project.slug}`, { cookie: owner.cookie });
      expectStatus(still, 200);
    });
  });

  describe("refusals", () => {
    /** A call refused before it ran: a tool error naming the path argument, and nothing of any route. */
    const expectSegmentFault = (result: CallToolResult, argument: string) => {
      expect(refusal(result)).toBe(
        `invalid arguments: ${argument} must be one path segment of A-Z, a-z, 0-9, '_' or '-'`,
      );
      expect(result.structuredContent).toEqual({
        error: {
          code: "VALIDATION",
          message: "invalid arguments",
          details: [{ path: argument, message: expect.stringContaining("one path segment") }],
        },
      });
    };

    it("refuses create_project to a read-only key, and creates nothing", async () => {
      const client = await connect(app, readOnly.token);
      const before = (await call(app, "GET", `/org/${slug}/projects`, { cookie: owner.cookie })).body.projects.length;
      const text = refusal(await callTool(client, "create_project", { name: "Nope" }));
      expect(text).toMatch(/API key scope 'read-only' does not allow create_project/);
      expect((await call(app, "GET", `/org/${slug}/projects`, { cookie: owner.cookie })).body.projects).toHaveLength(
        before,
      );
      await client.close();
    });

    it("names the field of wrong arguments, and runs nothing", async () => {
      expect(refusal(await callTool(fullClient, "create_project", { name: "Typo", regoin: "fra" }))).toMatch(
        /regoin is not an argument of create_project/,
      );
      expect(refusal(await callTool(fullClient, "pause_project", {}))).toMatch(/projectSlug is required/);
      const wrongType = await callTool(fullClient, "create_project", { name: 42 });
      expect(refusal(wrongType)).toMatch(/VALIDATION \(HTTP 422\): validation failed: name:/);
      expect((wrongType.structuredContent as any).error.details[0].path).toBe("name");
      expect(refusal(await callTool(fullClient, "list_projects", { limit: 0 }))).toMatch(/limit/);
      expect(refusal(await callTool(fullClient, "drop_database"))).toMatch(/there is no tool named 'drop_database'/);
      expect(refusal(await callTool(fullClient, "get_project", { projectSlug: "no-such-project" }))).toMatch(
        /NOT_FOUND \(HTTP 404\)/,
      );
    });

    it("keeps a key to its own org: another org's project is not found", async () => {
      const other = await signUp(app);
      const otherSlug = (await createOrg(app, other, "Elsewhere")).slug;
      const theirs = await createActiveProject(app, other, otherSlug, "Theirs");
      expect(refusal(await callTool(fullClient, "list_collections", { projectId: theirs.id }))).toMatch(/NOT_FOUND/);
      expect(refusal(await callTool(fullClient, "get_project", { projectSlug: theirs.slug }))).toMatch(/NOT_FOUND/);
    });

    it("answers 401 with WWW-Authenticate, before reading any message, without a usable API key", async () => {
      const attempts: Record<string, string>[] = [
        {},
        { authorization: "Bearer pak_0000" },
        { authorization: "Basic abc" },
      ];
      for (const headers of attempts) {
        const res = await rawPost(app, INITIALIZE, headers);
        expect(res.status).toBe(401);
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer /);
        expect(((await res.json()) as any).error.code).toBe("UNAUTHORIZED");
      }
      // Nor is a body read: a malformed one changes nothing.
      expect((await rawPost(app, "{not json")).status).toBe(401);
      // A console session is no API key.
      const session = await rawPost(app, INITIALIZE, { cookie: owner.cookie });
      expect(session.status).toBe(401);
      expect(((await session.json()) as any).error.message).toMatch(/API keys only/);
    });

    it("makes revocation effective on the next call", async () => {
      const key = await createApiKey(app, owner, slug, "full");
      const client = await connect(app, key.token);
      answer(await callTool(client, "list_projects"));
      const revoked = await call(app, "DELETE", `/org/${slug}/api-keys/${key.id}`, { cookie: owner.cookie });
      expect(revoked.status).toBe(204);
      await expect(callTool(client, "list_projects")).rejects.toThrow(/401|Unauthorized/i);
      await client.close();
    });

    it("answers malformed JSON and JSON-RPC with the protocol's errors, never a 500", async () => {
      const auth = { authorization: `Bearer ${full.token}` };
      const broken = await rawPost(app, "{not json", auth);
      expect(broken.status).toBe(400);
      expect(((await broken.json()) as any).error.code).toBe(-32700);
      const notRpc = await rawPost(app, JSON.stringify({ hello: "world" }), auth);
      expect(notRpc.status).toBe(400);
      expect(((await notRpc.json()) as any).error.code).toBeLessThan(0);
      const wrongAccept = await rawPost(app, INITIALIZE, { ...auth, accept: "application/json" });
      expect(wrongAccept.status).toBe(406);
      const notJson = await rawPost(app, INITIALIZE, { ...auth, "content-type": "text/plain" });
      expect(notJson.status).toBe(415);
      const unknownMethod = await rawPost(
        app,
        JSON.stringify({ jsonrpc: "2.0", id: 7, method: "resources/list", params: {} }),
        { ...auth, "mcp-protocol-version": "2025-06-18" },
      );
      expect(unknownMethod.status).toBe(200);
      expect(((await unknownMethod.json()) as any).error.code).toBe(-32601);
      const get = await fetch(`${app.url}/api/mcp`, { headers: { ...auth, accept: "text/event-stream" } });
      expect(get.status).toBe(405);
    });

    it("counts one MCP request once against the key's rate limit", async () => {
      const key = await createApiKey(app, owner, slug, "read-only");
      const first = await rawPost(
        app,
        JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "list_projects", arguments: {} },
        }),
        { authorization: `Bearer ${key.token}`, "mcp-protocol-version": "2025-06-18" },
      );
      expect(first.status).toBe(200);
      const remaining = Number(first.headers.get("ratelimit-remaining"));
      const rest = await call(app, "GET", `/org/${slug}/projects`, { token: key.token });
      expect(Number(rest.headers.get("ratelimit-remaining"))).toBe(remaining - 1);
    });

    it("refuses a JSON-RPC batch whole, with -32600, and runs none of its calls (#6)", async () => {
      const key = await createApiKey(app, owner, slug, "full");
      const headers = { authorization: `Bearer ${key.token}`, "mcp-protocol-version": "2025-06-18" };
      const projectCount = async () =>
        (await call(app, "GET", `/org/${slug}/projects?limit=100`, { cookie: owner.cookie })).body.projects.length;
      const before = await projectCount();
      const createCall = (id: number) => ({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: { name: "create_project", arguments: { name: `Batched ${id}` } },
      });
      // Many calls for one request (one rate-limit hit), a batch of one, an initialize batched with a call.
      const batches = [[1, 2, 3, 4, 5].map(createCall), [createCall(6)], [JSON.parse(INITIALIZE), createCall(7)]];
      for (const batch of batches) {
        const res = await rawPost(app, JSON.stringify(batch), headers);
        expect(res.status).toBe(400);
        expect(await res.json()).toEqual({
          jsonrpc: "2.0",
          error: { code: -32600, message: expect.stringContaining("batches are not supported") },
          id: null,
        });
      }
      expect(await projectCount()).toBe(before);
      const audit = await call(app, "GET", `/org/${slug}/audit?action=project.*&limit=100`, { cookie: owner.cookie });
      expect(audit.body.events.filter((event: { actor: { id: string } }) => event.actor.id === key.id)).toEqual([]);
    });

    it("still runs one JSON-RPC message per request, and documents that batches are refused (#6)", async () => {
      const key = await createApiKey(app, owner, slug, "full");
      const res = await rawPost(
        app,
        JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "create_project", arguments: { name: "One Message" } },
        }),
        { authorization: `Bearer ${key.token}`, "mcp-protocol-version": "2025-06-18" },
      );
      expect(res.status).toBe(200);
      const { result } = (await res.json()) as { result: CallToolResult };
      const created = answer(result).project;
      expect(created).toMatchObject({ name: "One Message" });
      const audit = await call(app, "GET", `/org/${slug}/audit?action=project.created&limit=100`, {
        cookie: owner.cookie,
      });
      expect(
        audit.body.events.filter((event: { target: { id: string } }) => event.target.id === created.id),
      ).toMatchObject([{ actor: { type: "api_key", id: key.id } }]);
      const document = (await call(app, "GET", "/openapi.json")).body;
      const description: string = document.paths["/mcp"].post.description;
      expect(description).not.toContain("or a batch");
      expect(description).toMatch(/a batch is refused/);
    });

    it("refuses get_project path arguments that are not one plain segment, reaching no other route (#9)", async () => {
      const escapes = [
        "..",
        ".",
        "../..",
        "../members",
        "%2e%2e",
        "%2E%2E%2Fmembers",
        "..%2fmembers",
        "a/b",
        "..\\members",
        "\\",
        `${project.slug}/..`,
        `${project.slug}/.`,
        `${project.slug}?x=1`,
        `${project.slug}#x`,
        `${project.slug}.json`,
        " ",
        "b\u0430se",
      ];
      const pinned = await createApiKey(app, owner, slug, "read-only", { mcpTools: ["get_project"] });
      const client = await connect(app, pinned.token);
      for (const projectSlug of escapes) {
        expectSegmentFault(await callTool(client, "get_project", { projectSlug }), "projectSlug");
      }
      await client.close();
    });

    it("refuses get_item path arguments such as collection '..', which reached list_collections (#9)", async () => {
      // `/items/../collections` is `/collections`: routes beside /items, outside the key's mcpTools.
      const pinned = await createApiKey(app, owner, slug, "read-only", { mcpTools: ["get_item"] });
      const client = await connect(app, pinned.token);
      const attempts: [Record<string, string>, string][] = [
        [{ collection: "..", id: "collections" }, "collection"],
        [{ collection: "..", id: "webhooks" }, "collection"],
        [{ collection: "%2e%2e", id: "collections" }, "collection"],
        [{ collection: "notes", id: "../../collections" }, "id"],
        [{ collection: "notes", id: ".." }, "id"],
        [{ projectId: `${project.id}/..` }, "projectId"],
      ];
      for (const [args, argument] of attempts) {
        const result = await callTool(client, "get_item", { projectId: project.id, collection: "x", id: "y", ...args });
        expectSegmentFault(result, argument);
      }
      await client.close();
    });

    it("still calls a tool with plain path arguments, as its own route (#9)", async () => {
      const pinned = await createApiKey(app, owner, slug, "read-only", { mcpTools: ["get_project", "get_item"] });
      const client = await connect(app, pinned.token);
      const viaRest = await call(app, "GET", `/org/${slug}/projects/${project.slug}`, { token: pinned.token });
      expectStatus(viaRest, 200);
      expect(answer(await callTool(client, "get_project", { projectSlug: project.slug }))).toEqual(viaRest.body);

      const collection = `paths_${tag()}`;
      expectStatus(
        await callWorkspace(app, project.id, "POST", "/collections", { token: full.token, body: { slug: collection } }),
        201,
      );
      const item = await callWorkspace(app, project.id, "POST", `/items/${collection}`, {
        token: full.token,
        body: { title: "plain" },
      });
      expectStatus(item, 201);
      const id = item.body.item?.id ?? item.body.id;
      const read = answer(await callTool(client, "get_item", { projectId: project.id, collection, id }));
      const itemViaRest = await callWorkspace(app, project.id, "GET", `/items/${collection}/${id}`, {
        token: pinned.token,
      });
      expect(read).toEqual(itemViaRest.body);
      expect(JSON.stringify(read)).toContain('"title":"plain"');
      await client.close();
    });

    it("refuses create_backup with kind auto, naming kind, and backs up as manual by default (#7)", async () => {
      const tools = (await fullClient.listTools()).tools;
      const createBackup = tools.find((tool) => tool.name === "create_backup");
      expect(createBackup?.inputSchema).toMatchObject({
        properties: { projectSlug: { type: "string" }, kind: { type: "string", enum: ["auto", "manual"] } },
        required: ["projectSlug"],
      });
      const backupsPath = `/org/${slug}/projects/${project.slug}/backups`;
      const before = (await call(app, "GET", backupsPath, { cookie: owner.cookie })).body.backups.length;
      const auto = await callTool(fullClient, "create_backup", { projectSlug: project.slug, kind: "auto" });
      expect(refusal(auto)).toMatch(
        /^VALIDATION \(HTTP 422\): validation failed: kind: automatic backups are taken by the daily job only/,
      );
      expect((auto.structuredContent as any).error.details).toEqual([
        { path: "kind", message: "automatic backups are taken by the daily job only" },
      ]);
      expect((await call(app, "GET", backupsPath, { cookie: owner.cookie })).body.backups).toHaveLength(before);
      const manual = answer(await callTool(fullClient, "create_backup", { projectSlug: project.slug }));
      expect(manual.backup).toMatchObject({ kind: "manual" });
    });
  });
});
