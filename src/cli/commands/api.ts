import { networkFailure } from "../context.ts";
import { ApiError, UsageError } from "../errors.ts";
import { nodeFetch } from "../http.ts";
import { cliOf, type Program } from "./shared.ts";

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** `api <METHOD> <path> [--data JSON]`: any route of the control API, raw. */
export function apiCommand(program: Program): void {
  program
    .command("api")
    .description("call any control API route, raw: plinth api GET /org/acme/usage")
    .argument("<method>", METHODS.join(", "))
    .argument("<path>", "relative to /api, with its query")
    .option("-d, --data <json>", "the JSON body")
    .action(async (method, route, options, command) => {
      const cli = cliOf(command);
      const verb = method.toUpperCase();
      if (!METHODS.includes(verb)) throw new UsageError(`<method> must be one of ${METHODS.join(", ")}`);
      if (!route.startsWith("/")) throw new UsageError("<path> starts with / (relative to /api): /orgs");
      if (options.data !== undefined) {
        try {
          JSON.parse(options.data);
        } catch {
          throw new UsageError("--data must be JSON");
        }
      }
      const apiKey = await cli.apiKey();
      if (!apiKey) throw new UsageError("not logged in: run plinth login, or set --api-key or PLINTH_API_KEY");
      const url = `${await cli.url()}/api${route}`;
      let response: Response;
      try {
        response = await nodeFetch(
          new Request(url, {
            method: verb,
            headers: {
              authorization: `Bearer ${apiKey}`,
              "user-agent": "plinth-cli",
              ...(options.data !== undefined ? { "content-type": "application/json" } : {}),
            },
            ...(options.data !== undefined ? { body: options.data } : {}),
          }),
        );
      } catch (error) {
        throw new ApiError("UNREACHABLE", `could not reach ${url}: ${networkFailure(error)}`);
      }
      const text = await response.text();
      const body = text && response.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text;
      if (!response.ok) {
        const envelope = (body as { error?: { code?: string; message?: string; requestId?: string } }).error;
        throw new ApiError(
          envelope?.code ?? `HTTP_${response.status}`,
          envelope?.message ?? response.statusText,
          envelope?.requestId ?? response.headers.get("x-request-id") ?? undefined,
        );
      }
      if (typeof body === "string") {
        if (body) process.stdout.write(body.endsWith("\n") ? body : `${body}\n`);
        return;
      }
      // Raw: the API's JSON as it answered, whatever the output format.
      process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    });
}
