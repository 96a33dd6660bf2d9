/**
 * Plinth's SDK (`plinth/client`): typed clients for the control API and a project's workspace
 * API, on openapi-fetch, over types generated from the OpenAPI documents the app serves
 * (`generated/`, rewritten by `npm run generate`). It runs in Node ≥ 20 and in browsers, and
 * imports nothing of the server's.
 *
 *   const plinth = createPlinthClient({ url: "https://plinth.example.com", apiKey });
 *   const { data, error } = await plinth.GET("/org/{slug}/projects", { params: { path: { slug } } });
 */
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components as ControlComponents, paths as ControlPaths } from "./generated/control.ts";
import type { components as WorkspaceComponents, paths as WorkspacePaths } from "./generated/workspace.ts";

export type { ControlPaths, WorkspacePaths };

type Control = ControlComponents["schemas"];
type Workspace = WorkspaceComponents["schemas"];

/** The error envelope every non-2xx answer carries; `error.code` is one of the API's codes. */
export type PlinthError = Control["Error"];
/** The codes an error envelope may carry. */
export type ErrorCode = PlinthError["error"]["code"];

export type Account = Control["Account"];
export type Org = Control["Org"];
export type Member = Control["Member"];
export type ApiKey = Control["ApiKey"];
export type AuditEvent = Control["AuditEvent"];
export type Project = Control["Project"];
export type Deploy = Control["Deploy"];
export type Backup = Control["Backup"];
export type RestoreWindow = Control["RestoreWindow"];
export type Branch = Control["Branch"];
export type Domain = Control["Domain"];
export type Webhook = Control["Webhook"];
export type WebhookDelivery = Control["WebhookDelivery"];
export type Integration = Control["Integration"];
export type Notification = Control["Notification"];
export type Plan = Control["Plan"];
export type Usage = Control["Usage"];
export type UsageHistory = Control["UsageHistory"];
export type Alarm = Control["Alarm"];
export type TenantError = Control["TenantError"];
export type Subscription = Control["Subscription"];
export type Invoice = Control["Invoice"];
export type SsoConfig = NonNullable<Control["SsoConfig"]>;

export type WorkspaceCollection = Workspace["WorkspaceCollection"];
export type WorkspaceItem = Workspace["WorkspaceItem"];
export type WorkspaceUser = Workspace["WorkspaceUser"];
export type WorkspaceFile = Workspace["WorkspaceFile"];
export type WorkspaceWebhook = Workspace["WorkspaceWebhook"];

export type PlinthClient = Client<ControlPaths>;
export type WorkspaceClient = Client<WorkspacePaths>;

export interface PlinthClientOptions {
  /** Where Plinth is: its PUBLIC_URL (`https://plinth.example.com`); the API is under `/api`. */
  url: string;
  /** An API key (`pak_…`), sent as `Authorization: Bearer`. Without one, send a session cookie in `headers`. */
  apiKey?: string;
  /** A `fetch` of your own (a test double, a proxy-aware one); the global one by default. */
  fetch?: ClientOptions["fetch"];
  headers?: Record<string, string>;
}

/** A client of the control API (`{url}/api`), typed by its OpenAPI document. */
export function createPlinthClient(options: PlinthClientOptions): PlinthClient {
  return createClient<ControlPaths>({
    baseUrl: `${options.url.replace(/\/+$/, "")}/api`,
    headers: { ...options.headers, ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

export interface WorkspaceClientOptions {
  /** The project's (or branch's) `workspaceUrl`; its API is under `/api`. */
  workspaceUrl: string;
  /** The workspace admin token (`wsa_…`), a workspace user's token, or an org API key. */
  token?: string;
  fetch?: ClientOptions["fetch"];
  headers?: Record<string, string>;
}

/** A client of a project's workspace API (`{workspaceUrl}/api`), typed by its OpenAPI document. */
export function createWorkspaceClient(options: WorkspaceClientOptions): WorkspaceClient {
  return createClient<WorkspacePaths>({
    baseUrl: `${options.workspaceUrl.replace(/\/+$/, "")}/api`,
    headers: { ...options.headers, ...(options.token ? { authorization: `Bearer ${options.token}` } : {}) },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}
