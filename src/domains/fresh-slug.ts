import { isUniqueViolation } from "../db/database.ts";
import { ConflictError } from "../errors.ts";

const SLUG_ATTEMPTS = 5;

/**
 * Runs `insert`, a transaction that picks the first free slug (`firstFreeSlug`) and inserts a row
 * with it, until it commits. Two different names can still want the same slug ("Acme 2" and a
 * second "Acme" both want `acme-2`): the unique index refuses the loser, which picks again.
 */
export async function withFreshSlug<T>(what: string, insert: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await insert();
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      if (attempt >= SLUG_ATTEMPTS) throw new ConflictError(`could not allocate a unique ${what} slug; try again`);
    }
  }
}
