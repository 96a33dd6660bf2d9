import { z } from "@hono/zod-openapi";
import { nameText } from "../fields.ts";
import { ProjectParams } from "../projects/schemas.ts";

export const BranchParams = ProjectParams.extend({
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
});

export const BranchInput = z
  .object({
    name: nameText(1, 63).openapi({ description: "Unique among the project's branches" }),
    prNumber: z
      .number()
      .int()
      .positive()
      .max(2_147_483_647)
      .nullable()
      .optional()
      .openapi({ description: "The pull request the branch serves, if any" }),
  })
  .openapi("BranchInput");

export const CreateBranchInput = BranchInput.extend({
  at: z.number().int().positive().optional().openapi({
    description:
      "Branch from this instant of the restore window: Unix ms (a value below 10^11 is read as seconds); default now",
  }),
}).openapi("CreateBranchInput");

export const BranchSchema = z
  .object({
    id: z.string().openapi({ example: "brn_01h0000000000000000000000" }),
    name: z.string(),
    prNumber: z.number().int().nullable(),
    status: z.enum(["creating", "active", "failed"]),
    projectId: z.string(),
    sourceTimestamp: z.string().openapi({ description: "ISO-8601: the instant of the parent's data the branch holds" }),
    workspaceUrl: z.string().openapi({ description: "The branch's workspace API is at `{workspaceUrl}/api`" }),
    error: z.string().nullable().openapi({ description: "Why the last copy failed (status failed)" }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Branch");

export const BranchResponse = z.object({ branch: BranchSchema }).openapi("BranchResponse");
export const BranchesResponse = z.object({ branches: z.array(BranchSchema) }).openapi("BranchesResponse");
export const CreatedBranchResponse = z
  .object({
    branch: BranchSchema,
    adminToken: z.string().openapi({ description: "The branch's workspace admin token (wsa_…), shown this once" }),
  })
  .openapi("CreatedBranchResponse");
