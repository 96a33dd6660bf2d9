import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chunked, inList, insertRows, oneOf } from "../src/db/shapes.ts";
import { startApp, type TestApp } from "./harness.ts";

const numbers = (n: number) => Array.from({ length: n }, (_, i) => i);

describe("statement shapes", () => {
  it("cuts rows into power-of-two chunks on SQLite, largest first, none over the maximum", () => {
    expect(chunked("sqlite", numbers(83), 500).map((chunk) => chunk.length)).toEqual([64, 16, 2, 1]);
    expect(chunked("sqlite", numbers(300), 200).map((chunk) => chunk.length)).toEqual([128, 128, 32, 8, 4]);
    expect(chunked("sqlite", numbers(83), 500).flat()).toEqual(numbers(83));
    expect(chunked("sqlite", [], 500)).toEqual([]);
  });

  it("cuts only at the maximum on PostgreSQL", () => {
    expect(chunked("postgres", numbers(83), 50).map((chunk) => chunk.length)).toEqual([50, 33]);
    expect(chunked("postgres", numbers(83), 500).map((chunk) => chunk.length)).toEqual([83]);
  });

  it("pads IN lists to a power of two with their last value on SQLite, and leaves them alone on PostgreSQL", () => {
    expect(inList("sqlite", ["a", "b", "c", "d", "e"])).toEqual(["a", "b", "c", "d", "e", "e", "e", "e"]);
    expect(inList("sqlite", ["a", "b", "c", "d"])).toEqual(["a", "b", "c", "d"]);
    expect(inList("sqlite", ["a", "b"])).toEqual(["a", "b"]);
    expect(inList("sqlite", [])).toEqual([]);
    expect(inList("postgres", ["a", "b", "c", "d", "e"])).toEqual(["a", "b", "c", "d", "e"]);
  });
});

describe("insertRows and oneOf, against the test database", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(() => app.close());

  // Quotes, backslashes, line breaks, non-ASCII and JSON inside a string, nulls and integers: on
  // PostgreSQL the rows travel as one JSON parameter and must arrive exactly as given.
  const awkward = ['say "hi"', "back\\slash \\u0041", "line\nbreak\ttab", "héllo ✓ 🚀", '{"a":[1,"two"]}', "", "null"];
  const attempt = (id: string, text: string | null, statusCode: number | null) => ({
    id,
    delivery_id: "dlv_shapes",
    attempt: 7,
    status_code: statusCode,
    latency_ms: 12,
    error: text,
    response_body: text === null ? null : `${text}!`,
    request_headers: null,
    url: null,
    created_at: "2026-01-02T03:04:05.678Z",
  });

  it("inserts every row exactly as given, skips conflicts, and returns the ids it inserted", async () => {
    const { db, dialect } = app.server.deps;
    const rows = [
      ...awkward.map((text, i) => attempt(`att_shapes_${i}`, text, 200 + i)),
      attempt("att_shapes_null", null, null),
    ];
    const many = Array.from({ length: 150 }, (_, i) =>
      attempt(`att_many_${String(i).padStart(3, "0")}`, `row ${i}`, 500),
    );

    expect(await insertRows(db, dialect, "webhook_attempts", rows)).toEqual([]);
    const inserted = await insertRows(db, dialect, "webhook_attempts", [...many, rows[0] as (typeof rows)[0]], {
      skipConflictOn: "id",
      returningIds: true,
    });
    expect(inserted.sort()).toEqual(many.map((row) => row.id));

    const ids = [...rows.map((row) => row.id), "att_absent"];
    const read = await db
      .selectFrom("webhook_attempts")
      .selectAll()
      .where(oneOf(dialect, "id", ids))
      .orderBy("id")
      .execute();
    expect(read).toEqual([...rows].sort((a, b) => (a.id < b.id ? -1 : 1)));
    const counted = await db
      .selectFrom("webhook_attempts")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where(oneOf(dialect, "id", [...many.map((row) => row.id), ...ids]))
      .executeTakeFirstOrThrow();
    expect(Number(counted.n)).toBe(many.length + rows.length);
  });
});
