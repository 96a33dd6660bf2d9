import { z } from "@hono/zod-openapi";
import { parseAllowlistEntry } from "../../lib/ip.ts";
import { nameText } from "../fields.ts";
import { ROLES } from "./access.ts";
import { REGIONS, RESIDENCIES } from "./records.ts";

export const SlugParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" }, example: "acme" }),
});

export const OrgSchema = z
  .object({
    id: z.string(),
    slug: z.string(),
    name: z.string(),
    planId: z.string(),
    residency: z.string(),
    defaultRegion: z.string(),
    ipAllowlist: z.array(z.string()),
    webhookUrl: z.string().nullable(),
    status: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Org");

export const OrgMembershipSchema = OrgSchema.extend({ role: z.enum(ROLES) }).openapi("OrgMembership");

export const ProjectSummarySchema = z
  .object({
    id: z.string(),
    slug: z.string(),
    name: z.string(),
    status: z.string(),
    environment: z.string(),
    primaryRegion: z.string().nullable(),
  })
  .openapi("ProjectSummary");

const orgName = nameText(2, 80);

export const CreateOrgInput = z
  .object({
    name: orgName,
    residency: z.enum(RESIDENCIES).optional(),
    defaultRegion: z.enum(REGIONS).optional(),
    purpose: z.string().max(40).optional(),
    teamSize: z.string().max(40).optional(),
  })
  .openapi("CreateOrgInput");

const allowlistEntry = z
  .string()
  .min(1)
  .refine((entry) => parseAllowlistEntry(entry) !== null, {
    message: "must be an IPv4/IPv6 address or CIDR range",
  });

const webhookUrl = z
  .url({ protocol: /^https?$/, message: "must be an http(s) URL" })
  .max(2048)
  .nullable();

export const UpdateOrgInput = z
  .object({
    name: orgName.optional(),
    defaultRegion: z.enum(REGIONS).optional(),
    ipAllowlist: z.array(allowlistEntry).max(100).optional(),
    webhookUrl: webhookUrl.optional(),
  })
  .openapi("UpdateOrgInput");

export const OrgResponse = z.object({ org: OrgSchema });

export const UpdateOrgResponse = z.object({
  org: OrgSchema,
  webhookSecret: z
    .string()
    .optional()
    .openapi({ description: "Signing secret for webhookUrl; returned once, when webhookUrl is set" }),
});

export const OrgListResponse = z.object({ orgs: z.array(OrgMembershipSchema) });

export const OverviewResponse = z.object({
  org: OrgSchema,
  role: z.string().optional(),
  projectCount: z.number().int(),
  projects: z.array(ProjectSummarySchema),
});
