import { createHash } from "node:crypto";
import { AwsClient } from "aws4fetch";
import { errorMessage, UnavailableError } from "../errors.ts";
import { storageErrors } from "../lib/metrics.ts";
import type { Logger } from "../logger.ts";
import { assertKey, type BlobBody, type BlobStore, chunksOf, type StoredObject } from "./blob-store.ts";

export interface S3Location {
  /** `http(s)://host:port`, the server's origin; buckets are addressed by path (`/bucket/key`). */
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

/** Bodies up to this are one PUT; larger ones go as a multipart upload of parts this size. */
export const PART_BYTES = 8 * 1024 * 1024;
/** Parts on their way at once: the most bytes an upload holds in memory is about (this + 1) parts. */
const PARTS_IN_FLIGHT = 2;
/** Keys per multi-object delete (S3's limit). */
const DELETE_BATCH = 1000;

/**
 * The blob store in an S3 bucket, addressed by path (any S3-compatible server: AWS, MinIO, Ceph,
 * Swift's s3api). Requests are signed with SigV4 by aws4fetch; bodies are not hashed
 * (`UNSIGNED-PAYLOAD`), which would cost a pass over every byte. Any failure to reach the server,
 * or an answer that is not the one expected, is an `UnavailableError` (503), counted and logged;
 * nothing is retried here, since a streamed body cannot be sent twice.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = "s3";
  private readonly aws: AwsClient;

  constructor(
    private readonly location: S3Location,
    private readonly log: Logger,
  ) {
    this.aws = new AwsClient({
      accessKeyId: location.accessKeyId,
      secretAccessKey: location.secretAccessKey,
      service: "s3",
      region: location.region,
      retries: 0,
    });
  }

  private url(key = "", query = ""): string {
    const path = key
      .split("/")
      .map((segment) => encodeURIComponent(segment))
      .join("/");
    return `${this.location.endpoint}/${encodeURIComponent(this.location.bucket)}/${path}${query ? `?${query}` : ""}`;
  }

  /**
   * Sends one request; answers with a status in `expected` are returned, others (and a server
   * that cannot be reached) throw `UnavailableError` after logging what the server said.
   */
  private async send(
    what: string,
    url: string,
    init: RequestInit & { headers?: Record<string, string> },
    expected: readonly number[],
  ): Promise<Response> {
    let response: Response;
    try {
      response = await this.aws.fetch(url, {
        ...init,
        headers: { "x-amz-content-sha256": "UNSIGNED-PAYLOAD", ...init.headers },
      });
    } catch (error) {
      throw this.failed(what, errorMessage(error));
    }
    if (expected.includes(response.status)) return response;
    const text = await response.text().catch(() => "");
    throw this.failed(what, `${response.status} ${errorCode(text) ?? response.statusText}`);
  }

  private failed(what: string, detail: string): UnavailableError {
    storageErrors.inc();
    this.log.error(
      { storage: this.location.endpoint, bucket: this.location.bucket, detail },
      `object storage: ${what} failed`,
    );
    return new UnavailableError("object storage is unavailable; try again");
  }

  async prepare(): Promise<void> {
    const head = await this.send("checking the bucket", this.url(), { method: "HEAD" }, [200, 404]);
    if (head.status === 404) {
      // 409 BucketAlreadyOwnedByYou: another process made it meanwhile.
      await this.send("creating the bucket", this.url(), { method: "PUT" }, [200, 409]);
      this.log.info({ bucket: this.location.bucket }, "created the storage bucket");
    }
  }

  async check(): Promise<void> {
    await this.send("checking the bucket", this.url(), { method: "HEAD" }, [200]);
  }

  async put(key: string, body: BlobBody): Promise<{ size: number }> {
    assertKey(key);
    const parts = partsOf(chunksOf(body))[Symbol.asyncIterator]();
    const first = await parts.next();
    const firstPart = first.done ? Buffer.alloc(0) : first.value;
    const second = first.done ? first : await parts.next();
    if (second.done) {
      await this.send("storing an object", this.url(key), { method: "PUT", body: asBody(firstPart) }, [200]);
      return { size: firstPart.length };
    }
    return this.putInParts(key, [firstPart, second.value], parts);
  }

  /** A multipart upload: `head` then the rest of `parts`, a few on their way at once; aborted on any error. */
  private async putInParts(key: string, head: Buffer[], parts: AsyncIterator<Buffer>): Promise<{ size: number }> {
    const started = await this.send("starting an upload", this.url(key, "uploads"), { method: "POST" }, [200]);
    const uploadId = tagText(await started.text(), "UploadId");
    if (!uploadId) throw this.failed("starting an upload", "no UploadId in the answer");
    const etags: string[] = [];
    const inFlight = new Set<Promise<void>>();
    let size = 0;
    let failure: unknown;
    const send = (part: Buffer, number: number) => {
      const sent: Promise<void> = this.send(
        "storing a part",
        this.url(key, `partNumber=${number}&uploadId=${encodeURIComponent(uploadId)}`),
        { method: "PUT", body: asBody(part) },
        [200],
      ).then(
        (response) => {
          etags[number - 1] = response.headers.get("etag") ?? "";
        },
        (error: unknown) => {
          failure ??= error;
        },
      );
      inFlight.add(sent);
      void sent.finally(() => inFlight.delete(sent));
    };
    try {
      let number = 0;
      const queue = async (part: Buffer) => {
        while (inFlight.size >= PARTS_IN_FLIGHT) await Promise.race(inFlight);
        if (failure) throw failure;
        size += part.length;
        send(part, ++number);
      };
      for (const part of head) await queue(part);
      for (let next = await parts.next(); !next.done; next = await parts.next()) await queue(next.value);
      await Promise.all(inFlight);
      if (failure) throw failure;
      const manifest = etags
        .map((etag, index) => `<Part><PartNumber>${index + 1}</PartNumber><ETag>${escapeXml(etag)}</ETag></Part>`)
        .join("");
      const done = await this.send(
        "completing an upload",
        this.url(key, `uploadId=${encodeURIComponent(uploadId)}`),
        { method: "POST", body: `<CompleteMultipartUpload>${manifest}</CompleteMultipartUpload>` },
        [200],
      );
      // S3 may answer 200 and say in the body that it failed.
      const text = await done.text();
      if (errorCode(text)) throw this.failed("completing an upload", errorCode(text) as string);
      return { size };
    } catch (error) {
      await Promise.allSettled(inFlight);
      await this.send(
        "aborting an upload",
        this.url(key, `uploadId=${encodeURIComponent(uploadId)}`),
        { method: "DELETE" },
        [204, 200, 404],
      ).catch(() => {});
      throw error;
    }
  }

  async get(key: string): Promise<{ body: ReadableStream<Uint8Array>; size: number } | null> {
    assertKey(key);
    const response = await this.send("reading an object", this.url(key), { method: "GET" }, [200, 404]);
    if (response.status === 404 || !response.body) {
      await response.body?.cancel();
      return null;
    }
    return { body: response.body, size: Number(response.headers.get("content-length") ?? 0) };
  }

  async has(key: string): Promise<boolean> {
    assertKey(key);
    const response = await this.send("looking an object up", this.url(key), { method: "HEAD" }, [200, 404]);
    return response.status === 200;
  }

  async copy(from: string, to: string): Promise<boolean> {
    assertKey(from);
    assertKey(to);
    const source = `/${encodeURIComponent(this.location.bucket)}/${from.split("/").map(encodeURIComponent).join("/")}`;
    const response = await this.send(
      "copying an object",
      this.url(to),
      { method: "PUT", headers: { "x-amz-copy-source": source } },
      [200, 404],
    );
    const text = await response.text();
    if (response.status === 404) return false;
    if (errorCode(text)) throw this.failed("copying an object", errorCode(text) as string);
    return true;
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (let at = 0; at < keys.length; at += DELETE_BATCH) {
      const batch = keys.slice(at, at + DELETE_BATCH);
      for (const key of batch) assertKey(key);
      const body = `<Delete><Quiet>true</Quiet>${batch
        .map((key) => `<Object><Key>${escapeXml(key)}</Key></Object>`)
        .join("")}</Delete>`;
      const response = await this.send(
        "deleting objects",
        this.url("", "delete"),
        // Required by S3 for a multi-object delete.
        { method: "POST", body, headers: { "content-md5": createHash("md5").update(body).digest("base64") } },
        [200],
      );
      const text = await response.text();
      if (/<Error>/.test(text)) throw this.failed("deleting objects", errorCode(text) ?? "an object was not deleted");
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    assertKey(prefix, { prefix: true });
    // Page by page: each page's keys are deleted before the next is listed.
    let batch: string[] = [];
    for await (const object of this.list(prefix)) {
      batch.push(object.key);
      if (batch.length === DELETE_BATCH) {
        await this.delete(batch);
        batch = [];
      }
    }
    await this.delete(batch);
  }

  async *list(prefix: string): AsyncIterable<StoredObject> {
    assertKey(prefix, { prefix: true });
    let token: string | undefined;
    do {
      const query = `list-type=2&prefix=${encodeURIComponent(prefix)}${token ? `&continuation-token=${encodeURIComponent(token)}` : ""}`;
      const response = await this.send("listing objects", this.url("", query), { method: "GET" }, [200]);
      const text = await response.text();
      for (const entry of elements(text, "Contents")) {
        yield {
          key: tagText(entry, "Key") ?? "",
          size: Number(tagText(entry, "Size") ?? 0),
          modifiedAt: new Date(tagText(entry, "LastModified") ?? 0),
        };
      }
      token = tagText(text, "IsTruncated") === "true" ? tagText(text, "NextContinuationToken") : undefined;
    } while (token);
  }

  async removeIncomplete(prefix: string, before: Date): Promise<void> {
    assertKey(prefix, { prefix: true });
    let markers = "";
    for (;;) {
      const query = `uploads&prefix=${encodeURIComponent(prefix)}${markers}`;
      const response = await this.send("listing uploads", this.url("", query), { method: "GET" }, [200]);
      const text = await response.text();
      for (const upload of elements(text, "Upload")) {
        const key = tagText(upload, "Key");
        const uploadId = tagText(upload, "UploadId");
        if (!key || !uploadId || new Date(tagText(upload, "Initiated") ?? 0) >= before) continue;
        await this.send(
          "aborting an upload",
          this.url(key, `uploadId=${encodeURIComponent(uploadId)}`),
          { method: "DELETE" },
          [204, 200, 404],
        );
      }
      if (tagText(text, "IsTruncated") !== "true") return;
      markers = `&key-marker=${encodeURIComponent(tagText(text, "NextKeyMarker") ?? "")}&upload-id-marker=${encodeURIComponent(tagText(text, "NextUploadIdMarker") ?? "")}`;
    }
  }
}

/** Node's Buffer is a Uint8Array, which fetch sends as it is; TypeScript's DOM types want an ArrayBuffer-backed view. */
const asBody = (bytes: Buffer) => bytes as unknown as BodyInit;

/** Regroups a stream of chunks into parts of PART_BYTES (the last one shorter). */
async function* partsOf(chunks: AsyncIterable<Uint8Array>): AsyncIterable<Buffer> {
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  for await (const chunk of chunks) {
    held.push(chunk);
    heldBytes += chunk.length;
    while (heldBytes >= PART_BYTES) {
      const joined = Buffer.concat(held, heldBytes);
      yield joined.subarray(0, PART_BYTES);
      const rest = joined.subarray(PART_BYTES);
      held = rest.length > 0 ? [rest] : [];
      heldBytes = rest.length;
    }
  }
  if (heldBytes > 0) yield Buffer.concat(held, heldBytes);
}

const ENTITIES: Record<string, string> = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'" };

function unescapeXml(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|apos);/g, (entity) => ENTITIES[entity] ?? entity);
}

function escapeXml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (char) => `&${{ "&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos" }[char]};`,
  );
}

/** The text of the first `<tag>` in `xml` (S3's answers are flat enough for this). */
function tagText(xml: string, tag: string): string | undefined {
  const found = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return found ? unescapeXml(found[1] as string) : undefined;
}

/** The bodies of every `<tag>…</tag>` in `xml`. */
function elements(xml: string, tag: string): string[] {
  return [...xml.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g"))].map((found) => found[1] as string);
}

/** The `<Code>` of an S3 error answer, if it is one. */
function errorCode(text: string): string | undefined {
  return /<Error>/.test(text) ? (tagText(text, "Code") ?? "an error") : undefined;
}
