import type { Compilable, Kysely } from "kysely";
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
      sqlText = build(deps.db).compile().sql;
      compiled.set(deps.db, sqlText);
    }
    return deps.reader.first<Row>(name, sqlText, parameters);
  };
}
