import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import type { IntegrationsTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { type FieldIssue, ValidationError } from "../../errors.ts";
import { actorOf } from "../../http/principal.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { isMasked, maskSecret } from "../../lib/mask.ts";
import { recordAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { toFieldIssues } from "../fields.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { ownedRecords } from "../owned-records.ts";
import { sendTestDelivery } from "../webhooks/delivery.ts";
import { assertDeliverableUrl } from "../webhooks/service.ts";
import { type IntegrationKind, PROVIDER_CONFIG, providerRequest, unconfigured } from "./providers.ts";
import {
  type IntegrationInput,
  MAX_CONFIG_KEY_LENGTH,
  MAX_CONFIG_KEYS,
  type UpdateIntegrationInput,
} from "./schemas.ts";
import { integrationConfig, sealIntegrationConfig } from "./sealed-config.ts";

type IntegrationRow = Selectable<IntegrationsTable>;

/** Parts of a name that say a config value is a credential, whatever the provider makes of it. */
const SECRET_PART =
  /secret|token|passw|passphrase|passcode|pwd|credential|authoriz|signing|(api|app|private)[-_]?keys?|connection.?string|database.?url/i;
/**
 * Words that do, as a whole word of the name (a plural too): `pin`, `sessionId`, `cookies`. So
 * does any word that ends in `key` (`encryptionKey`, `access_key_id`, `HMACKey`, `hotkeys`).
 */
const SECRET_WORDS = new Set([
  "pass",
  "pin",
  "otp",
  "jwt",
  "bearer",
  "auth",
  "cookie",
  "session",
  "hmac",
  "signature",
  "sig",
  "dsn",
]);

/**
 * A name's words: split at punctuation and at camelCase humps (`HMACKey`: HMAC, Key), lower-cased.
 * Each pattern looks at most three characters from where it stands, so the cost stays linear in
 * the name's length (a `[A-Z]+` here would rescan a run of capitals from each of its letters).
 */
function wordsOf(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z])(?=[A-Z][a-z])/g, "$1 ")
    .toLowerCase()
    .split(/[^a-z0-9]+/);
}

/** Whether a config key's name says it holds a secret; erring towards masking. */
function isSecretName(name: string): boolean {
  return (
    SECRET_PART.test(name) ||
    wordsOf(name).some(
      (word) => SECRET_WORDS.has(word) || SECRET_WORDS.has(word.replace(/s$/, "")) || /keys?$/.test(word),
    )
  );
}

type SecretKeyTest = (key: string) => boolean;

/** Below the top level of a config, a key holds a secret when its name says so. */
const nestedSecretKey: SecretKeyTest = isSecretName;

/**
 * Whether a top-level config key holds a secret: one the provider names (the webhook URL of
 * slack and discord, datadog's apiKey, github's token), or any other key (config takes arbitrary
 * values) whose name says so, such as `appKey`, `signingSecret` or `password`.
 */
function secretKeyOf(kind: IntegrationKind): SecretKeyTest {
  const named = PROVIDER_CONFIG[kind].secrets as readonly string[];
  return (key) => named.includes(key) || isSecretName(key);
}

function asObject(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** `value` with its secrets masked, at any depth (inside nested objects and arrays too). */
function masked(value: unknown, isSecret: SecretKeyTest): unknown {
  if (Array.isArray(value)) return value.map((entry) => masked(entry, nestedSecretKey));
  const object = asObject(value);
  if (!object) return value;
  return Object.fromEntries(
    Object.entries(object).map(([key, entry]) => [
      key,
      isSecret(key) ? maskSecret(entry) : masked(entry, nestedSecretKey),
    ]),
  );
}

/**
 * `sent` with each secret that came back masked (as read) replaced by the value stored at the
 * same place, so a read-modify-write keeps it; a masked value with nothing stored there is dropped.
 */
function unmasked(sent: unknown, stored: unknown, isSecret: SecretKeyTest): unknown {
  if (Array.isArray(sent)) {
    return sent.map((entry, i) => unmasked(entry, Array.isArray(stored) ? stored[i] : undefined, nestedSecretKey));
  }
  const object = asObject(sent);
  if (!object) return sent;
  const before = asObject(stored) ?? {};
  return Object.fromEntries(
    Object.entries(object).map(([key, entry]) => {
      const previous = Object.hasOwn(before, key) ? before[key] : undefined;
      return [key, isSecret(key) && isMasked(entry) ? previous : unmasked(entry, previous, nestedSecretKey)];
    }),
  );
}

function toIntegration(deps: Deps, row: IntegrationRow) {
  const kind = row.kind as IntegrationKind;
  const config = integrationConfig(deps, row);
  return {
    id: row.id,
    kind,
    config: masked(config, secretKeyOf(kind)) as Record<string, unknown>,
    configured: unconfigured(kind, config) === null,
    events: fromJsonColumn<string[] | null>(row.events, null),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Where `value` holds a masked secret (as read), as `config.…` paths. */
function maskedPaths(value: unknown, path: string, found: string[] = []): string[] {
  if (isMasked(value)) found.push(path);
  else if (Array.isArray(value)) {
    for (const [i, entry] of value.entries()) maskedPaths(entry, `${path}.${i}`, found);
  } else if (typeof value === "object" && value !== null) {
    for (const [key, entry] of Object.entries(value)) maskedPaths(entry, `${path}.${key}`, found);
  }
  return found;
}

/**
 * A secret kept by sending it back masked may not follow a change of where the secrets go
 * (`apiUrl`, a Datadog `site`): whoever can edit the integration could otherwise send a
 * credential they never saw to an address of their choosing. Such a change needs them again.
 */
function assertSecretsResent(
  kind: IntegrationKind,
  sent: unknown,
  stored: Record<string, unknown>,
  next: Record<string, unknown>,
) {
  const moved = PROVIDER_CONFIG[kind].destination.filter(
    (key: string) => JSON.stringify(stored[key] ?? null) !== JSON.stringify(next[key] ?? null),
  );
  if (moved.length === 0) return;
  const kept = maskedPaths(sent, "config");
  if (kept.length === 0) return;
  const where = moved.map((key: string) => `config.${key}`).join(" and ");
  throw new ValidationError(
    kept.map((path) => ({ path, message: `must be sent again, not masked, when ${where} changes` })),
  );
}

/**
 * Config values are arbitrary (SPEC), but every key is read for a secret's name on every read of
 * the integration, so keys are bounded in number and length at any depth. Nesting is bounded
 * already: the router refuses a body nested too deep before a handler runs.
 */
function configKeyIssues(config: Record<string, unknown>): FieldIssue[] {
  const issues: FieldIssue[] = [];
  let keys = 0;
  const visit = (value: unknown, path: string) => {
    if (Array.isArray(value)) {
      for (const [i, entry] of value.entries()) visit(entry, `${path}.${i}`);
      return;
    }
    for (const [key, entry] of Object.entries(asObject(value) ?? {})) {
      keys += 1;
      if (key.length > MAX_CONFIG_KEY_LENGTH) {
        issues.push({ path: `${path}.${key}`, message: `is a key of more than ${MAX_CONFIG_KEY_LENGTH} characters` });
      }
      visit(entry, `${path}.${key}`);
    }
  };
  visit(config, "config");
  if (keys > MAX_CONFIG_KEYS) {
    issues.push({ path: "config", message: `must hold at most ${MAX_CONFIG_KEYS} keys, nested ones included` });
  }
  return issues;
}

/**
 * Checks `config`'s keys, then `config` against what the provider needs (422 naming
 * `config.<field>`), URLs included.
 * `partial`: only the provider's fields that are present are checked (SPEC: at create, `config`
 * is an object with arbitrary values); the integration stays unconfigured until it has them all.
 */
async function validConfig(
  ctx: OrgCtx,
  kind: IntegrationKind,
  config: Record<string, unknown>,
  { partial }: { partial: boolean },
) {
  const keyIssues = configKeyIssues(config);
  if (keyIssues.length > 0) throw new ValidationError(keyIssues);
  const schema = PROVIDER_CONFIG[kind].schema;
  const parsed = (partial ? schema.partial() : schema).safeParse(config);
  if (!parsed.success) {
    throw new ValidationError(
      toFieldIssues(parsed.error, "config").map((issue) => ({ ...issue, path: `config.${issue.path}` })),
    );
  }
  const value = parsed.data as Record<string, unknown>;
  for (const key of ["webhookUrl", "apiUrl"]) {
    if (typeof value[key] === "string") await assertDeliverableUrl(ctx.deps, value[key], `config.${key}`);
  }
  return value;
}

const integrations = ownedRecords("integrations", "integration");
const ownedBy = (ctx: OrgCtx) => ({ org_id: ctx.org.id });

export async function createIntegration({ ctx, input }: { ctx: OrgCtx; input: z.infer<typeof IntegrationInput> }) {
  authorize(ctx, "integrations:manage");
  // Without a config, or with only part of one (SPEC: optional, arbitrary values), the integration
  // is saved unconfigured: each attempt fails naming what it needs, until a PATCH gives it.
  const config = input.config === undefined ? {} : await validConfig(ctx, input.kind, input.config, { partial: true });
  const now = ctx.deps.clock.now();
  const id = newId("int", now);
  const row: IntegrationRow = {
    id,
    org_id: ctx.org.id,
    kind: input.kind,
    config: sealIntegrationConfig(ctx.deps, id, config),
    events: input.events && input.events.length > 0 ? toJsonColumn(input.events) : null,
    created_by: actorOf(ctx.principal).id,
    created_at: now.toISOString(),
    updated_at: now.toISOString(),
    deleted_at: null,
  };
  await inOrgTransaction(ctx, async (trx) => {
    await trx.insertInto("integrations").values(row).execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "integration.created",
      target: { type: "integration", id: row.id },
      data: { kind: row.kind, events: input.events ?? null },
    });
  });
  return { integration: toIntegration(ctx.deps, row) };
}

export async function listIntegrations({ ctx }: { ctx: OrgCtx }) {
  authorize(ctx, "integrations:read");
  const rows = await ctx.deps.db
    .selectFrom("integrations")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .where("deleted_at", "is", null)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
  return { integrations: rows.map((row) => toIntegration(ctx.deps, row)) };
}

export async function getIntegration({ ctx, id }: { ctx: OrgCtx; id: string }) {
  authorize(ctx, "integrations:read");
  return { integration: toIntegration(ctx.deps, await integrations.find(ctx.deps, ownedBy(ctx), id)) };
}

/** Replaces `config` (validated whole) and/or `events`. */
export async function updateIntegration({
  ctx,
  id,
  input,
}: {
  ctx: OrgCtx;
  id: string;
  input: z.infer<typeof UpdateIntegrationInput>;
}) {
  authorize(ctx, "integrations:manage");
  const current = await integrations.find(ctx.deps, ownedBy(ctx), id);
  if (input.kind !== undefined && input.kind !== current.kind) {
    throw new ValidationError([
      { path: "kind", message: `is ${current.kind} and cannot change; create another integration instead` },
    ]);
  }
  // Nothing to change (`{}`): nothing is written or audited, as for the org and its projects.
  if (input.config === undefined && input.events === undefined)
    return { integration: toIntegration(ctx.deps, current) };
  const changes: Partial<IntegrationRow> = {};
  if (input.config !== undefined) {
    const kind = current.kind as IntegrationKind;
    const stored = integrationConfig(ctx.deps, current);
    // A secret sent back as read (masked) means "unchanged", so a read-modify-write keeps it.
    // A PATCH replaces the config, so it must be whole: one that left out a credential would
    // otherwise switch a working integration off without a word.
    const config = await validConfig(
      ctx,
      kind,
      unmasked(input.config, stored, secretKeyOf(kind)) as Record<string, unknown>,
      { partial: false },
    );
    assertSecretsResent(kind, input.config, stored, config);
    changes.config = sealIntegrationConfig(ctx.deps, id, config);
  }
  if (input.events !== undefined) {
    changes.events = input.events && input.events.length > 0 ? toJsonColumn(input.events) : null;
  }
  // A delete that committed since the read above makes this a 404.
  const updated = await inOrgTransaction(ctx, (trx) =>
    integrations.change(
      trx,
      ctx.deps,
      ownedBy(ctx),
      id,
      () => ({ ...changes, updated_at: ctx.deps.clock.now().toISOString() }),
      () =>
        recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: "integration.updated",
          target: { type: "integration", id },
          data: { fields: Object.keys(input).filter((field) => field !== "kind") },
        }),
    ),
  );
  return { integration: toIntegration(ctx.deps, updated) };
}

export async function deleteIntegration({ ctx, id }: { ctx: OrgCtx; id: string }): Promise<void> {
  authorize(ctx, "integrations:manage");
  await inOrgTransaction(ctx, (trx) =>
    integrations.change(
      trx,
      ctx.deps,
      ownedBy(ctx),
      id,
      () => ({ deleted_at: ctx.deps.clock.now().toISOString() }),
      (current) =>
        recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: "integration.deleted",
          target: { type: "integration", id },
          data: { kind: current.kind },
        }),
    ),
  );
}

/** Sends a provider-shaped sample (`webhook.test`) now and returns the delivery after one attempt. */
export async function testIntegration({ ctx, id }: { ctx: OrgCtx; id: string }) {
  authorize(ctx, "integrations:manage");
  const integration = await integrations.find(ctx.deps, ownedBy(ctx), id);
  const request = providerRequest(integration.kind as IntegrationKind, integrationConfig(ctx.deps, integration), {
    event: "webhook.test",
    payload: { integrationId: id, message: "This is a test from Plinth." },
    timestamp: Math.floor(ctx.deps.clock.now().getTime() / 1000),
    org: { slug: ctx.org.slug, name: ctx.org.name },
  });
  return {
    delivery: await sendTestDelivery(
      ctx.deps,
      ctx.org.id,
      { targetType: "integration", targetId: id, ...request },
      {
        audit: (trx, deliveryId) =>
          recordAudit(trx, ctx, {
            orgId: ctx.org.id,
            action: "integration.tested",
            target: { type: "integration", id },
            data: { deliveryId },
          }),
      },
    ),
  };
}

/** Seals integration configs stored unsealed or under a previous key (start-up; see SecretBox). */
export async function resealIntegrationSecrets(deps: Deps): Promise<void> {
  const rows = await deps.db.selectFrom("integrations").select(["id", "config"]).execute();
  for (const row of rows) {
    if (!deps.secrets.needsResealing(row.config)) continue;
    // Only if unchanged since read: a concurrent update has sealed its own value.
    await deps.db
      .updateTable("integrations")
      .set({ config: sealIntegrationConfig(deps, row.id, integrationConfig(deps, row)) })
      .where("id", "=", row.id)
      .where("config", "=", row.config)
      .execute();
  }
}
