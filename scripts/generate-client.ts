/** `npm run generate`: rewrites the SDK's types (src/client/generated/) from the documents the app builds now. */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { CLIENT_TYPES, clientTypes } from "./client-types.ts";
import { openApiDocuments } from "./openapi-documents.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const documents = await openApiDocuments();
await writeFile(path.join(ROOT, CLIENT_TYPES.control), await clientTypes(documents.control, "GET /api/openapi.json"));
await writeFile(
  path.join(ROOT, CLIENT_TYPES.workspace),
  await clientTypes(documents.workspace, "GET /api/workspace/openapi.json"),
);
console.log(`wrote ${CLIENT_TYPES.control} and ${CLIENT_TYPES.workspace}`);
