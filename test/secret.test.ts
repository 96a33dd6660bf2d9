import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { resolveAuthSecret } from "../src/auth/secret.ts";

const run = promisify(execFile);
const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "plinth-secret-"));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("the generated AUTH_SECRET", () => {
  it("is generated once and kept in DATA_DIR; AUTH_SECRET, when set, wins", () => {
    const dir = freshDir();
    const first = resolveAuthSecret(undefined, dir);
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(resolveAuthSecret(undefined, dir)).toBe(first);
    expect(readFileSync(path.join(dir, "auth-secret"), "utf8")).toBe(first);
    expect(resolveAuthSecret("configured-secret-configured-secret", dir)).toBe("configured-secret-configured-secret");
  });

  it("is the same for processes that start together on a fresh DATA_DIR", async () => {
    const dir = freshDir();
    const script = `import { resolveAuthSecret } from ${JSON.stringify(path.resolve("src/auth/secret.ts"))};
      process.stdout.write(resolveAuthSecret(undefined, ${JSON.stringify(dir)}));`;
    const outputs = await Promise.all(
      Array.from({ length: 6 }, () =>
        run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script]).then((r) => r.stdout),
      ),
    );
    expect(outputs[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set(outputs).size).toBe(1);
  });

  it("refuses a kept file too short to be a secret, naming it", () => {
    const dir = freshDir();
    writeFileSync(path.join(dir, "auth-secret"), "");
    expect(() => resolveAuthSecret(undefined, dir)).toThrow(/auth-secret holds no usable secret/);
  });
});
