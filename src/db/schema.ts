import type { Generated } from "kysely";

/**
 * Table types for Kysely. Plinth's own tables keep timestamps as ISO-8601 UTC text and JSON as
 * text on both dialects: one schema, one code path, and `toISOString()` text sorts chronologically.
 * The better-auth tables (users, sessions, auth_accounts, verifications) use each dialect's native
 * date and boolean types, as better-auth's adapter expects.
 */
export interface UsersTable {
  id: string;
  name: string;
  email: string;
  email_verified: boolean | number;
  image: string | null;
  created_at: Date | string;
  updated_at: Date | string;
  title: string | null;
  timezone: string | null;
  preferences: string | null;
}

export interface SessionsTable {
  id: string;
  user_id: string;
  token: string;
  expires_at: Date | string;
  ip_address: string | null;
  user_agent: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

export interface OrgsTable {
  id: string;
  slug: string;
  name: string;
  plan_id: string;
  residency: string;
  default_region: string;
  ip_allowlist: string;
  webhook_url: string | null;
  webhook_secret: string | null;
  status: string;
  purpose: string | null;
  team_size: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface MembershipsTable {
  id: string;
  org_id: string;
  account_id: string;
  role: string;
  /** `active`, or `suspended` (by SCIM: listed, but no access). */
  status: Generated<string>;
  /** The identity provider's id for this person (SCIM `externalId`). */
  scim_external_id: Generated<string | null>;
  /** The name the identity provider (SCIM) gives this member here; the account's own name is its holder's. */
  display_name: Generated<string | null>;
  created_at: string;
  updated_at: string;
}

export interface ScimTokensTable {
  org_id: string;
  token_hash: string;
  created_by: string;
  created_at: string;
}

export interface SsoConfigsTable {
  org_id: string;
  /** `oidc` or `saml`. */
  type: string;
  enabled: number;
  /** Lower-case; enforced (password sign-in refused) only once `domain_verified_at` is set. */
  email_domain: string | null;
  default_role: string;
  /** JSON: the IdP settings, secrets included (masked on read). */
  config: string;
  /** The value of the `_plinth-sso.<domain>` TXT record that proves the domain. */
  domain_token: string;
  domain_verified_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface SsoLoginsTable {
  state: string;
  org_id: string;
  nonce: string;
  code_verifier: string;
  return_to: string;
  expires_at: string;
  /** The account whose session started the login: SSO may link an owner's or admin's account only then. */
  account_id: Generated<string | null>;
}

export interface SsoIdentitiesTable {
  org_id: string;
  /**
   * An account linked to the org's identity provider (it signed in through it, or SCIM made it):
   * forgotten when the provider changes, or when another org proves the account's domain.
   */
  account_id: string;
  created_at: string;
}

export interface SsoAssertionsTable {
  /** `<issuer> <assertion ID>`. */
  id: string;
  org_id: string;
  expires_at: string;
}

export interface ScimGroupsTable {
  id: string;
  org_id: string;
  /** A role: `admin`, `developer` or `viewer`. */
  display_name: string;
  external_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface InvitationsTable {
  id: string;
  org_id: string;
  email: string;
  role: string;
  token_hash: string;
  status: string;
  invited_by: string | null;
  expires_at: string;
  created_at: string;
  updated_at: string;
  accepted_at: string | null;
  /** Set when SCIM made the invitation: the membership id it becomes, which is its SCIM User id meanwhile. */
  scim_member_id: Generated<string | null>;
  scim_external_id: Generated<string | null>;
  display_name: Generated<string | null>;
  /** The membership's status once accepted (`suspended` when SCIM deactivated the user); null: active. */
  member_status: Generated<string | null>;
}

export interface ApiKeysTable {
  id: string;
  org_id: string;
  name: string;
  scope: string;
  prefix: string;
  token_hash: string;
  mcp_tools: string | null;
  expires_at: string | null;
  last_used_at: string | null;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
}

export interface AuditEventsTable {
  id: string;
  org_id: string | null;
  action: string;
  actor_type: string;
  actor_id: string;
  actor_email: string | null;
  target_type: string;
  target_id: string;
  data: string | null;
  ip: string | null;
  created_at: string;
}

export interface RateLimitsTable {
  bucket: string;
  /** The window's last minute (Unix ms / 60 000); for a one-minute window, its only one (`RateLimiter.rowOf`). */
  window_start: number;
  hits: number;
}

export interface JobsTable {
  id: string;
  kind: string;
  payload: string;
  status: string;
  attempts: number;
  max_attempts: number;
  timeout_ms: number;
  run_at: string;
  lease_until: string | null;
  locked_by: string | null;
  last_error: string | null;
  idempotency_key: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface JobSchedulesTable {
  name: string;
  next_run_at: string;
  updated_at: string;
}

export interface ProjectsTable {
  id: string;
  org_id: string;
  slug: string;
  name: string;
  status: string;
  environment: string;
  /** Whether the workspace's own sign-up is `open` or `closed` (DESIGN §16). */
  sign_up: Generated<string>;
  region: string;
  db_type: string;
  template: string;
  template_version: string;
  admin_token_hash: string;
  failure_reason: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  purge_after: string | null;
  purged_at: string | null;
  /** Since when the workspace records its history (continuous history, DESIGN §9); null: not yet. */
  history_since: string | null;
}

export interface BranchesTable {
  id: string;
  project_id: string;
  name: string;
  pr_number: number | null;
  /** creating | active | failed */
  status: string;
  admin_token_hash: string;
  /** The instant of the parent's data the branch was copied from (ISO-8601). */
  source_timestamp: string;
  error: string | null;
  created_at: string;
  updated_at: string;
}

export interface DeploysTable {
  id: string;
  project_id: string;
  kind: string;
  status: string;
  from_version: string | null;
  to_version: string | null;
  error: string | null;
  created_at: string;
  finished_at: string | null;
}

export interface BackupsTable {
  id: string;
  project_id: string;
  /** `auto` (daily, expires after the restore window) or `manual` (kept until deleted). */
  kind: string;
  /** `pending`, `completed` or `failed`. */
  status: string;
  size_bytes: number | string | null;
  /** The workspace's template version the snapshot was taken at (raised when a restore migrates it). */
  template_version: string;
  error: string | null;
  created_at: string;
  completed_at: string | null;
  expires_at: string | null;
  restored_at: string | null;
}

export interface TenantErrorsTable {
  id: string;
  project_id: string;
  at: string;
  method: string;
  /** The request's path, without its query. */
  path: string;
  status: number;
  code: string;
  message: string;
  request_id: string | null;
  /** 1, or 0 for a request without valid workspace credentials (kept apart, DESIGN §10). */
  authenticated: Generated<number>;
}

export interface DomainsTable {
  id: string;
  project_id: string;
  /** Lower-case, as given (punycode for IDNs). */
  hostname: string;
  /** `pending`, `active` or `failed`. */
  status: string;
  /** The random part of the TXT record's value. */
  token: string;
  /** Checks made by the re-check job since the last verify request (its backoff). */
  attempts: number;
  next_check_at: string | null;
  last_checked_at: string | null;
  verified_at: string | null;
  error: string | null;
  created_at: string;
}

export interface UsageDailyTable {
  /** The UTC day, `YYYY-MM-DD`. */
  date: string;
  project_id: string;
  org_id: string;
  /** The project's slug that day (kept after the project is purged). */
  project_slug: string;
  requests: number | string;
  d1: number | string;
  r2: number | string;
  /** When d1 and r2 were last measured that day; null: not yet (they read 0). */
  measured_at: string | null;
}

export interface AlarmsTable {
  id: string;
  org_id: string;
  /** `requests`, `d1` or `r2`. */
  metric: string;
  threshold_pct: number;
  last_fired_at: string | null;
  created_at: string;
}

export interface SubscriptionsTable {
  org_id: string;
  plan_id: string;
  /** `monthly` or `annual`. */
  interval: string;
  /** `active`, `past_due` or `canceled`. */
  status: string;
  current_period_start: string;
  current_period_end: string;
  cancel_at_period_end: number;
  /** `test` or `stripe`. */
  provider: string;
  provider_subscription_id: string | null;
  /** Unix seconds of the last provider event applied. */
  provider_event_at: number | string;
  created_at: string;
  updated_at: string;
}

export interface CheckoutsTable {
  id: string;
  org_id: string;
  /** `plan` or `pack`. */
  kind: string;
  plan_id: string | null;
  interval: string | null;
  pack_type: string | null;
  /** `open`, `completed` or `expired`. */
  status: string;
  url: string;
  provider: string;
  /** The provider's own id for it (a Stripe Checkout Session's). */
  provider_ref: string | null;
  expires_at: string;
  completed_at: string | null;
  created_by: string;
  created_at: string;
}

export interface InvoicesTable {
  id: string;
  org_id: string;
  number: string;
  /** `paid`, `open` or `void`. */
  status: string;
  amount_cents: number | string;
  currency: string;
  period_start: string;
  period_end: string;
  /** JSON: `[{description, amountCents}]`. */
  lines: string;
  provider_ref: string | null;
  created_at: string;
}

export interface PacksTable {
  id: string;
  org_id: string;
  /** The metric it adds to: `requests`, `neurons`, `r2` or `d1`. */
  type: string;
  amount: number | string;
  period_start: string;
  period_end: string;
  checkout_id: string;
  created_at: string;
}

export interface BillingCustomersTable {
  org_id: string;
  provider: string;
  customer_id: string;
}

export interface BillingEventsTable {
  provider: string;
  event_id: string;
  received_at: string;
}

export interface WebhooksTable {
  id: string;
  org_id: string;
  /** Null for org webhooks; the project for workspace webhooks. */
  project_id: string | null;
  name: string | null;
  url: string;
  events: string;
  secret: string | null;
  headers: string | null;
  payload_fields: string | null;
  active: number;
  consecutive_failures: number;
  last_failure_at: string | null;
  disabled_reason: string | null;
  created_by: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface WebhookDeliveriesTable {
  id: string;
  org_id: string;
  project_id: string | null;
  /** `webhook`, `org_url` or `integration`. */
  target_type: string;
  target_id: string;
  event: string;
  url: string;
  body: string;
  headers: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  attempt: number;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  response_body: string | null;
  /** The headers exactly as sent, signatures included (no secrets: the secret never travels). */
  request_headers: string | null;
  /** Where it was sent; null for an integration's (its URL may be a credential) and before 0010. */
  url: string | null;
  created_at: string;
}

export interface WorkspaceOutboxHintsTable {
  project_id: string;
  created_at: string;
}

export interface IntegrationsTable {
  id: string;
  org_id: string;
  kind: string;
  config: string;
  events: string | null;
  created_by: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface NotificationsTable {
  id: string;
  org_id: string;
  account_id: string;
  kind: string;
  title: string;
  body: string;
  data: string | null;
  read_at: string | null;
  created_at: string;
}

/** A POST's `Idempotency-Key`, per caller: the request's fingerprint, then its response. */
export interface IdempotencyKeysTable {
  /** SHA-256 of the caller's credential (bearer token or session cookie). */
  scope: string;
  /** SHA-256 of the Idempotency-Key. */
  key: string;
  /** SHA-256 of the method, path, query and body. */
  fingerprint: string;
  /** A random mark of the request holding the key: only it records the answer. */
  holder: string;
  /** The response (status, type, body), AES-256-GCM under a key derived from credential and key; null while the request runs. */
  response: string | null;
  /** While running: when another request may take the key over (its process died). */
  locked_until: string;
  created_at: string;
}

export interface Database {
  users: UsersTable;
  sessions: SessionsTable;
  orgs: OrgsTable;
  memberships: MembershipsTable;
  invitations: InvitationsTable;
  api_keys: ApiKeysTable;
  audit_events: AuditEventsTable;
  rate_limits: RateLimitsTable;
  jobs: JobsTable;
  job_schedules: JobSchedulesTable;
  projects: ProjectsTable;
  deploys: DeploysTable;
  branches: BranchesTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  integrations: IntegrationsTable;
  notifications: NotificationsTable;
  workspace_outbox_hints: WorkspaceOutboxHintsTable;
  idempotency_keys: IdempotencyKeysTable;
  backups: BackupsTable;
  tenant_errors: TenantErrorsTable;
  domains: DomainsTable;
  usage_daily: UsageDailyTable;
  alarms: AlarmsTable;
  subscriptions: SubscriptionsTable;
  checkouts: CheckoutsTable;
  invoices: InvoicesTable;
  packs: PacksTable;
  billing_customers: BillingCustomersTable;
  billing_events: BillingEventsTable;
  scim_tokens: ScimTokensTable;
  scim_groups: ScimGroupsTable;
  sso_configs: SsoConfigsTable;
  sso_logins: SsoLoginsTable;
  sso_assertions: SsoAssertionsTable;
  sso_identities: SsoIdentitiesTable;
}
