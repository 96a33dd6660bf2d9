/**
 * Files, backups' file bytes and export dumps in an S3 bucket (DESIGN §16), against a real S3
 * server: OpenStack Swift with s3api, started here. Runs on both databases.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import path from "node:path";
import { AwsClient } from "aws4fetch";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { removeExpiredDumps } from "../src/domains/exports/jobs.ts";
import { sweepUploadLeftovers } from "../src/domains/workspace/files.ts";
import { WorkspacePool } from "../src/domains/workspace/pool.ts";
import { localStore } from "../src/domains/workspace/store.ts";
import { backupFilesPrefix, fileKey, filesPrefix, orgExportsPrefix, projectPrefix } from "../src/storage/keys.ts";
import {
  call,
  callWorkspace,
  createActiveProject,
  expectError,
  expectStatus,
  ownerWithOrg,
  startApp,
  storedKeys,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";
import { type Swift, skipWithoutSwift, startSwift } from "./swift.ts";

const MiB = 1024 * 1024;
const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");

describe.skipIf(skipWithoutSwift("storage.test.ts"))("object storage in an S3 bucket", () => {
  let swift: Swift;
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let orgId: string;
  let project: { id: string; slug: string; adminToken: string };

  beforeAll(async () => {
    swift = await startSwift();
    app = await startApp({ STORAGE_URL: swift.storageUrl("plinth-tests"), PROJECT_PURGE_DAYS: "0" });
    ({ owner, slug, orgId } = await ownerWithOrg(app, "Bucket Org"));
    project = await createActiveProject(app, owner, slug, "Bucketed");
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await swift?.stop();
  });

  const upload = async (
    workspaceId: string,
    token: string,
    name: string,
    body: Uint8Array | string,
    { multipart = false } = {},
  ) => {
    const form = new FormData();
    if (multipart) form.append("file", new Blob([body as BlobPart]), name);
    const response = await fetch(
      `${app.url}/w/${workspaceId}/api/files${multipart ? "" : `?name=${encodeURIComponent(name)}`}`,
      {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          ...(multipart ? {} : { "content-type": "application/octet-stream" }),
        },
        body: multipart ? form : (body as BodyInit),
      },
    );
    return { status: response.status, body: (await response.json()) as any };
  };
  const uploaded = async (workspaceId: string, token: string, name: string, body: Uint8Array | string) => {
    const result = await upload(workspaceId, token, name, body);
    expect(result.status, JSON.stringify(result.body)).toBe(201);
    return result.body.file.id as string;
  };
  const download = async (workspaceId: string, token: string, id: string) => {
    const response = await fetch(`${app.url}/w/${workspaceId}/api/files/${id}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    return { status: response.status, bytes, text: () => Buffer.from(bytes).toString("utf8") };
  };
  const ws = (method: string, pathname: string, body?: unknown) =>
    callWorkspace(app, project.id, method, pathname, {
      token: project.adminToken,
      ...(body === undefined ? {} : { body }),
    });
  const sweep = () =>
    sweepUploadLeftovers(app.server.deps, localStore(new WorkspacePool(app.server.deps, 4), app.server.deps.dialect));

  it("stores uploads in the bucket, small and in parts, raw and multipart, and streams them back whole", async () => {
    const small = "a small file";
    const big = randomBytes(20 * MiB + 12_345);
    const smallId = await uploaded(project.id, project.adminToken, "small.txt", small);
    const bigId = await uploaded(project.id, project.adminToken, "big.bin", big);
    const viaForm = await upload(project.id, project.adminToken, "form.bin", big.subarray(0, 9 * MiB), {
      multipart: true,
    });
    expectStatus({ status: viaForm.status } as never, 201);
    expect(viaForm.body.file).toMatchObject({ name: "form.bin", size: 9 * MiB });

    expect((await download(project.id, project.adminToken, smallId)).text()).toBe(small);
    const back = await download(project.id, project.adminToken, bigId);
    expect(back.status).toBe(200);
    expect(back.bytes.length).toBe(big.length);
    expect(sha256(back.bytes)).toBe(sha256(big));
    const formBack = await download(project.id, project.adminToken, viaForm.body.file.id);
    expect(sha256(formBack.bytes)).toBe(sha256(big.subarray(0, 9 * MiB)));

    // In the bucket under the project's keys, and nothing of them under DATA_DIR.
    const keys = await storedKeys(app.server.deps, filesPrefix(project.id));
    expect(keys).toEqual(expect.arrayContaining([smallId, bigId].map((id) => fileKey(project.id, id))));
    expect(existsSync(path.join(app.config.dataDir, "projects"))).toBe(false);
    expect(existsSync(path.join(app.config.dataDir, "files"))).toBe(false);
  });

  it("refuses an upload past MAX_FILE_BYTES with 413, leaving no object and no unfinished upload", async () => {
    const limited = await startApp({
      STORAGE_URL: swift.storageUrl("plinth-limited"),
      MAX_FILE_BYTES: String(10 * MiB),
    });
    try {
      const { owner: o, slug: s } = await ownerWithOrg(limited, "Limited Org");
      const p = await createActiveProject(limited, o, s, "Limited");
      const response = await fetch(`${limited.url}/w/${p.id}/api/files?name=huge.bin`, {
        method: "POST",
        headers: { authorization: `Bearer ${p.adminToken}`, "content-type": "application/octet-stream" },
        // Chunked: the limit is found while the bytes stream, past the first part.
        body: new Blob([randomBytes(12 * MiB)]).stream(),
        duplex: "half",
      } as RequestInit);
      expect(response.status).toBe(413);
      expect(((await response.json()) as any).error.code).toBe("PAYLOAD_TOO_LARGE");
      expect(await storedKeys(limited.server.deps, filesPrefix(p.id))).toEqual([]);
      expect(await unfinishedUploads("plinth-limited")).toEqual([]);
    } finally {
      await limited.close();
    }
  });

  it("keeps a deleted file's bytes while the history holds it; the sweep removes leftovers and spares the rest", async () => {
    const { deps } = app.server;
    const kept = await uploaded(project.id, project.adminToken, "kept.txt", "kept");
    const deleted = await uploaded(project.id, project.adminToken, "deleted.txt", "deleted");
    expect((await ws("DELETE", `/files/${deleted}`)).status).toBe(204);
    // An object no row lists (a crash between the bytes and the row), and an unfinished upload.
    await deps.storage.put(fileKey(project.id, "fil_orphan"), "orphan");
    await startUnfinishedUpload("plinth-tests", fileKey(project.id, "fil_cut_short"));

    // Today: all of it is too recent to be a leftover.
    await sweep();
    expect(await deps.storage.has(fileKey(project.id, "fil_orphan"))).toBe(true);
    expect(await unfinishedUploads("plinth-tests")).toHaveLength(1);

    app.clock.advance(2 * DAY_MS);
    try {
      await sweep();
      expect(await deps.storage.has(fileKey(project.id, "fil_orphan"))).toBe(false);
      expect(await unfinishedUploads("plinth-tests")).toEqual([]);
      // Listed, and deleted but still in the history (a restore to before the delete needs it).
      expect(await deps.storage.has(fileKey(project.id, kept))).toBe(true);
      expect(await deps.storage.has(fileKey(project.id, deleted))).toBe(true);
    } finally {
      app.clock.advance(-2 * DAY_MS);
    }
    expect((await download(project.id, project.adminToken, kept)).text()).toBe("kept");
  });

  it("backs up file bytes by copying them in the bucket, and a restore brings back bytes deleted since", async () => {
    const { deps } = app.server;
    const p = await createActiveProject(app, owner, slug, "Backed up");
    const id = await uploaded(p.id, p.adminToken, "precious.txt", "precious bytes");
    const backup = await settledBackup(p.slug);
    expect(backup.status).toBe("completed");
    expect(await storedKeys(deps, backupFilesPrefix(p.id, backup.id))).toEqual([
      `${backupFilesPrefix(p.id, backup.id)}${id}`,
    ]);
    // The file deleted and its bytes gone from the workspace's keys.
    expect((await callWorkspace(app, p.id, "DELETE", `/files/${id}`, { token: p.adminToken })).status).toBe(204);
    await deps.storage.delete([fileKey(p.id, id)]);
    expect((await download(p.id, p.adminToken, id)).status).toBe(404);

    const restored = await call(app, "POST", `/org/${slug}/projects/${p.slug}/backups/${backup.id}/restore`, {
      cookie: owner.cookie,
    });
    expectStatus(restored, 200);
    expect((await download(p.id, p.adminToken, id)).text()).toBe("precious bytes");
  });

  it("gives a branch copies of its project's files, which outlive the project's", async () => {
    const p = await createActiveProject(app, owner, slug, "Branched");
    const id = await uploaded(p.id, p.adminToken, "shared.txt", "in the project and the branch");
    const created = await call(app, "POST", `/org/${slug}/projects/${p.slug}/branches`, {
      cookie: owner.cookie,
      body: { name: "feature" },
    });
    expectStatus(created, 201);
    const branch = { id: created.body.branch.id as string, token: created.body.adminToken as string };
    expect((await download(branch.id, branch.token, id)).text()).toBe("in the project and the branch");
    // The project's copy gone: the branch's is its own.
    await app.server.deps.storage.delete([fileKey(p.id, id)]);
    expect((await download(branch.id, branch.token, id)).text()).toBe("in the project and the branch");
    const own = await uploaded(branch.id, branch.token, "branch-only.txt", "only in the branch");
    expect(await app.server.deps.storage.has(fileKey(branch.id, own))).toBe(true);
  });

  it("writes export dumps to the bucket, serves them, and removes them past the retention", async () => {
    const exported = await call(app, "POST", `/org/${slug}/export`, { cookie: owner.cookie });
    expectStatus(exported, 200);
    const [first] = exported.body.projects as { slug: string; filename: string }[];
    if (!first) throw new Error("no dump");
    expect(await storedKeys(app.server.deps, orgExportsPrefix(orgId))).toContain(
      `${orgExportsPrefix(orgId)}${first.filename}`,
    );
    const dump = await fetch(`${app.url}/api/org/${slug}/exports/${first.filename}`, {
      headers: { cookie: owner.cookie },
    });
    expect(dump.status).toBe(200);
    expect(await dump.text()).toContain(`Plinth export of project ${first.slug}`);
    expect(existsSync(path.join(app.config.dataDir, "exports"))).toBe(false);

    app.clock.advance(8 * DAY_MS);
    try {
      await removeExpiredDumps(app.server.deps);
    } finally {
      app.clock.advance(-8 * DAY_MS);
    }
    expect(await storedKeys(app.server.deps, orgExportsPrefix(orgId))).toEqual([]);
  });

  it("purges a deleted project's objects: files and backups", async () => {
    const { deps } = app.server;
    const p = await createActiveProject(app, owner, slug, "Purged");
    await uploaded(p.id, p.adminToken, "doomed.txt", "doomed");
    await settledBackup(p.slug);
    expect((await storedKeys(deps, projectPrefix(p.id))).length).toBe(2);
    expectStatus(await call(app, "DELETE", `/org/${slug}/projects/${p.slug}`, { cookie: owner.cookie }), 200);
    await deps.jobs.enqueue(deps.db, { kind: "projects.purge", payload: {} });
    await until("the purge", async () => (await storedKeys(deps, projectPrefix(p.id))).length === 0, 20_000);
  });

  it("answers 503 UNAVAILABLE while the storage is down, loses nothing, and readiness says so", async () => {
    const id = await uploaded(project.id, project.adminToken, "before.txt", "stored before the outage");
    expectStatus(await call(app, "GET", "/health/ready"), 200);
    await swift.pause();
    try {
      expectError(await call(app, "GET", "/health/ready"), 503, "UNAVAILABLE");
      const ready = await call(app, "GET", "/health/ready");
      expect(ready.body.error.details).toEqual({ database: "ok", storage: "unreachable" });
      // Liveness is not readiness.
      expectStatus(await call(app, "GET", "/health"), 200);
      const refused = await upload(project.id, project.adminToken, "during.txt", "never stored");
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe("UNAVAILABLE");
      const read = await fetch(`${app.url}/w/${project.id}/api/files/${id}`, {
        headers: { authorization: `Bearer ${project.adminToken}` },
      });
      expect(read.status).toBe(503);
      // What needs no storage goes on.
      expect((await ws("POST", "/collections", { slug: `during-${Date.now()}` })).status).toBe(201);
    } finally {
      await swift.resume();
    }
    expectStatus(await call(app, "GET", "/health/ready"), 200);
    expect((await download(project.id, project.adminToken, id)).text()).toBe("stored before the outage");
    const listed = await ws("GET", "/files?limit=500");
    expect(listed.body.files.map((file: { name: string }) => file.name)).not.toContain("during.txt");
  });

  async function settledBackup(projectSlug: string) {
    const created = await call(app, "POST", `/org/${slug}/projects/${projectSlug}/backups`, { cookie: owner.cookie });
    expectStatus(created, 201);
    return until("the backup to settle", async () => {
      const read = await call(app, "GET", `/org/${slug}/projects/${projectSlug}/backups/${created.body.backup.id}`, {
        cookie: owner.cookie,
      });
      return read.body.backup?.status !== "pending" ? read.body.backup : undefined;
    });
  }

  const s3 = () =>
    new AwsClient({
      accessKeyId: "test:tester",
      secretAccessKey: "testing",
      service: "s3",
      region: "us-east-1",
      retries: 0,
    });

  async function unfinishedUploads(bucket: string): Promise<string[]> {
    const response = await s3().fetch(`${swift.endpoint}/${bucket}?uploads`);
    const text = await response.text();
    return [...text.matchAll(/<Upload>[\s\S]*?<Key>([^<]*)<\/Key>/g)].map((found) => found[1] as string);
  }

  async function startUnfinishedUpload(bucket: string, key: string): Promise<void> {
    const response = await s3().fetch(`${swift.endpoint}/${bucket}/${key}?uploads`, { method: "POST" });
    expect(response.status).toBe(200);
  }
});
