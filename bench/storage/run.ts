/**
 * Object storage benchmark (issue 34): upload and download of one large file through Plinth
 * (`POST /w/{id}/api/files`, `GET /w/{id}/api/files/{fileId}`) into an S3 bucket, against the same
 * bytes put into and read from that bucket directly, with the S3 client Plinth uses (the same
 * 8 MiB parts, two in flight), from this process. The server is OpenStack Swift with s3api,
 * started here in a temp directory (Debian's `swift` packages).
 *
 *   npx tsx bench/storage/run.ts          (after `npm run build`)
 *
 * Direct and through-Plinth transfers take turns, round after round, so they share the machine's
 * drift. Printed per transfer: MB/s; per round, Plinth's RSS before and its peak during (sampled
 * every 50 ms): flat means no file is held in memory.
 *
 * Environment (all optional):
 *   BENCH_MB        the file's size in MiB  (100)
 *   BENCH_ROUNDS    rounds                  (3)
 */
import { randomBytes } from "node:crypto";
import path from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { createLogger } from "../../src/logger.ts";
import { S3BlobStore } from "../../src/storage/s3.ts";
import { startSwift } from "../../test/swift.ts";
import { benchProject, envInt, memoryOf, startBenchPlinth } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MiB = 1024 * 1024;
const SIZE = envInt("BENCH_MB", 100) * MiB;
const ROUNDS = envInt("BENCH_ROUNDS", 3);
const BUCKET = "plinth-bench";

/** Reads a stream to its end, counting its bytes (never holding them). */
async function drain(body: ReadableStream<Uint8Array>): Promise<number> {
  let bytes = 0;
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.length;
  return bytes;
}

async function timed(work: () => Promise<number>): Promise<{ mbps: number; bytes: number }> {
  const started = performance.now();
  const bytes = await work();
  const seconds = (performance.now() - started) / 1000;
  return { mbps: bytes / MiB / seconds, bytes };
}

const swift = await startSwift();
const location = new URL(swift.storageUrl(BUCKET).replace(/^s3:/, "http:"));
const direct = new S3BlobStore(
  {
    endpoint: swift.endpoint,
    bucket: BUCKET,
    region: "us-east-1",
    accessKeyId: decodeURIComponent(location.username),
    secretAccessKey: decodeURIComponent(location.password),
  },
  createLogger({ logLevel: "error" } as never),
);
const plinth = await startBenchPlinth({
  root: ROOT,
  dist: path.join(ROOT, "dist"),
  database: "sqlite",
  pgAdminUrl: "",
  name: "bench-storage",
  env: { STORAGE_URL: swift.storageUrl(BUCKET), MAX_FILE_BYTES: String(SIZE + MiB), WORKER_THREAD: "false" },
});
try {
  const { ws, adminToken } = await benchProject(plinth.url, "Storage Bench");
  const file = randomBytes(SIZE);
  console.log(`\n${SIZE / MiB} MiB, ${ROUNDS} rounds; Plinth pid ${plinth.child.pid}\n`);
  const figures = {
    directUp: [] as number[],
    directDown: [] as number[],
    plinthUp: [] as number[],
    plinthDown: [] as number[],
  };
  for (let round = 1; round <= ROUNDS; round++) {
    const key = `bench/direct-${round}`;
    const up = await timed(async () => (await direct.put(key, file)).size);
    const down = await timed(async () => {
      const stored = await direct.get(key);
      if (!stored) throw new Error("the direct object is missing");
      return drain(stored.body);
    });
    await direct.delete([key]);

    const before = memoryOf(plinth.child.pid).rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, memoryOf(plinth.child.pid).rss);
    }, 50);
    let fileId = "";
    const plinthUp = await timed(async () => {
      const response = await fetch(`${ws}/files?name=big-${round}.bin`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/octet-stream" },
        // Streamed, as a client would send a file from disk (no Content-Length).
        body: Readable.toWeb(Readable.from([file.subarray(0, SIZE / 2), file.subarray(SIZE / 2)])) as ReadableStream,
        duplex: "half",
      } as RequestInit);
      const body = (await response.json()) as { file: { id: string; size: number } };
      if (response.status !== 201) throw new Error(`upload: ${response.status} ${JSON.stringify(body)}`);
      fileId = body.file.id;
      return body.file.size;
    });
    const plinthDown = await timed(async () => {
      const response = await fetch(`${ws}/files/${fileId}`, { headers: { authorization: `Bearer ${adminToken}` } });
      if (response.status !== 200 || !response.body) throw new Error(`download: ${response.status}`);
      return drain(response.body);
    });
    clearInterval(sampler);
    if (plinthDown.bytes !== SIZE || down.bytes !== SIZE) throw new Error("a download came back short");
    await fetch(`${ws}/files/${fileId}`, { method: "DELETE", headers: { authorization: `Bearer ${adminToken}` } });
    figures.directUp.push(up.mbps);
    figures.directDown.push(down.mbps);
    figures.plinthUp.push(plinthUp.mbps);
    figures.plinthDown.push(plinthDown.mbps);
    console.log(
      `round ${round}: upload direct ${up.mbps.toFixed(1)} MB/s, Plinth ${plinthUp.mbps.toFixed(1)} MB/s` +
        ` (${((plinthUp.mbps / up.mbps) * 100).toFixed(0)}%); download direct ${down.mbps.toFixed(1)} MB/s,` +
        ` Plinth ${plinthDown.mbps.toFixed(1)} MB/s (${((plinthDown.mbps / down.mbps) * 100).toFixed(0)}%);` +
        ` Plinth RSS ${(before / MiB).toFixed(0)} MiB before, peak ${(peak / MiB).toFixed(0)} MiB during`,
    );
  }
  const mean = (list: number[]) => list.reduce((sum, value) => sum + value, 0) / list.length;
  console.log(
    `\nmean: upload ${mean(figures.plinthUp).toFixed(1)} / ${mean(figures.directUp).toFixed(1)} MB/s = ` +
      `${((mean(figures.plinthUp) / mean(figures.directUp)) * 100).toFixed(0)}% of direct; download ` +
      `${mean(figures.plinthDown).toFixed(1)} / ${mean(figures.directDown).toFixed(1)} MB/s = ` +
      `${((mean(figures.plinthDown) / mean(figures.directDown)) * 100).toFixed(0)}% of direct (target ≥ 70%)`,
  );
} finally {
  await plinth.stop();
  await swift.stop();
}
