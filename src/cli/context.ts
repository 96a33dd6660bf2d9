import { createInterface } from "node:readline/promises";
import { createPlinthClient, type PlinthClient } from "../client/index.ts";
import { ApiError, UsageError } from "./errors.ts";
import { nodeFetch } from "./http.ts";
import { Output } from "./output.ts";
import { readSettings, type SavedSettings } from "./settings.ts";

/** The options every command takes (DESIGN §14). */
export interface GlobalOptions {
  url?: string;
  apiKey?: string;
  org?: string;
  output?: string;
  json?: boolean;
  yes?: boolean;
}

/** An answer of openapi-fetch: its data, or the error envelope, and the response. */
interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * What a command needs, resolved once per run: the settings (a flag, else PLINTH_URL /
 * PLINTH_API_KEY / PLINTH_ORG, else the config file), the SDK client, the org, the output.
 */
export class Cli {
  readonly out: Output;
  private saved: SavedSettings | undefined;
  private apiKeyRead: Promise<string | undefined> | undefined;

  constructor(
    readonly options: GlobalOptions,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {
    this.out = new Output(options.json === true || options.output === "json");
  }

  async settings(): Promise<SavedSettings> {
    this.saved ??= await readSettings();
    return this.saved;
  }

  async url(): Promise<string> {
    const url = this.options.url ?? this.env.PLINTH_URL ?? (await this.settings()).url;
    if (!url) throw new UsageError("no Plinth to talk to: run plinth login --url <url>, or set --url or PLINTH_URL");
    if (!/^https?:\/\/[^/]/.test(url)) throw new UsageError(`--url must be an http(s) URL, not ${url}`);
    return url.replace(/\/+$/, "");
  }

  /** The API key: `--api-key` (`-` reads it from stdin), else PLINTH_API_KEY, else the config file's. */
  apiKey(): Promise<string | undefined> {
    this.apiKeyRead ??= (async () => {
      if (this.options.apiKey === "-") return readKeyFromStdin();
      return this.options.apiKey ?? this.env.PLINTH_API_KEY ?? (await this.settings()).apiKey;
    })();
    return this.apiKeyRead;
  }

  async client(): Promise<PlinthClient> {
    const apiKey = await this.apiKey();
    if (!apiKey) throw new UsageError("not logged in: run plinth login, or set --api-key or PLINTH_API_KEY");
    return createPlinthClient({
      url: await this.url(),
      apiKey,
      headers: { "user-agent": "plinth-cli" },
      fetch: nodeFetch,
    });
  }

  /** The org commands act on: `--org`, PLINTH_ORG, the config file's, or the caller's only org. */
  async org(): Promise<string> {
    const named = this.options.org ?? this.env.PLINTH_ORG ?? (await this.settings()).org;
    if (named) return named;
    const client = await this.client();
    const { orgs } = await this.call(client.GET("/orgs"));
    if (orgs.length === 1) return (orgs[0] as { slug: string }).slug;
    if (orgs.length === 0) throw new UsageError("this account belongs to no org yet: plinth orgs create <name>");
    throw new UsageError(`name the org with --org (one of ${orgs.map((org) => org.slug).join(", ")})`);
  }

  /** The data of a call, or an ApiError carrying its envelope's code, message and request id. */
  async call<T>(pending: Promise<Answer<T>>): Promise<T> {
    let answer: Answer<T>;
    try {
      answer = await pending;
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new ApiError(
        "UNREACHABLE",
        `could not reach ${await this.url()}: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
      );
    }
    if (answer.response.ok) return answer.data as T;
    const envelope = (answer.error as { error?: { code?: string; message?: string; requestId?: string } } | undefined)
      ?.error;
    throw new ApiError(
      envelope?.code ?? `HTTP_${answer.response.status}`,
      envelope?.message ??
        (typeof answer.error === "string" && answer.error ? answer.error : answer.response.statusText),
      envelope?.requestId ?? answer.response.headers.get("x-request-id") ?? undefined,
    );
  }

  /**
   * Goes on only if the person means it: `--yes`, or on a terminal a typed `yes`. Without a
   * terminal it is a usage error (nothing changed): a script must say `--yes`.
   */
  async confirm(what: string): Promise<void> {
    if (this.options.yes) return;
    if (!process.stdin.isTTY) throw new UsageError(`${what}: pass --yes to confirm (stdin is not a terminal)`);
    const prompt = createInterface({ input: process.stdin, output: process.stderr });
    try {
      const answer = await prompt.question(`${what}. Type yes to go on: `);
      if (answer.trim().toLowerCase() !== "yes") throw new UsageError("not confirmed: nothing was changed");
    } finally {
      prompt.close();
    }
  }
}

async function readKeyFromStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new UsageError("--api-key - reads the key from stdin: pipe it in");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const key = Buffer.concat(chunks).toString("utf8").trim();
  if (!key) throw new UsageError("--api-key -: stdin held no key");
  return key;
}

/** What went wrong reaching the server: the system's code (ECONNREFUSED, ENOTFOUND, …) when there is one. */
export function networkFailure(error: unknown): string {
  const failure = error as { code?: string; message?: string; cause?: { code?: string } };
  return failure.code ?? failure.cause?.code ?? failure.message ?? String(error);
}
