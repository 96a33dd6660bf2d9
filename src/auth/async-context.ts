import type { AsyncLocalStorage } from "node:async_hooks";
import { NODE_MAJOR } from "../lib/node-version.ts";

/**
 * better-auth keeps each call's state in AsyncLocalStorage instances of its own, and never
 * switches them off. Before Node 24, an AsyncLocalStorage in use puts a hook on every promise the
 * process makes, whoever makes it: in bench/workspace that was 25–35% of the CPU per request, on
 * requests that never reach better-auth. So every call into better-auth goes through `callAuth`
 * (`withAuthCalls` puts it around the handler and every `auth.api` method), and once none is under way its instances are switched off (`disable`); better-auth's next call
 * switches them on again as it enters them (`run`). From Node 24 on, AsyncLocalStorage rides on
 * AsyncContextFrame and costs nothing while idle, so this only counts.
 */

const SWITCHES_OFF = NODE_MAJOR < 24;
/** Where better-auth keeps its AsyncLocalStorage instances (`@better-auth/core`'s context/global). */
const BETTER_AUTH_GLOBAL = Symbol.for("better-auth:global");

let underWay = 0;

/** The better-auth instance with `callAuth` around its handler and each `auth.api` method. */
export function withAuthCalls<A extends { handler: (request: Request) => Promise<Response>; api: object }>(auth: A): A {
  const api = new Proxy(auth.api, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      return typeof value === "function"
        ? (...args: unknown[]) => callAuth(() => Reflect.apply(value, target, args) as Promise<unknown>)
        : value;
    },
  });
  return { ...auth, handler: (request: Request) => callAuth(() => auth.handler(request)), api };
}

/** Runs a call into better-auth. */
async function callAuth<T>(call: () => Promise<T>): Promise<T> {
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
