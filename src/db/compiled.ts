import { type Compilable, CompiledQuery, type Kysely } from "kysely";
import type { Reader } from "./database.ts";
import type { Database } from "./schema.ts";

/**
 * A read built with Kysely once (for the dialect's SQL) and then run through the `Reader`, for
 * the few queries on every request's path, where building and running a query through Kysely
 * costs more than the query. `build` must bind its parameters in the order they are passed.
 */
export function preparedRead<Row>(name: string, build: (db: Kysely<Database>) => Compilable<Row>) {
  const compiled = new WeakMap<Kysely<Database>, string>();
  return (deps: { db: Kysely<Database>; reader: Reader }, ...parameters: unknown[]): Promise<Row | undefined> => {
    let sqlText = compiled.get(deps.db);
    if (sqlText === undefined) {
      sqlText = compileChecked(build(deps.db), parameters.length);
      compiled.set(deps.db, sqlText);
    }
    return deps.reader.first<Row>(name, sqlText, parameters);
  };
}

/**
 * A query built with Kysely once per dialect and then run by its SQL text on any connection or
 * transaction, for queries on hot paths, where building and compiling a query through Kysely
 * costs more than running it. As with `preparedRead`, `build` binds "?" placeholders, and the
 * parameters are passed in the same order.
 */
export function precompiled<Row>(build: (db: Kysely<Database>) => Compilable<Row>) {
  const texts = new Map<string, string>();
  return async (db: Kysely<Database>, dialect: string, ...parameters: unknown[]): Promise<Row[]> => {
    let text = texts.get(dialect);
    if (text === undefined) {
      text = compileChecked(build(db), parameters.length);
      texts.set(dialect, text);
    }
    const result = await db.executeQuery<Row>(CompiledQuery.raw(text, parameters));
    return result.rows;
  };
}

/** The query's SQL; throws if it binds other than the `expected` parameters (a value built in, say). */
function compileChecked(query: Compilable<unknown>, expected: number): string {
  const compiled = query.compile();
  if (compiled.parameters.length !== expected) {
    throw new Error(
      `a precompiled query binds ${compiled.parameters.length} parameters, not ${expected}: ${compiled.sql}`,
    );
  }
  return compiled.sql;
}
