/**
 * `npm run lint:openapi`: both OpenAPI documents, as the app serves them, must be clean under
 * Redocly's recommended rules, warnings included (DESIGN §14), which its CLI's exit status does
 * not say.
 */
import { openApiDocuments } from "./openapi-documents.ts";
import { lintOpenApi } from "./redocly.ts";

const documents = await openApiDocuments();

let clean = true;
for (const [name, { totals, problems }] of Object.entries(await lintOpenApi(documents))) {
  console.log(
    `${name}: ${totals.errors} errors, ${totals.warnings} warnings, ${totals.ignored} ignored (.redocly.lint-ignore.yaml)`,
  );
  for (const problem of problems) {
    console.log(`  ${problem.severity} ${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`);
  }
  if (totals.errors + totals.warnings > 0) clean = false;
}
if (!clean) process.exitCode = 1;
