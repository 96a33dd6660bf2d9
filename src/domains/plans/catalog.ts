import { readFileSync } from "node:fs";
import { z } from "@hono/zod-openapi";

const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;
const TIB = 1024 * GIB;

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** What a plan allows; byte figures are bytes, `projects` null is unlimited (DESIGN §8). */
export const PlanLimitsSchema = z
  .object({
    projects: count.nullable().openapi({ description: "Projects per org; null: unlimited" }),
    requests: count.openapi({ description: "Workspace API requests per billing period (soft)" }),
    d1: count.openapi({ description: "Workspace database bytes, all projects together" }),
    r2: count.openapi({ description: "Stored file bytes, all projects together" }),
    neurons: count.openapi({ description: "Neurons per billing period (soft)" }),
    restoreWindowDays: z.number().int().min(1).max(3650).openapi({
      description: "How far back point-in-time restores reach, and how long automatic backups are kept",
    }),
    manualBackups: count.openapi({ description: "Manual backups kept per project" }),
  })
  .openapi("PlanLimits");

export const PlanSchema = z
  .object({
    id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,39}$/, "1–40 of a-z, 0-9, '-' or '_'"),
    name: z.string().min(1).max(80),
    prices: z.object({ monthly: count, annual: count }).openapi({ description: "US cents per month and per year" }),
    limits: PlanLimitsSchema,
  })
  .openapi("Plan");

export type Plan = z.infer<typeof PlanSchema>;
export type PlanLimits = z.infer<typeof PlanLimitsSchema>;

/** A catalog: what `GET /api/plans` answers, and what a PLANS_FILE holds. */
export const CatalogSchema = z
  .object({ plans: z.array(PlanSchema).min(1).max(100) })
  .refine(({ plans }) => new Set(plans.map((plan) => plan.id)).size === plans.length, "plan ids must be unique");

/** The built-in catalog (DESIGN §8). */
export const BUILT_IN_PLANS: Plan[] = [
  {
    id: "free",
    name: "Free",
    prices: { monthly: 0, annual: 0 },
    limits: {
      projects: 2,
      requests: 500_000,
      d1: 500 * MIB,
      r2: 1 * GIB,
      neurons: 10_000,
      restoreWindowDays: 1,
      manualBackups: 2,
    },
  },
  {
    id: "pro",
    name: "Pro",
    prices: { monthly: 2_500, annual: 25_000 },
    limits: {
      projects: 10,
      requests: 5_000_000,
      d1: 8 * GIB,
      r2: 100 * GIB,
      neurons: 1_000_000,
      restoreWindowDays: 7,
      manualBackups: 10,
    },
  },
  {
    id: "scale",
    name: "Scale",
    prices: { monthly: 59_900, annual: 599_000 },
    limits: {
      projects: 50,
      requests: 50_000_000,
      d1: 50 * GIB,
      r2: 1 * TIB,
      neurons: 10_000_000,
      restoreWindowDays: 14,
      manualBackups: 50,
    },
  },
  {
    id: "max",
    name: "Max",
    prices: { monthly: 199_900, annual: 1_999_000 },
    limits: {
      projects: null,
      requests: 500_000_000,
      d1: 500 * GIB,
      r2: 10 * TIB,
      neurons: 100_000_000,
      restoreWindowDays: 30,
      manualBackups: 200,
    },
  },
];

/**
 * The catalog in `file` (PLANS_FILE), checked whole; the built-in one without a file. Throws an
 * Error saying what is wrong, for the configuration to report against the variable.
 */
export function readCatalog(file: string | undefined): Plan[] {
  if (file === undefined) return BUILT_IN_PLANS;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(`cannot read ${file}: ${(error as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${file} is not JSON: ${(error as Error).message}`);
  }
  const parsed = CatalogSchema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`${file}: ${first ? `${first.path.join(".") || "(root)"}: ${first.message}` : "invalid catalog"}`);
  }
  return parsed.data.plans;
}
