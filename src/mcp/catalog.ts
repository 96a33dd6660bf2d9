/**
 * The MCP server's tools (DESIGN §13): each is one REST operation, named snake_case verb_noun
 * after it, and runs through that operation's own route (tools.ts), so its checks, validation and
 * audit rows are the route's. Plain data, so that what takes tool names (API keys' `mcpTools`)
 * can know them without loading the server.
 */

import type { PermissionName } from "../domains/orgs/access.ts";

type Method = "GET" | "POST" | "PATCH" | "PUT" | "DELETE";

export interface ToolEntry {
  name: string;
  /** `METHOD /path` as the OpenAPI document names it: of the API, or of the workspace API. */
  operation: `${Method} /${string}`;
  api: "control" | "workspace";
  description: string;
  /** May change or remove what exists (MCP's `destructiveHint`); a read never does. */
  destructive?: boolean;
  /** Repeating the call with the same arguments changes nothing more (MCP's `idempotentHint`). */
  idempotent?: boolean;
  /**
   * What a key needs for a write whose route cannot check it up front (no `requires`: the route
   * decides by its input, or has no org in its path). Otherwise the route's own is used.
   */
  permission?: PermissionName;
}

const PROJECT = "/org/{slug}/projects/{projectSlug}";
const SLUG_HINT = "`projectSlug` is the project's slug, as list_projects shows it.";
const WORKSPACE_HINT = "`projectId` is the project's id (prj_…), from list_projects or get_project.";

function control(
  name: string,
  operation: ToolEntry["operation"],
  description: string,
  hints: Pick<ToolEntry, "destructive" | "idempotent" | "permission"> = {},
): ToolEntry {
  return { name, operation, api: "control", description, ...hints };
}

function workspace(
  name: string,
  operation: ToolEntry["operation"],
  description: string,
  hints: Pick<ToolEntry, "destructive" | "idempotent"> = {},
): ToolEntry {
  return { name, operation, api: "workspace", description: `${description} ${WORKSPACE_HINT}`, ...hints };
}

const removes = { destructive: true, idempotent: true };
const overwrites = { destructive: true, idempotent: true };
const settles = { destructive: false, idempotent: true };

export const TOOL_CATALOG: readonly ToolEntry[] = [
  // The org
  control(
    "get_org_overview",
    "GET /org/{slug}/overview",
    "The API key's organization: its plan, settings and projects. Start here to see what exists.",
  ),
  control(
    "list_members",
    "GET /org/{slug}/members",
    "The org's members and pending invitations (status `invited`), with their roles.",
  ),
  control(
    "invite_member",
    "POST /org/{slug}/invitations",
    "Invite someone to the org by e-mail with a role; they receive a link to accept. Needs a full key.",
  ),
  control(
    "update_member",
    "PATCH /org/{slug}/members/{id}",
    "Change a member's role (viewer, developer, admin). `id` is the member's id from list_members. Needs a full key.",
    overwrites,
  ),
  control(
    "remove_member",
    "DELETE /org/{slug}/members/{id}",
    "Remove a member from the org, or revoke a pending invitation. `id` comes from list_members. Needs a full key.",
    // The route lets any member remove themselves; a key removes others, as an admin.
    { ...removes, permission: "members:manage" },
  ),
  control(
    "resend_invitation",
    "POST /org/{slug}/members/{id}/resend",
    "Send a pending invitation again, with a new link (the old one stops working). Needs a full key.",
  ),
  control(
    "list_audit_events",
    "GET /org/{slug}/audit",
    "The org's audit log, newest first: who did what, when and from where. Filter by `action`, `from`, `to`.",
  ),

  // Projects and their lifecycle
  control("list_projects", "GET /org/{slug}/projects", "The org's projects, oldest first, with status and region."),
  control(
    "get_project",
    `GET ${PROJECT}`,
    `One project with its status, workspace URL and template version. ${SLUG_HINT}`,
  ),
  control(
    "create_project",
    "POST /org/{slug}/projects",
    "Create a project; it is provisioned in the background (status `provisioning`, then `active`). " +
      "The answer carries the workspace admin token, shown only this once.",
  ),
  control("update_project", `PATCH ${PROJECT}`, `Rename a project or change its settings. ${SLUG_HINT}`, overwrites),
  control(
    "delete_project",
    `DELETE ${PROJECT}`,
    `Delete a project and its workspace (its data, files and backups). Needs a full key. ${SLUG_HINT}`,
    removes,
  ),
  control(
    "pause_project",
    `POST ${PROJECT}/pause`,
    `Pause an active project: its workspace API answers 409 until resumed; nothing is lost. ${SLUG_HINT}`,
    settles,
  ),
  control("resume_project", `POST ${PROJECT}/resume`, `Resume a paused project. ${SLUG_HINT}`, settles),
  control(
    "retry_provisioning",
    `POST ${PROJECT}/provision-retry`,
    `Provision a project whose provisioning failed again. ${SLUG_HINT}`,
    settles,
  ),
  control(
    "reprovision_admin_token",
    `POST ${PROJECT}/reprovision-admin`,
    `Issue a new workspace admin token; the old one stops working at once. Needs a full key. ${SLUG_HINT}`,
    { destructive: true, idempotent: false },
  ),
  control(
    "upgrade_project",
    `POST ${PROJECT}/upgrade`,
    `Migrate the project's workspace to the latest template version (or \`version\`). ${SLUG_HINT}`,
    settles,
  ),
  control(
    "list_deploys",
    `GET ${PROJECT}/deploys`,
    `The project's deploys (provisioning and upgrades), newest first. ${SLUG_HINT}`,
  ),

  // Data safety
  control(
    "create_backup",
    `POST ${PROJECT}/backups`,
    `Back up the project's workspace now; the backup is \`pending\` until taken, then \`completed\`. ${SLUG_HINT}`,
  ),
  control("list_backups", `GET ${PROJECT}/backups`, `The project's backups, newest first. ${SLUG_HINT}`),
  control("get_backup", `GET ${PROJECT}/backups/{id}`, `One backup, by its id from list_backups. ${SLUG_HINT}`),
  control("delete_backup", `DELETE ${PROJECT}/backups/{id}`, `Delete a backup and its snapshot. ${SLUG_HINT}`, removes),
  control(
    "restore_backup",
    `POST ${PROJECT}/backups/{id}/restore`,
    "Restore the workspace to a completed backup: changes since then are undone (they stay in the restore " +
      `window, so a later restore can bring them back). ${SLUG_HINT}`,
    { destructive: true, idempotent: true },
  ),
  control(
    "restore_project",
    `POST ${PROJECT}/restore`,
    "Point-in-time restore: rewind the workspace to the instant `timestamp` (Unix ms) inside its restore window " +
      `(get_restore_window). ${SLUG_HINT}`,
    { destructive: true, idempotent: true },
  ),
  control(
    "get_restore_window",
    `GET ${PROJECT}/restore-window`,
    `The earliest and latest instants restore_project can reach. ${SLUG_HINT}`,
  ),
  control(
    "create_branch",
    `POST ${PROJECT}/branches`,
    "Branch the project: a separate workspace holding a copy of its data, as of now or of `at` in its " +
      `restore window; it has its own workspace URL (use its id as \`projectId\` in the workspace tools) and admin token. ${SLUG_HINT}`,
  ),
  control("list_branches", `GET ${PROJECT}/branches`, `The project's branches, newest first. ${SLUG_HINT}`),
  control("get_branch", `GET ${PROJECT}/branches/{id}`, `One branch, by its id (brn_…). ${SLUG_HINT}`),
  control(
    "delete_branch",
    `DELETE ${PROJECT}/branches/{id}`,
    `Delete a branch and its workspace. ${SLUG_HINT}`,
    removes,
  ),
  control(
    "reset_branch",
    `POST ${PROJECT}/branches/{id}/reset`,
    `Copy the project's current data into the branch again; the branch's own changes are lost. ${SLUG_HINT}`,
    { destructive: true, idempotent: true },
  ),

  // Operating a project
  control(
    "create_domain",
    `POST ${PROJECT}/domains`,
    "Add a custom domain to the project. It starts `pending`: publish its `verification` TXT record, point " +
      `the name at \`target\`, then call verify_domain. Needs a full key. ${SLUG_HINT}`,
  ),
  control("list_domains", `GET ${PROJECT}/domains`, `The project's custom domains and their state. ${SLUG_HINT}`),
  control(
    "verify_domain",
    `POST ${PROJECT}/domains/{id}/verify`,
    `Look the domain's TXT record up now; the domain becomes \`active\` when it is found. ${SLUG_HINT}`,
    settles,
  ),
  control(
    "delete_domain",
    `DELETE ${PROJECT}/domains/{id}`,
    `Remove a custom domain; it stops serving the project at once. Needs a full key. ${SLUG_HINT}`,
    removes,
  ),
  control(
    "get_usage",
    "GET /org/{slug}/usage",
    "What the org has used in its current billing period (requests, d1 and r2 bytes, …) against its plan.",
  ),
  control(
    "get_usage_history",
    "GET /org/{slug}/usage/history",
    "The org's usage per project and day over a range (`from`, `to`), deleted projects included.",
  ),
  control(
    "get_subscription",
    "GET /org/{slug}/billing/subscription",
    "The org's subscription (plan, interval, status, current period, whether it ends at the period's end), or null on the default plan.",
  ),
  control(
    "list_invoices",
    "GET /org/{slug}/billing/invoices",
    "The org's invoices, newest first, with their amounts and lines.",
  ),
  control(
    "create_alarm",
    "POST /org/{slug}/alarms",
    "Be notified when a usage metric reaches `thresholdPct` percent of the plan's limit. Needs a full key.",
  ),
  control("list_alarms", "GET /org/{slug}/alarms", "The org's usage alarms."),
  control("delete_alarm", "DELETE /org/{slug}/alarms/{id}", "Delete a usage alarm. Needs a full key.", removes),
  control(
    "list_tenant_errors",
    `GET ${PROJECT}/errors`,
    `The project's workspace API errors (status 400 and above), newest first: what its clients got wrong. ${SLUG_HINT}`,
  ),

  // Control-plane webhooks
  control("list_webhooks", "GET /org/{slug}/webhooks", "The org's webhooks, with their state."),
  control(
    "create_webhook",
    "POST /org/{slug}/webhooks",
    "Subscribe a URL to org events; the answer carries its signing secret, shown only this once. Needs a full key.",
  ),
  control(
    "update_webhook",
    "PATCH /org/{slug}/webhooks/{id}",
    "Change a webhook's URL, events or state; `active: true` resumes a disabled one. Needs a full key.",
    overwrites,
  ),
  control("delete_webhook", "DELETE /org/{slug}/webhooks/{id}", "Delete a webhook. Needs a full key.", removes),
  control(
    "list_webhook_deliveries",
    "GET /org/{slug}/webhooks/{id}/deliveries",
    "A webhook's recent deliveries with every attempt (status, response, error), newest first.",
  ),
  control(
    "test_webhook",
    "POST /webhooks/{id}/test",
    "Send a sample delivery to a webhook now and return it after one attempt. Needs a full key.",
    { permission: "webhooks:manage" },
  ),

  // A project's workspace
  workspace("list_collections", "GET /collections", "The workspace's collections."),
  workspace("create_collection", "POST /collections", "Create a collection in the workspace. Needs a full key."),
  workspace(
    "list_items",
    "GET /items/{collection}",
    "A collection's items, oldest first (`limit`, `offset`). `collection` is the collection's slug.",
  ),
  workspace("get_item", "GET /items/{collection}/{id}", "One item of a collection."),
  workspace(
    "create_item",
    "POST /items/{collection}",
    "Create an item: `data` is any JSON object. Workspace webhooks hear items:<collection>:created. Needs a full key.",
  ),
  workspace(
    "update_item",
    "PATCH /items/{collection}/{id}",
    "Merge `data`'s top-level keys into an item. Needs a full key.",
    overwrites,
  ),
  workspace("delete_item", "DELETE /items/{collection}/{id}", "Delete an item. Needs a full key.", removes),
  workspace(
    "list_workspace_webhooks",
    "GET /webhooks",
    "The workspace's webhooks (on items, files and auth events) with their breaker state.",
  ),
  workspace("get_workspace_webhook", "GET /webhooks/{id}", "One workspace webhook."),
  workspace(
    "create_workspace_webhook",
    "POST /webhooks",
    "Subscribe a URL to workspace events matching `patterns` (items:posts:created, items:*:*, …). Needs a full key.",
  ),
  workspace(
    "update_workspace_webhook",
    "PATCH /webhooks/{id}",
    "Change a workspace webhook; `active: true` resumes it. Needs a full key.",
    overwrites,
  ),
  workspace(
    "delete_workspace_webhook",
    "DELETE /webhooks/{id}",
    "Delete a workspace webhook. Needs a full key.",
    removes,
  ),
  workspace(
    "list_workspace_webhook_deliveries",
    "GET /webhooks/{id}/deliveries",
    "A workspace webhook's deliveries with their attempts, newest first.",
  ),
  workspace(
    "test_workspace_webhook",
    "POST /webhooks/{id}/test",
    "Send the synthetic webhook.test event to a workspace webhook now. Needs a full key.",
  ),
  workspace(
    "retry_workspace_delivery",
    "POST /webhooks/_deliveries/{id}/retry",
    "Send a past workspace delivery again, with its original body and signature. Needs a full key.",
  ),
];

export const MCP_TOOL_NAMES: ReadonlySet<string> = new Set(TOOL_CATALOG.map((tool) => tool.name));
