import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { Agent, type Dispatcher, request } from "undici";
import { bareHostname, isPrivateAddress } from "./ssrf.ts";

/** One attempt's outcome. `error` is set exactly when `statusCode` is null; `body` is null then too. */
export interface OutboundResponse {
  statusCode: number | null;
  body: string | null;
  latencyMs: number;
  error: string | null;
}

export interface OutboundClient {
  /** Never throws: every failure, refusal and timeout comes back as an `error`. Redirects are not followed. */
  post(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<OutboundResponse>;
  close(): Promise<void>;
}

export interface OutboundClientOptions {
  /** Bounds connect, response headers and body reading together. */
  timeoutMs: number;
  allowPrivate: boolean;
  /** Response bytes kept; the rest is never read. Default 2048, the size a delivery stores. */
  maxResponseBytes?: number;
  /** dns.lookup-compatible resolver, for tests. */
  lookup?: LookupFunction;
}

const DEFAULT_MAX_RESPONSE_BYTES = 2048;

/**
 * Checks every address a name resolves to at connect time, so the address the socket connects to is
 * the one that was checked; a check before the request could be defeated by a DNS answer that changes
 * between the two (DNS rebinding). Refusing when any address is private, not just the first, keeps the
 * outcome independent of which one the socket happens to try.
 */
function guardedLookup(resolve: LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, result, family) => {
      if (error) return callback(error, []);
      const addresses: LookupAddress[] =
        typeof result === "string" ? [{ address: result, family: family ?? isIP(result) }] : result;
      const first = addresses[0];
      if (!first) {
        return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: "ENOTFOUND" }), []);
      }
      const blocked = addresses.find((entry) => isPrivateAddress(entry.address));
      if (blocked) {
        return callback(new Error(`refused: ${hostname} resolves to private address ${blocked.address}`), []);
      }
      if (options.all) return callback(null, addresses);
      callback(null, first.address, first.family);
    });
  };
}

function describeError(error: unknown): string {
  // Happy-eyeballs connects fail with an AggregateError whose own message is empty.
  if (error instanceof AggregateError && error.errors.length > 0) return error.errors.map(describeError).join("; ");
  if (error instanceof Error) return error.message || (error as NodeJS.ErrnoException).code || error.name;
  return String(error);
}

/** Decodes at most `maxBytes` bytes as UTF-8 without leaving a broken character at the end. */
function decodeUtf8Prefix(bytes: Uint8Array, maxBytes: number): string {
  // `stream: true` holds back an incomplete trailing sequence instead of turning it into U+FFFD.
  const text = new TextDecoder().decode(bytes.subarray(0, maxBytes), { stream: true });
  const encoded = Buffer.from(text);
  if (encoded.length <= maxBytes) return text;
  // Each invalid byte became a 3-byte U+FFFD, so the text can outgrow the limit; cut again, now on valid UTF-8.
  return new TextDecoder().decode(encoded.subarray(0, maxBytes), { stream: true });
}

async function readCapped(body: Dispatcher.ResponseData["body"], maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    size += chunk.length;
    // Leaving the loop destroys the body, so undici drops the connection instead of draining the rest.
    if (size >= maxBytes) break;
  }
  return decodeUtf8Prefix(Buffer.concat(chunks), maxBytes);
}

export function createOutboundClient(options: OutboundClientOptions): OutboundClient {
  const { timeoutMs, allowPrivate } = options;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const resolve = options.lookup ?? dnsLookup;
  const agent = new Agent({
    connect: {
      lookup: allowPrivate ? resolve : guardedLookup(resolve),
      // The request's own deadline already fails the attempt; this stops the abandoned connect too.
      timeout: timeoutMs,
    },
  });

  async function post(
    url: string,
    headers: Record<string, string>,
    body: string,
    signal?: AbortSignal,
  ): Promise<OutboundResponse> {
    const started = performance.now();
    const failure = (error: string): OutboundResponse => ({
      statusCode: null,
      body: null,
      latencyMs: Math.round(performance.now() - started),
      error,
    });

    let host: string;
    try {
      host = bareHostname(new URL(url));
    } catch {
      return failure("not a valid URL");
    }
    // Node connects to an IP literal without calling lookup, so the guard there never sees it.
    if (!allowPrivate && isIP(host) !== 0 && isPrivateAddress(host)) {
      return failure(`refused: ${host} is a private address`);
    }

    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    const abortFromCaller = () => controller.abort(new Error(`aborted: ${describeError(signal?.reason)}`));
    if (signal?.aborted) abortFromCaller();
    else signal?.addEventListener("abort", abortFromCaller, { once: true });
    try {
      const response = await request(url, {
        method: "POST",
        headers,
        body,
        dispatcher: agent,
        signal: controller.signal,
      });
      const text = await readCapped(response.body, maxResponseBytes);
      return {
        statusCode: response.statusCode,
        body: text,
        latencyMs: Math.round(performance.now() - started),
        error: null,
      };
    } catch (error) {
      return failure(describeError(controller.signal.aborted ? controller.signal.reason : error));
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", abortFromCaller);
    }
  }

  return { post, close: () => agent.close() };
}
