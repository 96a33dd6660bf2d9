import { describe, expect, it } from "vitest";
import { chunked, inList } from "../src/db/shapes.ts";

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
