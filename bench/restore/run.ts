import { cpus } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { apiJson, benchProject, envInt, memoryOf, sleep, startBenchPlinth } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const ITEMS = envInt("BENCH_ITEMS", 100_000);
const CHANGES = envInt("BENCH_CHANGES", 10_000);
const FILES = envInt("BENCH_FILES", 1_000);
const ONLY = new Set((process.env.BENCH_ONLY ?? "sqlite,postgres").split(",").map((s) => s.trim()));
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MB = 1024 * 1024;
const FILLER = "x".repeat(900);

async function inParallel<T>(list: T[], work: (item: T) => Promise<unknown>, concurrency = 32): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < list.length) await work(list[next++] as T);
    }),
  );
}

/** Takes a backup of the project and waits for its job; the completed backup. */
async function backUp(url: string, org: string, project: string, cookie: string) {
  const path = `${url}/api/org/${org}/projects/${project}/backups`;
  const { backup } = await apiJson(path, { method: "POST", cookie, body: "{}" });
  for (;;) {
    const read = await apiJson(`${path}/${backup.id}`, { cookie });
    if (read.backup.status === "failed") throw new Error(`backup failed: ${read.backup.error}`);
    if (read.backup.status === "completed") return read.backup;
    await sleep(20);
  }
}

/** Runs `work` while a probe reads `/api/health` in a loop; its time, and the probe's slowest answer. */
async function probed(url: string, work: () => Promise<unknown>): Promise<{ seconds: number; stalledMs: number }> {
  let probing = true;
  let stalledMs = 0;
  const probe = (async () => {
    while (probing) {
      const at = performance.now();
      await fetch(`${url}/api/health`).then((r) => r.arrayBuffer());
      stalledMs = Math.max(stalledMs, performance.now() - at);
    }
  })();
  const started = performance.now();
  try {
    await work();
  } finally {
    probing = false;
    await probe;
  }
  return { seconds: (performance.now() - started) / 1000, stalledMs };
}

async function runOn(database: "sqlite" | "postgres"): Promise<void> {
  console.log(`\n== ${database}: ${ITEMS} items, ${CHANGES} changes`);
  const { url, child, stop } = await startBenchPlinth({
    root: ROOT,
    dist: path.join(ROOT, "dist"),
    database,
    pgAdminUrl: PG_ADMIN_URL,
    name: "restore",
  });
  try {
    const { cookie, org, project, adminToken, ws } = await benchProject(url, "Restore");
    await apiJson(`${ws}/collections`, { method: "POST", token: adminToken, body: JSON.stringify({ slug: "big" }) });
    // A snapshot of the workspace with no items: restoring it, and then the full one, are the
    // worst cases (every row deleted, then every row inserted).
    const emptyBackup = await backUp(url, org.slug, project.slug, cookie);
    let started = performance.now();
    const ids: string[] = [];
    await inParallel(
      Array.from({ length: ITEMS }, (_, n) => n),
      async (n) => {
        const { item } = await apiJson(`${ws}/items/big`, {
          method: "POST",
          token: adminToken,
          body: JSON.stringify({ n, FILLER }),
        });
        ids.push(item.id);
      },
    );
    console.log(`  ${ITEMS} items created in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    started = performance.now();
    await inParallel(
      Array.from({ length: FILES }, (_, n) => n),
      async (n) => {
        const response = await fetch(`${ws}/files?name=f${n}.txt`, {
          method: "POST",
          headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
          body: `file ${n} `.repeat(100),
        });
        if (response.status !== 201) throw new Error(`upload: ${response.status} ${await response.text()}`);
      },
      8,
    );
    console.log(`  ${FILES} files uploaded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const backupsPath = `${url}/api/org/${org.slug}/projects/${project.slug}/backups`;
    const peakBeforeBackup = memoryOf(child.pid).hwm;
    started = performance.now();
    const backup = await backUp(url, org.slug, project.slug, cookie);
    console.log(
      `  backup: ${((performance.now() - started) / 1000).toFixed(2)} s, ${(backup.sizeBytes / MB).toFixed(0)} MB; ` +
        `peak RSS ${(peakBeforeBackup / MB).toFixed(0)} MB before, ${(memoryOf(child.pid).hwm / MB).toFixed(0)} MB after`,
    );
    await sleep(50);
    const beforeChanges = Date.now();
    await sleep(50);
    const changed = ids.slice(0, CHANGES);
    await inParallel(changed, async (id) => {
      const half = Number.parseInt(id.slice(-1), 32) % 2 === 0;
      await apiJson(
        `${ws}/items/big/${id}`,
        half
          ? { method: "DELETE", token: adminToken }
          : { method: "PATCH", token: adminToken, body: JSON.stringify({ n: -1 }) },
      );
    });
    await sleep(50);
    const afterChanges = Date.now();
    await sleep(50);
    const restorePath = `${url}/api/org/${org.slug}/projects/${project.slug}/restore`;
    const peakBefore = memoryOf(child.pid).hwm;
    for (const [label, timestamp] of [
      ["back over the changes", beforeChanges],
      ["forward again (undo)", afterChanges],
    ] as const) {
      const { seconds, stalledMs } = await probed(url, () =>
        apiJson(restorePath, { method: "POST", cookie, body: JSON.stringify({ timestamp }) }),
      );
      console.log(
        `  PITR ${label}: ${seconds.toFixed(2)} s (target ≤ 2 s); slowest health answer meanwhile ${stalledMs.toFixed(0)} ms`,
      );
    }
    const peakAfter = memoryOf(child.pid).hwm;
    console.log(
      `  peak RSS ${(peakBefore / MB).toFixed(0)} MB before the restores, ${(peakAfter / MB).toFixed(0)} MB after`,
    );
    const { seconds, stalledMs } = await probed(url, () =>
      apiJson(`${backupsPath}/${backup.id}/restore`, { method: "POST", cookie }),
    );
    console.log(
      `  backup restore over the ${CHANGES} changes: ${seconds.toFixed(2)} s (target ≤ 5 s); slowest health answer meanwhile ${stalledMs.toFixed(0)} ms; ` +
        `peak RSS ${(memoryOf(child.pid).hwm / MB).toFixed(0)} MB`,
    );
    for (const [label, id] of [
      ["to the empty snapshot (every item deleted)", emptyBackup.id],
      [`to the ${ITEMS}-item snapshot (every item inserted)`, backup.id],
    ] as const) {
      const full = await probed(url, () => apiJson(`${backupsPath}/${id}/restore`, { method: "POST", cookie }));
      console.log(
        `  backup restore ${label}: ${full.seconds.toFixed(2)} s (target ≤ 5 s); slowest health answer meanwhile ` +
          `${full.stalledMs.toFixed(0)} ms; peak RSS ${(memoryOf(child.pid).hwm / MB).toFixed(0)} MB`,
      );
    }
    const branchesPath = `${url}/api/org/${org.slug}/projects/${project.slug}/branches`;
    for (const [label, extra] of [
      ["now", {}],
      ["an instant before the changes", { at: beforeChanges }],
    ] as const) {
      const made = await probed(url, async () => {
        const { branch } = await apiJson(branchesPath, {
          method: "POST",
          cookie,
          body: JSON.stringify({ name: `bench-${label.length}`, ...extra }),
        });
        if (branch.status !== "active") throw new Error(`branch ${branch.status}: ${branch.error}`);
      });
      console.log(
        `  branch from ${label}: ${made.seconds.toFixed(2)} s; slowest health answer meanwhile ${made.stalledMs.toFixed(0)} ms; ` +
          `peak RSS ${(memoryOf(child.pid).hwm / MB).toFixed(0)} MB`,
      );
    }
  } finally {
    await stop();
  }
}

console.log(`restore benchmark: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.version}`);
for (const database of ["sqlite", "postgres"] as const) {
  if (ONLY.has(database)) await runOn(database);
}
