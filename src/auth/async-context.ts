import type { AsyncLocalStorage } from "node:async_hooks";

/**
 * better-auth keeps each call's state in AsyncLocalStorage instances of its own, and never
 * switches them off. Before Node 24, an AsyncLocalStorage in use puts a hook on every promise the
 * process makes, whoever makes it: in bench/workspace that was 25–35% of the CPU per request, on
 * requests that never reach better-auth. So every call into better-auth goes through `callAuth`,
 * and once none is under way its instances are switched off (`disable`); better-auth's next call
 * switches them on again as it enters them (`run`). From Node 24 on, AsyncLocalStorage rides on
 * AsyncContextFrame and costs nothing while idle, so this only counts.
 */

const NODE_MAJOR = Number(process.versions.node.split(".")[0]);
const SWITCHES_OFF = NODE_MAJOR < 24;
/** Where better-auth keeps its AsyncLocalStorage instances (`@better-auth/core`'s context/global). */
const BETTER_AUTH_GLOBAL = Symbol.for("better-auth:global");

let underWay = 0;

/** Runs a call into better-auth (its handler, or an `auth.api` method). */
export async function callAuth<T>(call: () => Promise<T>): Promise<T> {
  underWay++;
  try {
    return await call();
  } finally {
    underWay--;
    if (underWay === 0 && SWITCHES_OFF) switchOffAuthStorage();
  }
}

function switchOffAuthStorage(): void {
  const global = (globalThis as Record<symbol, { context?: Record<string, AsyncLocalStorage<unknown>> }>)[
    BETTER_AUTH_GLOBAL
  ];
  for (const storage of Object.values(global?.context ?? {})) storage.disable();
}
