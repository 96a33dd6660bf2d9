import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import { DAY_MS } from "../../clock.ts";
import { preparedRead } from "../../db/compiled.ts";
import type { ApiKeysTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { ForbiddenError, NotFoundError, UnauthorizedError } from "../../errors.ts";
import type { ApiKeyPrincipal, KeyScope } from "../../http/principal.ts";
import { actorOf } from "../../http/principal.ts";
import { newId } from "../../lib/ids.ts";
import { isIpAllowed } from "../../lib/ip.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { randomHex, sha256Hex } from "../../lib/tokens.ts";
import { recordAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { ORG_COLUMNS } from "../orgs/records.ts";
import type { ApiKeyInput, ApiKeySchema } from "./schemas.ts";

type ApiKey = z.infer<typeof ApiKeySchema>;

const TOKEN_PREFIX = "pak_";
const TOKEN_PATTERN = /^pak_[0-9a-f]{64}$/;
/** `lastUsedAt` is kept to this resolution, so a busy key costs one write a minute, not one a request. */
const LAST_USED_RESOLUTION_MS = 60_000;

function toApiKey(row: Selectable<ApiKeysTable>): ApiKey {
  return {
    id: row.id,
    name: row.name,
    scope: row.scope as KeyScope,
    prefix: row.prefix,
    mcpTools: fromJsonColumn<string[] | null>(row.mcp_tools, null),
    expiresAt: row.expires_at,
    lastUsedAt: row.last_used_at,
    createdAt: row.created_at,
    createdBy: row.created_by,
  };
}

export async function createApiKey({ ctx, input }: { ctx: OrgCtx; input: z.infer<typeof ApiKeyInput> }) {
  authorize(ctx, "api_keys:manage");
  const now = ctx.deps.clock.now();
  const token = `${TOKEN_PREFIX}${randomHex(32)}`;
  const row: Selectable<ApiKeysTable> = {
    id: newId("key", now),
    org_id: ctx.org.id,
    name: input.name,
    scope: input.scope,
    prefix: token.slice(0, TOKEN_PREFIX.length + 8),
    token_hash: sha256Hex(token),
    mcp_tools: toJsonColumn(input.mcpTools),
    expires_at: input.expiresInDays ? new Date(now.getTime() + input.expiresInDays * DAY_MS).toISOString() : null,
    last_used_at: null,
    created_at: now.toISOString(),
    created_by: actorOf(ctx.principal).id,
    revoked_at: null,
  };
  await inOrgTransaction(ctx, async (trx) => {
    await trx.insertInto("api_keys").values(row).execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "api_key.created",
      target: { type: "api_key", id: row.id },
      data: { name: row.name, scope: row.scope, prefix: row.prefix, expiresAt: row.expires_at },
    });
  });
  return { apiKey: toApiKey(row), token };
}

/** The org's keys that have not been revoked, newest first (expired ones included). */
export async function listApiKeys({ ctx }: { ctx: OrgCtx }) {
  authorize(ctx, "api_keys:read");
  const rows = await ctx.deps.db
    .selectFrom("api_keys")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .where("revoked_at", "is", null)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .execute();
  return { apiKeys: rows.map(toApiKey) };
}

export async function revokeApiKey({ ctx, id }: { ctx: OrgCtx; id: string }): Promise<void> {
  authorize(ctx, "api_keys:manage");
  const at = ctx.deps.clock.now().toISOString();
  await inOrgTransaction(ctx, async (trx) => {
    const key = await trx
      .updateTable("api_keys")
      .set({ revoked_at: at })
      .where("id", "=", id)
      .where("org_id", "=", ctx.org.id)
      .where("revoked_at", "is", null)
      .returning(["id", "name", "prefix"])
      .executeTakeFirst();
    if (!key) throw new NotFoundError("API key not found");
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "api_key.revoked",
      target: { type: "api_key", id: key.id },
      data: { name: key.name, prefix: key.prefix },
    });
  });
}

/** The key with its org, by token hash: one query on the path of every key-authenticated request. */
const findKeyByHash = preparedRead("plinth_api_key_by_hash", (db) =>
  db
    .selectFrom("api_keys")
    .innerJoin("orgs", "orgs.id", "api_keys.org_id")
    .select(ORG_COLUMNS.map((column) => `orgs.${column}` as const))
    .select([
      "api_keys.id as key_id",
      "api_keys.scope as key_scope",
      "api_keys.mcp_tools as key_mcp_tools",
      "api_keys.expires_at as key_expires_at",
      "api_keys.last_used_at as key_last_used_at",
      "api_keys.revoked_at as key_revoked_at",
    ])
    .where("api_keys.token_hash", "=", "?"),
);

/** When this process last wrote each key's `lastUsedAt`, so concurrent requests do not all write it. */
const lastUsedWrites = new Map<string, number>();

/**
 * Resolves a bearer token to its key and org in one query, on every request: revocation and
 * expiry take effect on the very next call, in every process. Refuses callers outside the
 * org's IP allowlist.
 */
export async function authenticateApiKey(deps: Deps, token: string, clientIp: string | null): Promise<ApiKeyPrincipal> {
  if (!TOKEN_PATTERN.test(token)) throw new UnauthorizedError("invalid API key");
  const row = await findKeyByHash(deps, sha256Hex(token));
  if (!row || row.deleted_at !== null) throw new UnauthorizedError("invalid API key");
  if (row.key_revoked_at !== null) throw new UnauthorizedError("API key has been revoked");
  const now = deps.clock.now();
  if (row.key_expires_at !== null && row.key_expires_at <= now.toISOString()) {
    throw new UnauthorizedError("API key has expired");
  }
  const {
    key_id,
    key_scope,
    key_mcp_tools,
    key_expires_at: _expiresAt,
    key_last_used_at,
    key_revoked_at: _revokedAt,
    ...org
  } = row;
  if (org.ip_allowlist !== "[]" && !isIpAllowed(fromJsonColumn<string[]>(org.ip_allowlist, []), clientIp)) {
    throw new ForbiddenError("this organization does not accept API keys from your IP address");
  }
  const touching = touchLastUsed(deps, key_id, key_last_used_at, now);
  if (touching) await touching;
  return {
    type: "api_key",
    keyId: key_id,
    scope: key_scope as KeyScope,
    mcpTools: fromJsonColumn<string[] | null>(key_mcp_tools, null),
    org,
  };
}

/** Writes `lastUsedAt` when it is older than its resolution; returns nothing (no await) otherwise. */
function touchLastUsed(deps: Deps, keyId: string, stored: string | null, now: Date): Promise<unknown> | undefined {
  const nowMs = now.getTime();
  if (stored !== null && nowMs - Date.parse(stored) < LAST_USED_RESOLUTION_MS) return undefined;
  const written = lastUsedWrites.get(keyId);
  if (written !== undefined && nowMs - written < LAST_USED_RESOLUTION_MS) return undefined;
  if (lastUsedWrites.size > 10_000) lastUsedWrites.clear();
  lastUsedWrites.set(keyId, nowMs);
  return deps.db.updateTable("api_keys").set({ last_used_at: now.toISOString() }).where("id", "=", keyId).execute();
}
