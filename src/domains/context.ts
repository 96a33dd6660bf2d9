import type { Deps } from "../deps.ts";
import type { Principal } from "../http/principal.ts";
import type { OrgAccess } from "./orgs/access.ts";

/** Who is asking, from where, with which dependencies: the first argument of every service call. */
export interface Ctx {
  deps: Deps;
  principal: Principal;
  ip: string | null;
}

/** A `Ctx` whose caller has been resolved against one org. */
export type OrgCtx = Ctx & OrgAccess;
