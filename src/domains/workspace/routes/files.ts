import { Readable } from "node:stream";
import { createRoute, z } from "@hono/zod-openapi";
import { createRouter, jsonContent } from "../../../http/router.ts";
import { deleteFile, downloadFile, listFiles, uploadFile } from "../files.ts";
import { FileQuery, FileSchema, IdP, Page, uploadBody } from "../schemas.ts";
import { adminsAndUsers, errors, tags, type WorkspaceEnv, workspaceOf } from "./security.ts";

const upload = createRoute({
  method: "post",
  path: "/files",
  tags,
  summary: "Upload a file (multipart field `file`, or a raw body with ?name=); emits files:uploaded",
  security: adminsAndUsers,
  request: { query: FileQuery, body: uploadBody },
  responses: { 201: jsonContent(z.object({ file: FileSchema }), "The file"), ...errors },
});

const list = createRoute({
  method: "get",
  path: "/files",
  tags,
  summary: "List files, oldest first (limit default 50, at most 500; offset)",
  security: adminsAndUsers,
  request: { query: Page },
  responses: { 200: jsonContent(z.object({ files: z.array(FileSchema) }), "Files"), ...errors },
});

const download = createRoute({
  method: "get",
  path: "/files/{id}",
  tags,
  summary: "Download a file",
  security: adminsAndUsers,
  request: { params: IdP },
  responses: {
    200: {
      description: "The file's bytes, with the content type it was uploaded with",
      content: { "*/*": { schema: z.string().openapi({ format: "binary" }) } },
    },
    ...errors,
  },
});

const remove = createRoute({
  method: "delete",
  path: "/files/{id}",
  tags,
  summary: "Delete a file; emits files:deleted",
  security: adminsAndUsers,
  request: { params: IdP },
  responses: { 204: { description: "Deleted" }, ...errors },
});

export function fileRoutes() {
  return createRouter<WorkspaceEnv>()
    .openapi(upload, async (c) => {
      const incoming = c.env?.incoming;
      const body = incoming ?? Readable.fromWeb((c.req.raw.body ?? new ReadableStream()) as never);
      const declared = Number(c.req.header("content-length"));
      const file = {
        body,
        contentType: c.req.header("content-type"),
        name: c.req.valid("query").name,
        length: Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined,
      };
      return c.json(await uploadFile({ ctx: workspaceOf(c), upload: file }), 201);
    })
    .openapi(list, async (c) => c.json(await listFiles({ ctx: workspaceOf(c), query: c.req.valid("query") }), 200))
    .openapi(download, async (c) => {
      const file = await downloadFile({ ctx: workspaceOf(c), id: c.req.valid("param").id });
      return c.body(file.content, 200, {
        "Content-Type": file.contentType,
        "Content-Length": String(file.size),
        "Content-Disposition": `attachment; filename*=UTF-8''${encodeURIComponent(file.name)}`,
        // The type is the uploader's word: a browser must not sniff one of its own (HTML, say).
        "X-Content-Type-Options": "nosniff",
      });
    })
    .openapi(remove, async (c) => {
      await deleteFile({ ctx: workspaceOf(c), id: c.req.valid("param").id });
      return c.body(null, 204);
    });
}
