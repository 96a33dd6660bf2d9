/**
 * What a hostile SAML ACS post costs everyone else (issue 31 #1): `/api/health` latency, probed
 * one request at a time, while BENCH_FLOODERS (4) loops post to one org's ACS without pause:
 *   - idle: nothing else;
 *   - hostile: ~100 KB SAMLResponses of 16,000 empty elements (refused at a look since the fix);
 *   - heavy: forged responses just under the caps (1,000 elements), which are parsed and checked.
 * Each build in BENCH_DISTS (comma-separated dist directories; default `dist`) runs every phase
 * in alternating rounds. Prints health p50/p99/max, ACS posts answered and their p50, peak RSS.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { apiJson, envInt, memoryOf, signUpCookie, sleep, startBenchPlinth } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const DISTS = (process.env.BENCH_DISTS ?? "dist").split(",").map((dist) => path.resolve(ROOT, dist.trim()));
const ROUNDS = envInt("BENCH_ROUNDS", 2);
const SECONDS = envInt("BENCH_DURATION", 8);
const FLOODERS = envInt("BENCH_FLOODERS", 4);
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** A self-signed certificate for the org's IdP (openssl): nothing posted here is signed by it. */
function idpCert(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "plinth-bench-saml-"));
  try {
    const args = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench"];
    execFileSync("openssl", [...args, "-keyout", path.join(dir, "k"), "-out", path.join(dir, "c")], {
      stdio: "ignore",
    });
    return readFileSync(path.join(dir, "c"), "utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const response = (filler: string) =>
  Buffer.from(
    `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_r" Version="2.0" IssueInstant="${new Date().toISOString()}">` +
      `<saml:Issuer>https://idp.bench/</saml:Issuer>${filler}` +
      `<saml:Assertion ID="_a" Version="2.0" IssueInstant="${new Date().toISOString()}"><saml:Issuer>https://idp.bench/</saml:Issuer></saml:Assertion></samlp:Response>`,
  ).toString("base64");
const LOADS = {
  idle: null,
  hostile: response("<x/>".repeat(16_000)),
  heavy: response("<x/>".repeat(990)),
} as const;
type Phase = keyof typeof LOADS;

interface Figures {
  healthP50: number;
  healthP99: number;
  healthMax: number;
  probes: number;
  posts: number;
  postP50: number;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;

async function phase(url: string, slug: string, load: string | null): Promise<Figures> {
  const until = Date.now() + SECONDS * 1000;
  const postTimes: number[] = [];
  const flooders = load
    ? Array.from({ length: FLOODERS }, async () => {
        const body = new URLSearchParams({ SAMLResponse: load }).toString();
        while (Date.now() < until) {
          const started = performance.now();
          await fetch(`${url}/api/auth/sso/${slug}/acs`, {
            method: "POST",
            redirect: "manual",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body,
          }).then((r) => r.arrayBuffer());
          postTimes.push(performance.now() - started);
        }
      })
    : [];
  const health: number[] = [];
  await sleep(50);
  while (Date.now() < until) {
    const started = performance.now();
    await fetch(`${url}/api/health`).then((r) => r.arrayBuffer());
    health.push(performance.now() - started);
    await sleep(10);
  }
  await Promise.all(flooders);
  health.sort((a, b) => a - b);
  postTimes.sort((a, b) => a - b);
  return {
    healthP50: percentile(health, 0.5),
    healthP99: percentile(health, 0.99),
    healthMax: health.at(-1) ?? 0,
    probes: health.length,
    posts: postTimes.length,
    postP50: percentile(postTimes, 0.5),
  };
}

async function main() {
  const results = new Map<string, Figures[]>();
  const peaks = new Map<string, number>();
  const servers = [];
  const cert = idpCert();
  for (const dist of DISTS) {
    const plinth = await startBenchPlinth({
      root: ROOT,
      dist,
      database: "sqlite",
      pgAdminUrl: PG_ADMIN_URL,
      name: "saml",
    });
    const cookie = await signUpCookie(plinth.url);
    const { org } = await apiJson(`${plinth.url}/api/org`, {
      method: "POST",
      cookie,
      body: JSON.stringify({ name: "Bench SAML" }),
    });
    await apiJson(`${plinth.url}/api/org/${org.slug}/sso`, {
      method: "PUT",
      cookie,
      body: JSON.stringify({
        type: "saml",
        enabled: true,
        config: { entryPoint: "https://idp.bench/sso", idpCert: cert, idpIssuer: "https://idp.bench/" },
      }),
    });
    servers.push({ dist, plinth, slug: org.slug as string });
  }
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const { dist, plinth, slug } of servers) {
        for (const name of Object.keys(LOADS) as Phase[]) {
          const figures = await phase(plinth.url, slug, LOADS[name]);
          const key = `${path.relative(ROOT, dist) || dist} ${name}`;
          results.set(key, [...(results.get(key) ?? []), figures]);
          peaks.set(dist, Math.max(peaks.get(dist) ?? 0, memoryOf(plinth.child.pid).hwm));
          console.log(
            `round ${round} ${key.padEnd(28)} health p50 ${figures.healthP50.toFixed(1)} ms p99 ${figures.healthP99.toFixed(1)} ms ` +
              `max ${figures.healthMax.toFixed(0)} ms (${figures.probes} probes); ACS posts answered ${figures.posts}, p50 ${figures.postP50.toFixed(0)} ms`,
          );
        }
      }
    }
  } finally {
    for (const { plinth } of servers) await plinth.stop();
  }
  console.log("\nmedian of rounds");
  for (const [key, list] of results) {
    const median = (pick: (f: Figures) => number) =>
      list.map(pick).sort((a, b) => a - b)[Math.floor(list.length / 2)] ?? 0;
    console.log(
      `${key.padEnd(28)} health p50 ${median((f) => f.healthP50).toFixed(1)} ms p99 ${median((f) => f.healthP99).toFixed(1)} ms ` +
        `max ${median((f) => f.healthMax).toFixed(0)} ms; ACS posts ${median((f) => f.posts)} in ${SECONDS} s, p50 ${median((f) => f.postP50).toFixed(0)} ms`,
    );
  }
  for (const [dist, hwm] of peaks)
    console.log(`peak RSS ${path.relative(ROOT, dist) || dist}: ${(hwm / 1024 / 1024).toFixed(0)} MB`);
}

await main();
