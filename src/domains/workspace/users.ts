import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from "node:crypto";
import { sql } from "kysely";
import { DAY_MS } from "../../clock.ts";
import { isUniqueViolation } from "../../db/database.ts";
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError } from "../../errors.ts";
import { isIdOf, newId } from "../../lib/ids.ts";
import { randomHex, sha256Hex } from "../../lib/tokens.ts";
import { requireAdmin, type WorkspaceCtx } from "./access.ts";
import { auditEvent } from "./audit.ts";
import { writeWithEvent } from "./writes.ts";

/** scrypt with 16 MiB of memory per hash: memory-hard, so guessing at scale stays expensive. */
const KDF = { N: 16_384, r: 8, p: 1, keyLength: 32, maxmem: 64 * 1024 * 1024 };
const SESSION_DAYS = 30;

function derive(password: string, salt: Buffer, options: ScryptOptions & { N: number }, keyLength: number) {
  return new Promise<Buffer>((resolve, reject) =>
    scrypt(password, salt, keyLength, options, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, KDF, KDF.keyLength);
  return `scrypt$${KDF.N}$${KDF.r}$${KDF.p}$${salt.toString("base64")}$${key.toString("base64")}`;
}

async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64");
  const key = await derive(
    password,
    Buffer.from(salt, "base64"),
    { N: Number(n), r: Number(r), p: Number(p), maxmem: KDF.maxmem },
    expected.length,
  );
  return timingSafeEqual(key, expected);
}

/** A password hash that never matches, so unknown e-mails take as long as wrong passwords. */
const DECOY_HASH = `scrypt$${KDF.N}$${KDF.r}$${KDF.p}$${Buffer.alloc(16).toString("base64")}$${Buffer.alloc(32).toString("base64")}`;

interface UserRow {
  id: string;
  email: string;
  password_hash: string;
  created_at: string;
  updated_at: string;
}

/** A workspace user as the API returns it (and as events carry it): never the password hash. */
function toUser(row: UserRow) {
  return { id: row.id, email: row.email, createdAt: row.created_at, updatedAt: row.updated_at };
}

async function startSession(ctx: WorkspaceCtx, trx: WorkspaceCtx["db"], userId: string): Promise<string> {
  const token = `wsu_${randomHex(32)}`;
  const now = ctx.deps.clock.now();
  await trx
    .insertInto("user_sessions")
    .values({
      token_hash: sha256Hex(token),
      user_id: userId,
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + SESSION_DAYS * DAY_MS).toISOString(),
    })
    .execute();
  return token;
}

/**
 * The project's `signUp` switch (DESIGN §16); a branch follows its project's. Read here, not on
 * every workspace request: only sign-up needs it.
 */
async function assertSignUpOpen(ctx: WorkspaceCtx): Promise<void> {
  const { db } = ctx.deps;
  const row = isIdOf("brn", ctx.project.id)
    ? await db
        .selectFrom("branches")
        .innerJoin("projects", "projects.id", "branches.project_id")
        .select("projects.sign_up")
        .where("branches.id", "=", ctx.project.id)
        .executeTakeFirst()
    : await db.selectFrom("projects").select("sign_up").where("id", "=", ctx.project.id).executeTakeFirst();
  if (row?.sign_up === "closed") throw new ForbiddenError("sign-up is closed for this project");
}

export async function signUpUser({ ctx, input }: { ctx: WorkspaceCtx; input: { email: string; password: string } }) {
  await assertSignUpOpen(ctx);
  const email = input.email.trim();
  const passwordHash = await hashPassword(input.password);
  // Two sign-ups racing past the check meet the unique e-mail index (template 1.1.0): the loser's
  // transaction, event included, rolls back. A workspace still on 1.0.0 has no such index, so on
  // PostgreSQL sign-ups of one e-mail (any case) take a lock for the check and insert; SQLite
  // writes one transaction at a time.
  return writeWithEvent(ctx, async (trx) => {
    if (ctx.deps.dialect === "postgres") {
      await sql`select pg_advisory_xact_lock(hashtext(${`${ctx.project.id}:${email.toLowerCase()}`}))`.execute(trx);
    }
    const taken = await trx
      .selectFrom("users")
      .select("id")
      .where((eb) => eb(eb.fn("lower", ["email"]), "=", email.toLowerCase()))
      .executeTakeFirst();
    if (taken) throw new ConflictError("a user with this e-mail already exists");
    const at = ctx.deps.clock.now().toISOString();
    const row: UserRow = { id: newId("usr"), email, password_hash: passwordHash, created_at: at, updated_at: at };
    await trx
      .insertInto("users")
      .values(row)
      .execute()
      .catch((error: unknown) => {
        throw isUniqueViolation(error) ? new ConflictError("a user with this e-mail already exists") : error;
      });
    const token = await startSession(ctx, trx, row.id);
    const user = toUser(row);
    return { result: { user, token }, event: { channel: "auth", event: "signed_up", data: user } };
  });
}

export async function signInUser({ ctx, input }: { ctx: WorkspaceCtx; input: { email: string; password: string } }) {
  const row = (await ctx.db
    .selectFrom("users")
    .selectAll()
    .where((eb) => eb(eb.fn("lower", ["email"]), "=", input.email.trim().toLowerCase()))
    .executeTakeFirst()) as UserRow | undefined;
  const valid = await verifyPassword(input.password, row?.password_hash ?? DECOY_HASH);
  if (!row || !valid) throw new UnauthorizedError("invalid e-mail or password");
  return writeWithEvent(ctx, async (trx) => {
    // Deleted while the password was being checked: no session for a user that is gone.
    const still = await trx.selectFrom("users").select("id").where("id", "=", row.id).executeTakeFirst();
    if (!still) throw new UnauthorizedError("invalid e-mail or password");
    const token = await startSession(ctx, trx, row.id);
    const user = toUser(row);
    return { result: { user, token }, event: { channel: "auth", event: "signed_in", data: user } };
  });
}

/** Ends the calling user's session (its token stops working). */
export async function signOutUser({ ctx }: { ctx: WorkspaceCtx }): Promise<void> {
  const caller = ctx.caller;
  if (caller.kind !== "user") throw new UnauthorizedError("sign-out needs a workspace user's token");
  await writeWithEvent(ctx, async (trx) => {
    const ended = await trx.deleteFrom("user_sessions").where("token_hash", "=", caller.tokenHash).executeTakeFirst();
    // A sign-out that overlapped another of the same session ended nothing: one event only.
    if (Number(ended.numDeletedRows) === 0) return { result: undefined, event: null };
    const row = (await trx.selectFrom("users").selectAll().where("id", "=", caller.userId).executeTakeFirst()) as
      | UserRow
      | undefined;
    return {
      result: undefined,
      event: row ? { channel: "auth", event: "signed_out", data: toUser(row) } : null,
    };
  });
}

/** Deletes a user and their sessions (admin). */
/** The workspace's users, oldest first, paged (admin): never a password hash. */
export async function listUsers({
  ctx,
  query: page = {},
}: {
  ctx: WorkspaceCtx;
  query?: { limit?: number | undefined; offset?: number | undefined };
}) {
  requireAdmin(ctx, false);
  const rows = (await ctx.db
    .selectFrom("users")
    .selectAll()
    .orderBy("created_at")
    .orderBy("id")
    .limit(page.limit ?? 50)
    .offset(page.offset ?? 0)
    .execute()) as UserRow[];
  return { users: rows.map(toUser) };
}

export async function deleteUser({ ctx, id }: { ctx: WorkspaceCtx; id: string }): Promise<void> {
  requireAdmin(ctx, true);
  await writeWithEvent(ctx, async (trx) => {
    await trx.deleteFrom("user_sessions").where("user_id", "=", id).execute();
    // The row as this delete removed it: of two deletes at once, only one finds it.
    const removed = (await trx.deleteFrom("users").where("id", "=", id).returningAll().executeTakeFirst()) as
      | UserRow
      | undefined;
    if (!removed) throw new NotFoundError("user not found");
    return {
      result: undefined,
      event: { channel: "auth", event: "user_deleted", data: toUser(removed) },
      audit: auditEvent(ctx, "workspace_user.deleted", { type: "workspace_user", id: removed.id }),
    };
  });
}
