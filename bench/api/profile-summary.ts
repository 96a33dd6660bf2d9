/**
 * Summarises a V8 `.cpuprofile` (as written by `node --cpu-prof`, e.g. through
 * `BENCH_CPU_PROF=<dir> npm run bench:api`): self time by package or source file, the hottest
 * functions by self time, and the hottest functions by inclusive time.
 *
 *   npx tsx bench/api/profile-summary.ts <file.cpuprofile> [top=25] [skipSeconds=0]
 *
 * `skipSeconds` leaves out the start of the profile (process start-up, module loading).
 */
import { readFileSync } from "node:fs";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file, topArg, skipArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: tsx bench/api/profile-summary.ts <file.cpuprofile> [top] [skipSeconds]");
  process.exit(2);
}
const top = Number(topArg ?? 25);
const skipUs = Number(skipArg ?? 0) * 1e6;
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

/** Microseconds of samples that landed in each node. */
const selfUs = new Map<number, number>();
let elapsedUs = 0;
profile.samples.forEach((id, i) => {
  const delta = profile.timeDeltas[i] ?? 0;
  elapsedUs += delta;
  if (elapsedUs >= skipUs) selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
});
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

function where(frame: CallFrame): string {
  const url = frame.url.replace(/^file:\/\//, "");
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  const src = /\/(src\/.*|bench\/.*)$/.exec(url)?.[1];
  if (src) return src;
  if (url.startsWith("node:")) return url;
  return url === "" ? `(${frame.functionName || "native"})` : url;
}

function label(frame: CallFrame): string {
  return `${frame.functionName || "(anonymous)"} ${where(frame)}:${frame.lineNumber + 1}`;
}

function pct(us: number): string {
  return `${((us / totalUs) * 100).toFixed(1).padStart(5)}%`;
}

function printTop(title: string, totals: Map<string, number>): void {
  console.log(`\n${title}`);
  for (const [key, us] of [...totals].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`  ${pct(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${key}`);
  }
}

const byPlace = new Map<string, number>();
const byFunction = new Map<string, number>();
const inclusive = new Map<string, number>();
for (const [id, us] of selfUs) {
  const node = byId.get(id);
  if (!node) continue;
  byPlace.set(where(node.callFrame), (byPlace.get(where(node.callFrame)) ?? 0) + us);
  byFunction.set(label(node.callFrame), (byFunction.get(label(node.callFrame)) ?? 0) + us);
  // Inclusive: each distinct function on the stack once per sample.
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const frame = byId.get(at)?.callFrame;
    if (!frame) break;
    const key = label(frame);
    if (seen.has(key)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + us);
  }
}

console.log(`${file}: ${(totalUs / 1e6).toFixed(1)} s sampled (after skipping ${skipUs / 1e6} s)`);
printTop("Self time by package / source file", byPlace);
printTop("Self time by function", byFunction);
printTop("Inclusive time by function", inclusive);
