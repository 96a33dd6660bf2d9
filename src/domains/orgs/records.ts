import type { Selectable } from "kysely";
import type { OrgsTable } from "../../db/schema.ts";
import { fromJsonColumn } from "../../lib/json.ts";

/**
 * The org columns requests work with. The webhook signing secret and the sign-up survey fields
 * are left out, so they are neither read on every request nor held in request state.
 */
export const ORG_COLUMNS = [
  "id",
  "slug",
  "name",
  "plan_id",
  "residency",
  "default_region",
  "ip_allowlist",
  "webhook_url",
  "status",
  "created_at",
  "updated_at",
  "deleted_at",
] as const satisfies readonly (keyof OrgsTable)[];

export type OrgRow = Pick<Selectable<OrgsTable>, (typeof ORG_COLUMNS)[number]>;

export const RESIDENCIES = ["eu", "tr", "global"] as const;
export const REGIONS = ["ist", "fra", "ams", "lhr", "sjc", "iad", "sin", "syd"] as const;
export type Residency = (typeof RESIDENCIES)[number];
export type Region = (typeof REGIONS)[number];

/** Where an org's projects go when it names no region: the nearest region to its residency. */
export const DEFAULT_REGION_BY_RESIDENCY: Record<Residency, Region> = {
  eu: "fra",
  tr: "ist",
  global: "iad",
};

export interface Org {
  id: string;
  slug: string;
  name: string;
  planId: string;
  residency: string;
  defaultRegion: string;
  ipAllowlist: string[];
  webhookUrl: string | null;
  status: string;
  createdAt: string;
  updatedAt: string;
}

export function toOrg(row: OrgRow): Org {
  return {
    id: row.id,
    slug: row.slug,
    name: row.name,
    planId: row.plan_id,
    residency: row.residency,
    defaultRegion: row.default_region,
    ipAllowlist: fromJsonColumn<string[]>(row.ip_allowlist, []),
    webhookUrl: row.webhook_url,
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
