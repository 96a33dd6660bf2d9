import type { Deps } from "../../deps.ts";

/** What an integration's config is bound to when sealed: its own row. */
const contextOf = (id: string) => `integration:${id}`;

/** An integration's config as stored: sealed, for it holds the provider's credentials (DESIGN §6). */
export function sealIntegrationConfig(deps: Pick<Deps, "secrets">, id: string, config: Record<string, unknown>) {
  return deps.secrets.sealJson(config, contextOf(id));
}

/** An integration's config, opened (a config stored before sealing reads as it is). */
export function integrationConfig(
  deps: Pick<Deps, "secrets">,
  row: { id: string; config: string },
): Record<string, unknown> {
  return deps.secrets.openJson<Record<string, unknown>>(row.config, contextOf(row.id), {});
}
