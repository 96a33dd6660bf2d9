import { z } from "@hono/zod-openapi";
import { nameText } from "../fields.ts";
import { REGIONS } from "../orgs/records.ts";

const ENVIRONMENTS = ["production", "staging", "development"] as const;
const SIGN_UP = ["open", "closed"] as const;

export const ProjectParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  projectSlug: z.string().openapi({ param: { name: "projectSlug", in: "path" } }),
});

export const ProjectSchema = z
  .object({
    id: z.string(),
    slug: z.string(),
    name: z.string(),
    status: z.enum(["provisioning", "active", "failed", "paused", "deleted"]),
    environment: z.enum(ENVIRONMENTS),
    signUp: z.enum(SIGN_UP).openapi({
      description: "Whether the workspace's own `POST /api/auth/sign-up` is open (the default) or closed (403)",
    }),
    region: z.string(),
    primaryRegion: z.string().nullable(),
    dbType: z.string(),
    template: z.string(),
    templateVersion: z.string(),
    workspaceUrl: z.string(),
    failureReason: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Project");

export const CreateProjectInput = z
  .object({
    name: nameText(2, 60),
    region: z.enum(REGIONS).optional(),
    dbType: z.enum(["d1"]).optional(),
    template: z.string().max(40).optional(),
  })
  .openapi("CreateProjectInput");

export const UpdateProjectInput = z
  .object({
    name: nameText(2, 60).optional(),
    environment: z.enum(ENVIRONMENTS).optional(),
    signUp: z.enum(SIGN_UP).optional(),
  })
  .openapi("UpdateProjectInput");

/** The token is in the project and, as `reprovision-admin` answers it, beside it: the same value. */
export const CreatedProjectResponse = z.object({
  project: ProjectSchema.extend({
    adminToken: z.string().openapi({ description: "The workspace admin token; shown once" }),
  }),
  adminToken: z.string().openapi({ description: "The same workspace admin token; shown once" }),
});

export const ProjectResponse = z.object({ project: ProjectSchema });

export const ProjectDetailResponse = z.object({
  project: ProjectSchema,
  latestTemplateVersion: z.string().nullable(),
});

export const ProjectsResponse = z.object({ projects: z.array(ProjectSchema) });

export const AdminTokenResponse = z.object({
  project: ProjectSchema,
  adminToken: z.string().openapi({ description: "The new workspace admin token; shown once" }),
});

export const UpgradeQuery = z.object({
  version: z.string().max(40).optional().openapi({ description: "Template version; the latest when omitted or empty" }),
});

export const UpgradeResult = z
  .object({
    status: z.enum(["upgraded", "skipped", "failed"]),
    from: z.string().nullable(),
    to: z.string(),
    reason: z.string().optional(),
    error: z.string().optional(),
  })
  .openapi("UpgradeResult");

export const DeploySchema = z
  .object({
    id: z.string(),
    kind: z.enum(["provision", "upgrade", "resume", "reprovision", "restore"]),
    status: z.enum(["pending", "succeeded", "skipped", "failed"]),
    fromVersion: z.string().nullable(),
    toVersion: z.string().nullable(),
    error: z.string().nullable(),
    createdAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .openapi("Deploy");

export const DeploysResponse = z.object({ deploys: z.array(DeploySchema) });

export const TemplatesResponse = z.object({
  templates: z.array(
    z.object({ name: z.string(), description: z.string(), versions: z.array(z.string()), latest: z.string() }),
  ),
});
