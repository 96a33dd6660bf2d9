import { z } from "@hono/zod-openapi";

export const ExportParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" }, example: "acme" }),
  filename: z.string().openapi({
    param: { name: "filename", in: "path" },
    example: "storefront-20250102T030405Z-0f1e2d3c4b5a69788796a5b4c3d2e1f0.sql",
  }),
});

export const ExportEntrySchema = z
  .object({
    slug: z.string().openapi({ description: "The project's slug" }),
    filename: z.string().openapi({ description: "The dump's name, for GET /org/{slug}/exports/{filename}" }),
  })
  .openapi("ExportEntry");

export const ExportResponse = z.object({
  projects: z.array(ExportEntrySchema),
  exportedAt: z.string().openapi({ description: "ISO-8601: the moment the export began" }),
});
