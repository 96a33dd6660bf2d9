import { isAscii } from "node:buffer";
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { Agent, type Dispatcher } from "undici";
import { bareHostname, isPrivateAddress, refusedHostReason } from "./ssrf.ts";

/** One attempt's outcome. `error` is set exactly when `statusCode` is null; `body` is null then too. */
export interface OutboundResponse {
  statusCode: number | null;
  body: string | null;
  latencyMs: number;
  error: string | null;
}

export interface OutboundClient {
  /**
   * Never throws: every failure, refusal and timeout comes back as an `error`. Redirects are not
   * followed. `timeoutMs` shortens the client's own deadline for this request (never lengthens it).
   */
  post(
    url: string,
    headers: Record<string, string>,
    body: string,
    signal?: AbortSignal,
    timeoutMs?: number,
  ): Promise<OutboundResponse>;
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
      if (addresses.some((entry) => isPrivateAddress(entry.address))) {
        return callback(new Error(`refused: ${refusedHostReason(hostname)}`), []);
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

/**
 * Decodes at most `maxBytes` bytes as UTF-8 without leaving a broken character at the end. A NUL
 * becomes U+FFFD, as bytes that are not text do: PostgreSQL's text cannot hold it, and a body
 * that could not be recorded would fail its attempt and be sent again.
 */
function decodeUtf8Prefix(bytes: Buffer, maxBytes: number): string {
  const text = decodeUtf8PrefixAsIs(bytes, maxBytes);
  if (!text.includes("\0")) return text;
  return decodeUtf8PrefixAsIs(Buffer.from(text.replaceAll("\0", "\uFFFD")), maxBytes);
}

function decodeUtf8PrefixAsIs(bytes: Buffer, maxBytes: number): string {
  // Most receivers answer in ASCII ("ok", JSON), where bytes and characters are the same.
  if (isAscii(bytes)) return bytes.toString("latin1", 0, Math.min(bytes.length, maxBytes));
  // A body shorter than the cut was not cut (reading stops at the cut): it is decoded whole, and
  // invalid bytes at its end become U+FFFD like any others.
  if (bytes.length < maxBytes) return bytes.toString("utf8");
  // Cut: `stream: true` holds back a character the cut split instead of turning it into U+FFFD.
  const text = new TextDecoder().decode(bytes.subarray(0, maxBytes), { stream: true });
  const encoded = Buffer.from(text);
  if (encoded.length <= maxBytes) return text;
  // Each invalid byte became a 3-byte U+FFFD, so the text can outgrow the limit; cut again, now on valid UTF-8.
  return new TextDecoder().decode(encoded.subarray(0, maxBytes), { stream: true });
}

/** Where a URL sends to, parsed once per distinct URL (a webhook's URL is used for every delivery). */
interface Destination {
  origin: string;
  path: string;
  host: string;
}

const DESTINATIONS_KEPT = 1_000;

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

  const destinations = new Map<string, Destination | null>();
  function destination(url: string): Destination | null {
    let found = destinations.get(url);
    if (found === undefined) {
      try {
        const parsed = new URL(url);
        found = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, host: bareHostname(parsed) };
      } catch {
        found = null;
      }
      if (destinations.size >= DESTINATIONS_KEPT) destinations.clear();
      destinations.set(url, found);
    }
    return found;
  }

  /**
   * One POST through undici's dispatcher interface, which hands over the response's status and
   * bytes as they arrive: the `request()` API's response streams and async iteration cost about
   * twice as much CPU per delivery, for a body of at most 2 KiB that is read whole anyway.
   */
  function post(
    url: string,
    headers: Record<string, string>,
    body: string,
    signal?: AbortSignal,
    requestTimeoutMs?: number,
  ) {
    const started = performance.now();
    const deadlineMs = Math.min(timeoutMs, requestTimeoutMs ?? timeoutMs);
    const failure = (error: string): OutboundResponse => ({
      statusCode: null,
      body: null,
      latencyMs: Math.round(performance.now() - started),
      error,
    });
    const target = destination(url);
    if (!target) return Promise.resolve(failure("not a valid URL"));
    // Node connects to an IP literal without calling lookup, so the guard there never sees it.
    if (!allowPrivate && isIP(target.host) !== 0 && isPrivateAddress(target.host)) {
      return Promise.resolve(failure(`refused: ${refusedHostReason(target.host)}`));
    }
    if (signal?.aborted) return Promise.resolve(failure(`aborted: ${describeError(signal.reason)}`));

    return new Promise<OutboundResponse>((resolve) => {
      let controller: Dispatcher.DispatchController | undefined;
      let settled = false;
      let statusCode = 0;
      const chunks: Buffer[] = [];
      let size = 0;
      const settle = (response: OutboundResponse) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", abortFromCaller);
        resolve(response);
      };
      const answered = () =>
        settle({
          statusCode,
          body: decodeUtf8Prefix(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks), maxResponseBytes),
          latencyMs: Math.round(performance.now() - started),
          error: null,
        });
      const stop = (reason: Error) => {
        settle(failure(describeError(reason)));
        controller?.abort(reason);
      };
      const timer = setTimeout(() => stop(new Error(`timed out after ${deadlineMs} ms`)), deadlineMs);
      const abortFromCaller = () => stop(new Error(`aborted: ${describeError(signal?.reason)}`));
      signal?.addEventListener("abort", abortFromCaller, { once: true });

      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(dispatching) {
          controller = dispatching;
          if (settled) dispatching.abort(new Error("request abandoned"));
        },
        onResponseStart(_controller, status) {
          statusCode = status;
        },
        onResponseData(current, chunk) {
          chunks.push(chunk);
          size += chunk.length;
          if (size < maxResponseBytes) return;
          // Enough kept: answer now, and drop the connection instead of draining the rest.
          answered();
          current.abort(new Error("response body cut"));
        },
        onResponseEnd: answered,
        onResponseError(_controller, error) {
          settle(failure(describeError(error)));
        },
      };
      // undici reports a request it cannot send (a bad header value, say) to onResponseError.
      agent.dispatch({ origin: target.origin, path: target.path, method: "POST", headers, body }, handler);
    });
  }

  return { post, close: () => agent.close() };
}
