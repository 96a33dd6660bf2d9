import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./ports.ts";

/**
 * A real S3 server for the tests: OpenStack Swift (Debian's packages) with its s3api middleware,
 * one replica on one device in a temp directory, started and stopped by the test. `.ci/run`
 * installs the packages; `swiftInstalled` says whether they are here.
 */
export interface Swift {
  /** `s3://…@127.0.0.1:port/<bucket>?tls=false` for STORAGE_URL. */
  storageUrl(bucket: string): string;
  /** The proxy's origin (`http://127.0.0.1:port`). */
  endpoint: string;
  /** Stops the proxy (every S3 request fails) until `resume`. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  stop(): Promise<void>;
}

export const swiftInstalled = existsSync("/usr/bin/swift-proxy-server") && existsSync("/usr/bin/swift-ring-builder");

/**
 * Whether a test file of the S3 tests skips: only when Swift is not installed, and then with a
 * warning; where the run requires it (PLINTH_REQUIRE_SWIFT=1, as `.ci/run` sets) it fails instead.
 */
export function skipWithoutSwift(file: string): boolean {
  if (swiftInstalled) return false;
  if (process.env.PLINTH_REQUIRE_SWIFT === "1") {
    throw new Error(
      `${file}: Swift is not installed (apt-get install swift swift-proxy swift-object swift-container swift-account)`,
    );
  }
  console.warn(`${file}: Swift is not installed here; skipping its S3 tests`);
  return true;
}

const ACCESS_KEY = "test:tester";
const SECRET_KEY = "testing";

const PIPELINE =
  "catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk s3api tempauth copy slo dlo versioned_writes symlink proxy-logging proxy-server";

const FILTERS = [
  "catch_errors",
  "gatekeeper",
  "healthcheck",
  "proxy_logging",
  "memcache",
  "listing_formats",
  "bulk",
  "s3api",
  "tempauth",
  "copy",
  "slo",
  "dlo",
  "versioned_writes",
  "symlink",
];

export async function startSwift(): Promise<Swift> {
  const dir = mkdtempSync(path.join(tmpdir(), "plinth-swift-"));
  const devices = path.join(dir, "devices");
  mkdirSync(path.join(devices, "d1"), { recursive: true });
  const ports = { object: await freePort(), container: await freePort(), account: await freePort(), proxy: 0 };
  ports.proxy = await freePort();
  for (const ring of ["account", "container", "object"] as const) {
    const builder = path.join(dir, `${ring}.builder`);
    execFileSync("swift-ring-builder", [builder, "create", "6", "1", "1"], { stdio: "ignore" });
    execFileSync("swift-ring-builder", [builder, "add", `r1z1-127.0.0.1:${ports[ring]}/d1`, "100"], {
      stdio: "ignore",
    });
    // rebalance exits 1 with a warning on a one-device ring; the ring is written all the same.
    try {
      execFileSync("swift-ring-builder", [builder, "rebalance"], { stdio: "ignore" });
    } catch {}
    if (!existsSync(path.join(dir, `${ring}.ring.gz`))) throw new Error(`swift: the ${ring} ring was not built`);
  }
  // The hash path settings every server reads; the package's, or one of our own.
  if (existsSync("/etc/swift/swift.conf")) copyFileSync("/etc/swift/swift.conf", path.join(dir, "swift.conf"));
  const common = (port: number) =>
    `[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = ${port}\nswift_dir = ${dir}\nuser = root\nworkers = 0\nlog_level = ERROR\n`;
  for (const server of ["object", "container", "account"] as const) {
    writeFileSync(
      path.join(dir, `${server}-server.conf`),
      `${common(ports[server])}devices = ${devices}\nmount_check = false\n\n[pipeline:main]\npipeline = ${server}-server\n\n[app:${server}-server]\nuse = egg:swift#${server}\n\n[${server}-replicator]\n[${server}-updater]\n[${server}-auditor]\n`,
    );
  }
  const filters = FILTERS.map(
    (name) =>
      `[filter:${name === "proxy_logging" ? "proxy-logging" : name === "memcache" ? "cache" : name}]\nuse = egg:swift#${name}\n${name === "tempauth" ? `user_test_tester = ${SECRET_KEY} .admin\n` : ""}`,
  ).join("\n");
  writeFileSync(
    path.join(dir, "proxy-server.conf"),
    `${common(ports.proxy)}\n[pipeline:main]\npipeline = ${PIPELINE}\n\n[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n\n${filters}`,
  );

  const children: ChildProcess[] = [];
  let proxy: ChildProcess | undefined;
  const run = (server: string) => {
    const child = spawn(`swift-${server}-server`, [path.join(dir, `${server}-server.conf`)], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    child.once("exit", (code) => {
      if (code && code !== 0 && !child.killed) console.error(`swift-${server}-server exited ${code}: ${stderr}`);
    });
    return child;
  };
  for (const server of ["object", "container", "account"]) children.push(run(server));
  await Promise.all([ports.object, ports.container, ports.account].map(waitForPort));
  const endpoint = `http://127.0.0.1:${ports.proxy}`;
  const startProxy = async () => {
    proxy = run("proxy");
    await waitForHealth(endpoint);
  };
  await startProxy();
  const stopChild = (child: ChildProcess | undefined) =>
    new Promise<void>((resolve) => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    });
  return {
    endpoint,
    storageUrl: (bucket) =>
      `s3://${encodeURIComponent(ACCESS_KEY)}:${encodeURIComponent(SECRET_KEY)}@127.0.0.1:${ports.proxy}/${bucket}?tls=false`,
    pause: () => stopChild(proxy),
    resume: startProxy,
    async stop() {
      await Promise.all([proxy, ...children].map(stopChild));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until something listens on 127.0.0.1:`port` (a storage server has started). */
async function waitForPort(port: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`swift: nothing listens on ${port} after 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Swift is ready once its proxy's `/healthcheck` answers 200 (a few seconds). */
async function waitForHealth(endpoint: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${endpoint}/healthcheck`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error("swift did not become healthy within 60 s");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
