import { type SqlBool, sql } from "kysely";
import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { Job } from "../../jobs/queue.ts";
import { randomToken, sha256Hex } from "../../lib/tokens.ts";

/** How often a resend's mail looks again whether the mail before it has gone out. */
const TURN_POLL_MS = 200;

/**
 * Whether this job's mail is still the one to send, once every older mail of the invitation has
 * gone out: each mail mints the token that replaces the one before, so they must go out in the
 * order they were asked for, or the last to arrive would carry a token that no longer works.
 * False when a newer job (a resend since) exists: that one sends. An older job whose lease has
 * lapsed (its worker died) is not waited for; run again, it finds this one newer and stands down.
 */
async function isTurnOf(deps: Deps, invitationId: string, job: Job, signal: AbortSignal): Promise<boolean> {
  // Payloads are JSON text written by `queueInvitationMail` (service.ts); `_` is a LIKE wildcard, so escaped.
  const member = JSON.stringify({ invitationId }).slice(1, -1);
  const pattern = `%${member.replace(/[\\%_]/g, "\\$&")}%`;
  for (;;) {
    const now = deps.clock.now().toISOString();
    const others = await deps.db
      .selectFrom("jobs")
      .select(["id", "status", "lease_until"])
      .where("kind", "=", "invitation.send")
      .where(sql<SqlBool>`${sql.ref("payload")} like ${pattern} escape '\\'`)
      .where("id", "!=", job.id)
      .execute();
    if (others.some((other) => other.id > job.id)) return false;
    const sending = others.some(
      (other) => other.status === "running" && other.lease_until !== null && other.lease_until > now,
    );
    if (!sending) return true;
    await new Promise((resolve) => setTimeout(resolve, TURN_POLL_MS));
    if (signal.aborted) throw new Error("gave up waiting for the invitation's previous mail");
  }
}

/**
 * Sends invitation mail. The token is minted here, when the mail goes out, so no job payload
 * ever holds one; a retry mints a fresh token and the newest mail's link is the one that works.
 * Mails of one invitation go out one after the other, in the order asked (see `isTurnOf`). An
 * invitation revoked or accepted before its mail went out gets no mail.
 */
export function invitationJobs(deps: Deps): JobHandlers {
  return {
    "invitation.send": {
      backoffBaseMs: 10_000,
      async handle(payload, { job, signal }) {
        const invitationId = String(payload.invitationId);
        if (!(await isTurnOf(deps, invitationId, job, signal))) return;
        const token = randomToken("", 32);
        const invitation = await deps.db.transaction().execute(async (trx) => {
          const found = await trx
            .selectFrom("invitations")
            .innerJoin("orgs", "orgs.id", "invitations.org_id")
            .select(["invitations.email", "invitations.role", "invitations.expires_at", "orgs.name as org_name"])
            .where("invitations.id", "=", invitationId)
            .where("invitations.status", "=", "pending")
            .where("orgs.deleted_at", "is", null)
            .executeTakeFirst();
          if (!found) return undefined;
          await trx
            .updateTable("invitations")
            .set({ token_hash: sha256Hex(token) })
            .where("id", "=", invitationId)
            .execute();
          return found;
        });
        if (!invitation) return;
        const inviter = typeof payload.inviter === "string" ? payload.inviter : "An administrator";
        const orgName = onOneLine(invitation.org_name);
        const link = `${deps.config.publicUrl}/accept-invite?token=${encodeURIComponent(token)}`;
        await deps.mailer.send({
          to: invitation.email,
          subject: `You're invited to join ${orgName} on Plinth`,
          text: [
            `${inviter} invited you to join the organization "${orgName}" on Plinth as ${invitation.role}.`,
            "",
            `Accept the invitation: ${link}`,
            "",
            `Sign in (or sign up) with ${invitation.email} first. The invitation expires at ${invitation.expires_at}.`,
          ].join("\n"),
        });
      },
    },
  };
}

/**
 * Text an org chose, put on one line of a mail: its line breaks and other control characters
 * become spaces, so a name cannot start lines of its own that pass for the mail's (a fake link).
 */
function onOneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it replaces
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, " ");
}
