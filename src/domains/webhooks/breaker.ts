import type { Db } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { recordSystemAudit } from "../audit/service.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import type { Target } from "./targets.ts";

/** Consecutive failed attempts after which a webhook is switched off (SPEC: circuit breaker). */
const BREAKER_THRESHOLD = 15;

/**
 * Moves the breakers of active webhooks by attempts just recorded, attempt by attempt, so exactly
 * the attempt that takes a counter to the threshold trips it.
 */
export async function moveBreakers(
  trx: Db,
  deps: Deps,
  attempts: Array<{ ok: boolean; target: Pick<Target, "webhookId" | "active"> }>,
  at: string,
): Promise<void> {
  // A success resets the counter as it is now, not as read before the request went out (other
  // attempts may have failed meanwhile): once per webhook and group, unless this group's own
  // writes left it at 0.
  const counters = new Map<string, number>();
  for (const s of attempts) {
    const webhookId = s.target.webhookId;
    if (!webhookId || !s.target.active) continue;
    if (s.ok) {
      if (counters.get(webhookId) !== 0) {
        // Not once the breaker has tripped (by an attempt recorded meanwhile): only a resume resets it then.
        await trx
          .updateTable("webhooks")
          .set({ consecutive_failures: 0 })
          .where("id", "=", webhookId)
          .where("active", "=", 1)
          .where("consecutive_failures", ">", 0)
          .execute();
      }
      counters.set(webhookId, 0);
    } else {
      counters.set(webhookId, await recordFailure(trx, deps, webhookId, at));
    }
  }
}

/**
 * Counts a failed attempt against the webhook and trips the breaker at the threshold: the
 * webhook is switched off with a reason, its org's admins are notified and the audit log says
 * so. Only the attempt that moves the counter to the threshold does this, once.
 */
async function recordFailure(trx: Db, deps: Deps, webhookId: string, at: string): Promise<number> {
  const hook = await trx
    .updateTable("webhooks")
    .set((eb) => ({ consecutive_failures: eb("consecutive_failures", "+", 1), last_failure_at: at }))
    .where("id", "=", webhookId)
    // Attempts that were under way when the breaker tripped leave the count where the trip left it.
    .where("active", "=", 1)
    .returning(["id", "org_id", "project_id", "url", "active", "consecutive_failures"])
    .executeTakeFirst();
  if (!hook) return 0;
  if (!hook.active || hook.consecutive_failures < BREAKER_THRESHOLD) return hook.consecutive_failures;
  const reason = `disabled after ${BREAKER_THRESHOLD} consecutive failed deliveries`;
  await trx
    .updateTable("webhooks")
    .set({ active: 0, disabled_reason: reason, updated_at: at })
    .where("id", "=", webhookId)
    .execute();
  // Its deliveries waiting for a retry become terminal no-ops (SPEC's breaker table): their jobs
  // find them skipped and end, and a later resume does not send them. Test sends are never
  // queued. On PostgreSQL, rows another transaction holds are left alone: that transaction is
  // recording an attempt at them now (waiting, maybe, for this webhook's row, which this one
  // holds), and a retry it leaves finds the webhook switched off.
  let waiting = trx
    .selectFrom("webhook_deliveries")
    .select("id")
    .where("target_type", "=", "webhook")
    .where("target_id", "=", webhookId)
    .where("status", "in", ["pending", "failed"])
    .where("event", "!=", "webhook.test");
  if (deps.dialect === "postgres") waiting = waiting.forUpdate().skipLocked();
  await trx
    .updateTable("webhook_deliveries")
    .set({ status: "skipped", updated_at: at })
    .where("id", "in", waiting)
    .execute();
  await recordSystemAudit(trx, deps, {
    orgId: hook.org_id,
    action: "webhook.auto_disabled",
    target: { type: "webhook", id: hook.id },
    // A workspace hook's row names its project, as every workspace_webhook.* row does.
    data: {
      ...(hook.project_id ? { projectId: hook.project_id } : {}),
      url: hook.url,
      consecutiveFailures: hook.consecutive_failures,
      reason,
    },
  });
  await notifyOrgAdmins(trx, deps, {
    orgId: hook.org_id,
    kind: "webhook.auto_disabled",
    title: "A webhook was disabled",
    body: `${hook.url} was ${reason}. Fix the receiver, then resume it with PATCH {"active": true}.`,
    data: { webhookId: hook.id, projectId: hook.project_id },
  });
  return hook.consecutive_failures;
}
