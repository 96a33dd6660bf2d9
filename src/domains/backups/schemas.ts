import { z } from "@hono/zod-openapi";

export const PitrRestoreInput = z
  .object({
    timestamp: z
      .number()
      .int()
      .positive()
      .openapi({ description: "The instant to restore to: Unix ms (a value below 10^11 is read as seconds)" }),
  })
  .openapi("PitrRestoreInput");

export const PitrRestoreResult = z
  .object({ restoredTo: z.string().openapi({ description: "ISO-8601: the instant the workspace now holds" }) })
  .openapi("PitrRestoreResult");

export const RestoreWindowSchema = z
  .object({
    earliest: z.string().openapi({ description: "ISO-8601: the earliest instant a restore can reach" }),
    latest: z.string().openapi({ description: "ISO-8601: now" }),
  })
  .openapi("RestoreWindow");

export const BackupInput = z
  .object({
    // `auto` stays in the enum, as Backup.kind has it, but is refused: an automatic backup escapes the manual cap.
    kind: z
      .enum(["auto", "manual"])
      .refine((kind) => kind === "manual", "automatic backups are taken by the daily job only")
      .optional()
      .openapi({
        description:
          "Only `manual` (the default): kept until deleted and counted against the plan's cap. " +
          "`auto` is refused (422): automatic backups are taken by the daily job",
      }),
  })
  .openapi("BackupInput");

export const BackupSchema = z
  .object({
    id: z.string().openapi({ example: "bkp_01jx0000000000000000000000" }),
    projectId: z.string(),
    kind: z.enum(["auto", "manual"]),
    status: z.enum(["pending", "completed", "failed"]),
    sizeBytes: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "The snapshot's database and file bytes, once completed" }),
    templateVersion: z.string().openapi({ description: "The workspace's template version the snapshot holds" }),
    createdAt: z.string(),
    completedAt: z.string().nullable(),
    expiresAt: z
      .string()
      .nullable()
      .openapi({ description: "When an automatic backup is deleted; null for manual ones" }),
    restoredAt: z.string().nullable().openapi({ description: "When the workspace was last restored from it" }),
    error: z.string().nullable().openapi({ description: "Why a failed backup failed" }),
  })
  .openapi("Backup");

export const BackupResponse = z.object({ backup: BackupSchema }).openapi("BackupResponse");
export const BackupList = z.object({ backups: z.array(BackupSchema) }).openapi("BackupList");

export const BackupParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  projectSlug: z.string().openapi({ param: { name: "projectSlug", in: "path" } }),
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "bkp_01jx0000000000000000000000" }),
});
