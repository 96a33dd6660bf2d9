import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { type Browser, chromium, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  invitationToken,
  type Mailbox,
  type Receiver,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
} from "../harness.ts";
import { freePort } from "../ports.ts";

/**
 * The web console (DESIGN §15) in a real browser (Debian's chromium through playwright-core),
 * against a real server: the flows a person goes through, by role and accessible name, with no
 * page or console error, no request to another host, no serious or critical axe-core finding on
 * any screen, usable at 390 px. Screenshots of each screen go to test-results/console/.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const SHOTS = path.join(ROOT, "test-results/console");
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

describe("the console", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  const foreign: string[] = [];
  /** Every answer of 400 or more the page got, as `status path`. */
  const failures = new Set<string>();

  /** The screen as a person sees it: saved, and checked by axe-core. */
  async function look(name: string): Promise<void> {
    await page.waitForLoadState("networkidle");
    await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
    // Evaluated over the DevTools protocol: the page's CSP (no inline script) stays in force.
    await page.evaluate(AXE);
    const violations = await page.evaluate(async () => {
      const result = await (window as any).axe.run(document, { resultTypes: ["violations"] });
      return (result.violations as { id: string; impact: string; help: string; nodes: { target: string[] }[] }[])
        .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
        .map(
          (violation) =>
            `${violation.id}: ${violation.help} (${violation.nodes.map((node) => node.target.join(" ")).join(", ")})`,
        );
    });
    expect(violations, `axe on ${name}`).toEqual([]);
  }

  /** Waits until `within` shows `text` (playwright-core has no assertions of its own). */
  async function shows(within: Locator, text: string | RegExp, timeout = 10_000): Promise<void> {
    await within.getByText(text).first().waitFor({ timeout });
  }
  /** The value of a field once it has one. */
  async function fieldValue(input: Locator): Promise<string> {
    await input.waitFor();
    return input.inputValue();
  }

  const button = (name: string) => page.getByRole("button", { name, exact: true });
  const link = (name: string) => page.getByRole("link", { name, exact: true });
  const field = (name: string) => page.getByLabel(name, { exact: true });

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    const port = await freePort();
    mailbox = await startMailbox();
    receiver = await startReceiver();
    app = await startApp({
      SMTP_URL: mailbox.url,
      BILLING_PROVIDER: "test",
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      PORT: String(port),
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      RATE_LIMIT_PER_MINUTE: "100000",
      AUTH_RATE_LIMIT_PER_MINUTE: "100000",
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-quic",
        "--no-first-run",
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      // A failed request is also a console error; those are checked one by one below (`failures`).
      if (message.text().startsWith("Failed to load resource")) return;
      if (message.type() === "error" || message.type() === "warning") {
        problems.push(`console ${message.type()}: ${message.text()}`);
      }
    });
    page.on("response", (response) => {
      if (response.status() >= 400) failures.add(`${response.status()} ${new URL(response.url()).pathname}`);
    });
    page.on("request", (request) => {
      if (!request.url().startsWith(app.url) && !request.url().startsWith("data:")) foreign.push(request.url());
    });
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await mailbox?.close();
    await receiver?.close();
  });

  it("serves the console at every screen's URL, and never in place of the API", async () => {
    for (const route of ["/", "/orgs/acme/projects/shop/backups", "/sign-in"]) {
      const html = await fetch(`${app.url}${route}`, { headers: { accept: "text/html" } });
      expect(html.status).toBe(200);
      expect(html.headers.get("content-type")).toContain("text/html");
      expect(html.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(await html.text()).toContain('<div id="app">');
    }
    const api = await fetch(`${app.url}/api/nope`, { headers: { accept: "text/html" } });
    expect(api.status).toBe(404);
    expect((await api.json()).error.code).toBe("NOT_FOUND");
    const workspace = await fetch(`${app.url}/w/prj_nope/api/items/x`, { headers: { accept: "text/html" } });
    expect(workspace.headers.get("content-type")).toContain("application/json");
    const notHtml = await fetch(`${app.url}/something`, { headers: { accept: "application/json" } });
    expect(notHtml.status).toBe(404);
    const missing = await fetch(`${app.url}/assets/nope.js`);
    expect(missing.status).toBe(404);
  });

  it("keeps its first load's JavaScript under 150 KB gzipped", () => {
    const index = readFileSync(path.join(ROOT, "dist/console/index.html"), "utf8");
    const scripts = [...index.matchAll(/src="\/assets\/([^"]+\.js)"/g)].map((match) => match[1] as string);
    const preloads = [...index.matchAll(/href="\/assets\/([^"]+\.js)"/g)].map((match) => match[1] as string);
    const bytes = [...scripts, ...preloads].reduce(
      (total, file) => total + gzipSync(readFileSync(path.join(ROOT, "dist/console/assets", file))).length,
      0,
    );
    expect(scripts.length).toBeGreaterThan(0);
    expect(bytes).toBeLessThan(150 * 1024);
  });

  it("signs up, creates an organization and a project, and follows it to active", async () => {
    await page.goto(`${app.url}/`);
    await page.waitForURL(/\/sign-in/);
    await look("sign-in");
    // A wrong password: the API's message, shown.
    await field("Email").fill("nobody@example.test");
    await field("Password").fill("wrong-password");
    await button("Sign in").click();
    await shows(page.getByRole("alert"), /invalid|password/i);
    // Single sign-on for a domain no organization has proven: said so.
    await button("Use single sign-on").click();
    await shows(page.getByRole("alert"), /no single sign-on/i);
    await link("Create an account").click();
    await look("sign-up");
    await field("Name").fill("Ada Lovelace");
    await field("Email").fill("ada@example.test");
    await field("Password").fill("correct-horse-battery");
    await button("Create account").click();
    await page.waitForURL(/\/orgs\/new$/);
    await look("create-organization");
    await field("Organization name").fill("Acme");
    await button("Create organization").click();
    await page.waitForURL(/\/orgs\/acme$/);
    await look("projects-empty");
    await button("New project").click();
    await field("Project name").fill("Storefront");
    await button("Create project").click();
    expect(await fieldValue(page.getByRole("region", { name: "Workspace admin token" }).getByRole("textbox"))).toMatch(
      /^wsa_/,
    );
    const projects = page.getByRole("table", { name: "Projects" });
    await projects.getByText("active", { exact: true }).waitFor({ timeout: 20_000 });
    await look("projects");
    await projects.getByRole("link", { name: "Storefront" }).click();
    await page.waitForURL(/\/orgs\/acme\/projects\/storefront$/);
    await page.getByRole("heading", { name: "Storefront" }).waitFor();
    await shows(page.getByRole("table", { name: "Deploys" }), "provision");
    await field("Template version").selectOption({ index: 1 });
    await button("Upgrade template").click();
    await shows(page.getByRole("region", { name: "Template" }), /Upgraded|Already current|failed/);
    await look("project-overview");
  });

  it("keeps the place on reload, and on back and forward", async () => {
    await page.reload();
    await page.getByRole("heading", { name: "Storefront" }).waitFor();
    await link("Backups").click();
    await page.waitForURL(/\/backups$/);
    await page.goBack();
    await page.waitForURL(/\/storefront$/);
    await page.goForward();
    await page.waitForURL(/\/backups$/);
    await page.getByRole("heading", { name: "Backups" }).waitFor();
  });

  it("manages the workspace's data: a collection, an item as JSON, a file, its users", async () => {
    await link("Overview").click();
    const projectId = (await page.locator("dd code").filter({ hasText: /^prj_/ }).textContent()) as string;
    const signUp = await fetch(`${app.url}/w/${projectId}/api/auth/sign-up`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "reader@example.test", password: "long-enough-pw" }),
    });
    expect(signUp.status).toBe(201);
    await link("Data").click();
    const users = page.getByRole("table", { name: "Workspace users" });
    await shows(users, "reader@example.test");
    await users.getByRole("button", { name: "Delete" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await shows(page.getByRole("region", { name: "Users" }), "No users have signed up yet.");
    await page.getByRole("textbox", { name: "Collection slug" }).fill("posts");
    await button("Create collection").click();
    await page.getByLabel("New item (JSON)").fill('{"title": "Hello from the console"}');
    await button("Add item").click();
    const items = page.getByRole("table", { name: "Items in posts" });
    await shows(items, "Hello from the console");
    await items.getByRole("button", { name: "Edit" }).click();
    await page.getByLabel(/^Item itm_/).fill('{"title": "Edited"}');
    await button("Save").click();
    await shows(items, "Edited");
    // Not JSON: said, naming the field, nothing sent.
    await page.getByLabel("New item (JSON)").fill("{not json");
    await button("Add item").click();
    await page.getByText("must be a JSON object").waitFor();
    await page
      .getByLabel("Upload a file")
      .setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hello") });
    await shows(page.getByRole("table", { name: "Files" }), "notes.txt");
    await look("project-data");
  });

  it("sends the workspace's webhooks: a test send, its delivery, a retry", async () => {
    await link("Workspace webhooks").click();
    await field("Name").fill("receiver");
    await field("Receiver URL").fill(`${receiver.url}/workspace`);
    await field("Custom headers").fill("X-Team: blue");
    await button("Create webhook").click();
    const hooks = page.getByRole("table", { name: "Workspace webhooks" });
    await shows(hooks, "receiver");
    await hooks.getByRole("button", { name: "Edit" }).click();
    await field("New events").fill("items, files");
    await button("Save webhook").click();
    await shows(hooks, "items, files");
    await hooks.getByRole("button", { name: "Send test" }).click();
    const deliveries = page.getByRole("table", { name: "Deliveries" });
    await shows(deliveries, "webhook.test");
    await shows(deliveries, "succeeded");
    expect(receiver.requests.find((request) => request.path === "/workspace")?.headers["x-team"]).toBe("blue");
    await deliveries.getByRole("button", { name: "Retry" }).first().click();
    await shows(deliveries, "2");
    await look("project-webhooks");
  });

  it("backs up and restores, with a confirmation", async () => {
    await link("Backups").click();
    await button("Create backup").click();
    const backups = page.getByRole("table", { name: "Backups" });
    await backups.getByText("completed", { exact: true }).waitFor({ timeout: 20_000 });
    await backups.getByRole("button", { name: "Restore" }).click();
    const dialog = page.getByRole("dialog");
    await shows(dialog, "Restore the project to this backup");
    await dialog.getByRole("button", { name: "Restore" }).click();
    await shows(page.getByRole("status"), "Restored");
    await look("project-backups");
  });

  it("branches, adds a domain (its TXT record shown), and reads the errors", async () => {
    await link("Branches").click();
    await field("Name").fill("pr-7");
    await button("Create branch").click();
    await shows(page.getByRole("table", { name: "Branches" }), "pr-7");
    await look("project-branches");
    await link("Domains").click();
    // A bad hostname: the API's 422, on the field.
    await field("Hostname").fill("not a host");
    await button("Add domain").click();
    await page.locator(".field-error").first().waitFor();
    await field("Hostname").fill("shop.example.com");
    await button("Add domain").click();
    await shows(page.getByRole("table", { name: "Domains" }), "_plinth-challenge.shop.example.com");
    await button("Copy the TXT record value of shop.example.com").click();
    await shows(page.getByRole("table", { name: "Domains" }), "Copied");
    await look("project-domains");
    await link("Errors").click();
    await page.getByRole("heading", { name: "Errors" }).waitFor();
    await look("project-errors");
  });

  it("invites a member, creates an API key (its token once), and reads the audit log and usage", async () => {
    await link("Members").click();
    await field("Email").fill("grace@example.test");
    await button("Invite").click();
    await shows(page.getByRole("table", { name: "Members" }), "grace@example.test");
    await look("members");
    await link("API keys").click();
    await field("Key name").fill("ci");
    await page.getByText("Choose MCP tools").click();
    await page.getByRole("checkbox", { name: /list_projects/ }).check();
    expect(await field("MCP tools").inputValue()).toBe("list_projects");
    await button("Create key").click();
    expect(await fieldValue(page.getByRole("region", { name: "API key token" }).getByRole("textbox"))).toMatch(/^pak_/);
    await shows(page.getByRole("table", { name: "API keys" }), "ci");
    await look("api-keys");
    await link("Audit log").click();
    await shows(page.getByRole("table", { name: "Audit events" }), "api_key.created");
    await look("audit-log");
    // The day's usage has been measured (the upload above): the chart draws it.
    await app.server.usage.flush();
    await link("Usage").click();
    await page.getByRole("img", { name: /Requests, daily/ }).waitFor({ timeout: 10_000 });
    await button("Create alarm").click();
    await shows(page.getByRole("table", { name: "Alarms" }), "80%");
    await look("usage");
  });

  it("sends webhooks (a test send and its delivery), and tests an integration", async () => {
    await link("Webhooks").click();
    await field("Receiver URL").fill(`${receiver.url}/plinth`);
    await button("Create webhook").click();
    expect(await fieldValue(page.getByRole("region", { name: "Webhook signing secret" }).getByRole("textbox"))).toMatch(
      /^whsec_/,
    );
    const hooks = page.getByRole("table", { name: "Webhooks" });
    await hooks.getByRole("button", { name: "Edit" }).click();
    await field("New events").fill("project.*, webhook.test");
    await button("Save webhook").click();
    await shows(hooks, "project.*, webhook.test");
    await hooks.getByRole("button", { name: "Send test" }).click();
    await shows(page.getByRole("table", { name: "Deliveries" }), "webhook.test");
    await shows(page.getByRole("table", { name: "Deliveries" }), "succeeded");
    await field("Slack webhook URL").fill(`${receiver.url}/slack`);
    await button("Add integration").click();
    const integrations = page.getByRole("table", { name: "Integrations" });
    await shows(integrations, "slack");
    await integrations.getByRole("button", { name: "Send test" }).click();
    await shows(page.getByRole("status"), "Test sent to slack: succeeded");
    // Pointed elsewhere in place: the config whole, the new address in it.
    await integrations.getByRole("button", { name: "Edit" }).click();
    await field("New slack webhook URL").fill(`${receiver.url}/slack-moved`);
    await button("Save integration").click();
    await integrations.getByRole("button", { name: "Send test" }).click();
    await shows(page.getByRole("status"), "Test sent to slack: succeeded");
    expect(receiver.requests.some((request) => request.path === "/slack-moved")).toBe(true);
    await look("webhooks");
  });

  it("changes the org's settings, sets up single sign-on and SCIM", async () => {
    await link("Settings").click();
    await field("Organization name").fill("Acme Inc");
    await field("Webhook URL").fill(`${receiver.url}/all`);
    await button("Save settings").click();
    expect(
      await fieldValue(page.getByRole("region", { name: "Webhook URL signing secret" }).getByRole("textbox")),
    ).toMatch(/^whsec_/);
    await page
      .getByRole("combobox", { name: "Organization" })
      .locator("option", { hasText: "Acme Inc" })
      .waitFor({ state: "attached" });
    // Single sign-on, saved disabled with its domain: the TXT record that proves it is shown.
    await field("Protocol").selectOption("saml");
    await field("IdP sign-in URL").fill("https://idp.example.com/sso");
    await field("E-mail domain").fill("acme.example");
    await button("Save single sign-on").click();
    await shows(page.getByRole("region", { name: "Single sign-on" }), "_plinth-sso.acme.example");
    await field("Or the IdP's metadata XML").waitFor();
    await button("Create SCIM token").click();
    expect(await fieldValue(page.getByRole("region", { name: "SCIM token" }).getByRole("textbox"))).toMatch(/^scim_/);
    await button("Export all projects").click();
    const dump = page.getByRole("list", { name: "Dumps" }).getByRole("link").first();
    await dump.waitFor();
    const [download] = await Promise.all([page.waitForEvent("download"), dump.click()]);
    expect(download.suggestedFilename()).toMatch(/^storefront-.*\.sql$/);
    await look("settings");
  });

  it("buys a plan with the test provider, and lists its invoice", async () => {
    await link("Billing").click();
    await button("Choose Pro").click();
    await shows(page.getByRole("status"), "Paid.");
    await shows(page.getByRole("region", { name: "Subscription" }), "pro");
    await shows(page.getByRole("table", { name: "Invoices" }), "paid");
    await look("billing");
  });

  it("shows notifications, and marks them read", async () => {
    await page.getByRole("link", { name: /^Notifications/ }).click();
    await page.getByRole("heading", { name: "Notifications" }).waitFor();
    await shows(page.getByRole("table", { name: "Notifications" }), /plan/i);
    await button("Mark all read").click();
    await page.getByRole("link", { name: "Notifications", exact: true }).waitFor();
    await look("notifications");
  });

  it("lets an invitee accept the mailed invitation: sign up from the link, and join", async () => {
    const since = mailbox.messages.length;
    await link("Members").click();
    await field("Email").fill("alan@example.test");
    await field("Role").selectOption("developer");
    await button("Invite").click();
    const mail = await mailbox.waitFor("alan@example.test", since);
    const invitee = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    invitee.on("pageerror", (error) => problems.push(`page error (invitee): ${error.message}`));
    try {
      await invitee.goto(`${app.url}/accept-invite?token=${encodeURIComponent(invitationToken(mail))}`);
      await invitee.waitForURL(/\/sign-in\?next=/);
      await invitee.getByRole("link", { name: "Create an account", exact: true }).click();
      await invitee.getByLabel("Name", { exact: true }).fill("Alan Turing");
      await invitee.getByLabel("Email", { exact: true }).fill("alan@example.test");
      await invitee.getByLabel("Password", { exact: true }).fill("correct-horse-battery");
      await invitee.getByRole("button", { name: "Create account", exact: true }).click();
      await invitee.waitForURL(/\/accept-invite$/);
      await invitee.screenshot({ path: path.join(SHOTS, "accept-invite.png"), fullPage: true });
      await invitee.evaluate(AXE);
      const violations = await invitee.evaluate(async () => {
        const result = await (window as any).axe.run(document, { resultTypes: ["violations"] });
        return (result.violations as { id: string; impact: string }[])
          .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
          .map((violation) => violation.id);
      });
      expect(violations, "axe on accept-invite").toEqual([]);
      await invitee.getByRole("button", { name: "Accept invitation", exact: true }).click();
      await invitee.waitForURL(/\/orgs\/acme$/);
      await invitee.getByRole("heading", { name: "Projects" }).waitFor();
    } finally {
      await invitee.close();
    }
    await page.reload();
    await shows(page.getByRole("table", { name: "Members" }), "alan@example.test");
  });

  it("edits the signed-in account", async () => {
    await link("ada@example.test").click();
    await page.waitForURL(/\/account$/);
    await field("Title").fill("Analyst");
    await button("Save account").click();
    await shows(page.getByRole("status"), "Saved.");
    await look("account");
    await page.goto(`${app.url}/orgs/acme`);
  });

  it("fits a 390 px wide screen", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [route, heading] of [
      ["/orgs/acme", "Projects"],
      ["/orgs/acme/projects/storefront", "Storefront"],
      ["/orgs/acme/projects/storefront/data", "Data"],
      ["/orgs/acme/members", "Members"],
      ["/orgs/acme/usage", "Usage"],
      ["/orgs/acme/settings", "Settings"],
      ["/orgs/acme/keys", "API keys"],
      ["/orgs/acme/webhooks", "Webhooks"],
      ["/orgs/acme/audit", "Audit log"],
      ["/orgs/acme/billing", "Billing"],
      ["/orgs/acme/notifications", "Notifications"],
      ["/orgs/acme/projects/storefront/backups", "Backups"],
      ["/orgs/acme/projects/storefront/branches", "Branches"],
      ["/orgs/acme/projects/storefront/domains", "Domains"],
      ["/orgs/acme/projects/storefront/errors", "Errors"],
      ["/orgs/acme/projects/storefront/webhooks", "Workspace webhooks"],
      ["/account", "Your account"],
      ["/orgs/new", "Create an organization"],
    ] as const) {
      await page.goto(`${app.url}${route}`);
      await page.getByRole("heading", { name: heading, exact: true }).first().waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow, route).toBeLessThanOrEqual(0);
      await look(`390px${route.replaceAll("/", "-")}`);
    }
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it("signs out, and asks to sign in again", async () => {
    await button("Sign out").click();
    await page.waitForURL(/\/sign-in/);
    await page.goto(`${app.url}/orgs/acme/keys`);
    await page.waitForURL(/\/sign-in\?next=/);
    await field("Email").fill("ada@example.test");
    await field("Password").fill("correct-horse-battery");
    await button("Sign in").click();
    await page.waitForURL(/\/orgs\/acme\/keys$/);
  });

  it("logged no page or console error, and asked no other host for anything", () => {
    expect(problems).toEqual([]);
    // The only failed requests are the ones the tests made on purpose: a wrong password, a
    // lookup of single sign-on nobody set up, a bad hostname.
    expect([...failures].sort()).toEqual([
      "401 /api/auth/sign-in/email",
      "404 /api/auth/sso/lookup",
      "422 /api/org/acme/projects/storefront/domains",
    ]);
    expect(foreign).toEqual([]);
  });
});
