import type { Db } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { newId } from "../../lib/ids.ts";

/**
 * Makes an account (better-auth's `users` row, in each dialect's own date and boolean types)
 * without a password, for a person an org's identity provider vouches for (through SSO or SCIM;
 * only for an address of the org's proven domain), linked to that identity provider
 * (`sso_identities`). Returns the account's id.
 */
export async function createIdentityAccount(
  trx: Db,
  deps: Deps,
  orgId: string,
  person: { email: string; name: string; emailVerified: boolean },
): Promise<string> {
  const now = deps.clock.now();
  const id = newId("acct", now);
  const postgres = deps.dialect === "postgres";
  await trx
    .insertInto("users")
    .values({
      id,
      name: person.name,
      email: person.email,
      email_verified: postgres ? person.emailVerified : Number(person.emailVerified),
      image: null,
      created_at: postgres ? now : now.toISOString(),
      updated_at: postgres ? now : now.toISOString(),
      title: null,
      timezone: null,
      preferences: null,
    })
    .execute();
  await rememberIdentity(trx, deps, orgId, id);
  return id;
}

/** Links the account to the org's identity provider (once; linking again changes nothing). */
export async function rememberIdentity(trx: Db, deps: Deps, orgId: string, accountId: string): Promise<void> {
  await trx
    .insertInto("sso_identities")
    .values({ org_id: orgId, account_id: accountId, created_at: deps.clock.now().toISOString() })
    .onConflict((oc) => oc.columns(["org_id", "account_id"]).doNothing())
    .execute();
}
