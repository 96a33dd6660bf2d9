import { z } from "@hono/zod-openapi";
import { httpUrl } from "../fields.ts";

export const INTEGRATION_KINDS = ["slack", "discord", "datadog", "github"] as const;
export type IntegrationKind = (typeof INTEGRATION_KINDS)[number];

/**
 * What each provider needs in `config`; the named secret fields are never returned. `destination`
 * names the fields that decide where the secrets are sent: changing one needs the secrets again.
 */
export const PROVIDER_CONFIG = {
  slack: { schema: z.object({ webhookUrl: httpUrl }).loose(), secrets: ["webhookUrl"], destination: [] },
  discord: { schema: z.object({ webhookUrl: httpUrl }).loose(), secrets: ["webhookUrl"], destination: [] },
  datadog: {
    schema: z
      .object({
        apiKey: z.string().min(1),
        site: z
          .string()
          // datadoghq.com, datadoghq.eu, us3/us5/ap1/ap2.datadoghq.com, ddog-gov.com, …; any
          // other address goes in apiUrl.
          .regex(
            /^(?:[a-z0-9]+\.)?(?:datadoghq\.com|datadoghq\.eu|ddog-gov\.com)$/,
            "must be a Datadog site such as datadoghq.eu (another address goes in apiUrl)",
          )
          .default("datadoghq.com"),
        apiUrl: httpUrl.optional(),
      })
      .loose(),
    secrets: ["apiKey"],
    destination: ["site", "apiUrl"],
  },
  github: {
    schema: z
      .object({
        repo: z.string().regex(/^[A-Za-z0-9_-][\w.-]*\/[A-Za-z0-9_-][\w.-]*$/, "must be owner/name"),
        token: z.string().min(1),
        apiUrl: httpUrl.optional(),
      })
      .loose(),
    secrets: ["token"],
    destination: ["apiUrl"],
  },
} as const satisfies Record<
  IntegrationKind,
  { schema: z.ZodType; secrets: readonly string[]; destination: readonly string[] }
>;

/**
 * Why an integration cannot send (its config lacks what the provider needs), or null. SPEC makes
 * `config` optional with arbitrary values, so an integration may be created without the provider's
 * fields, or with some of them; each of its attempts then fails saying so, until a PATCH
 * supplies them.
 */
export function unconfigured(kind: IntegrationKind, config: Record<string, unknown>): string | null {
  const parsed = PROVIDER_CONFIG[kind].schema.safeParse(config);
  if (parsed.success) return null;
  const fields = [...new Set(parsed.error.issues.map((issue) => ["config", ...issue.path.map(String)].join(".")))];
  return `integration is not configured: ${fields.join(", ")} needed`;
}

export interface OrgEvent {
  event: string;
  payload: Record<string, unknown>;
  timestamp: number;
  org: { slug: string; name: string };
}

export interface ProviderRequest {
  url: string;
  body: string;
}

function summary(event: OrgEvent): string {
  const project = typeof event.payload.projectSlug === "string" ? ` (project ${event.payload.projectSlug})` : "";
  return `Plinth: ${event.event} in ${event.org.name}${project}`;
}

function apiBase(config: Record<string, unknown>, fallback: string): string {
  // The lookbehind starts a match only at the first of the trailing slashes: a bare `\/+$` would
  // try again from each slash of every run, quadratic in the URL's length.
  return typeof config.apiUrl === "string" ? config.apiUrl.replace(/(?<!\/)\/+$/, "") : fallback;
}

/** Where a provider's requests go (empty while unconfigured); read from the current config at every attempt. */
export function providerUrl(kind: IntegrationKind, config: Record<string, unknown>): string {
  switch (kind) {
    case "slack":
    case "discord":
      return typeof config.webhookUrl === "string" ? config.webhookUrl : "";
    case "datadog":
      return `${apiBase(config, `https://api.${String(config.site ?? "datadoghq.com")}`)}/api/v1/events`;
    case "github":
      return typeof config.repo === "string"
        ? `${apiBase(config, "https://api.github.com")}/repos/${config.repo}/dispatches`
        : "";
  }
}

/** The provider-shaped request for an event: where it goes and what it says (no credentials). */
export function providerRequest(
  kind: IntegrationKind,
  config: Record<string, unknown>,
  event: OrgEvent,
): ProviderRequest {
  return { url: providerUrl(kind, config), body: JSON.stringify(providerBody(kind, event)) };
}

function providerBody(kind: IntegrationKind, event: OrgEvent): Record<string, unknown> {
  switch (kind) {
    case "slack":
      return {
        text: summary(event),
        blocks: [
          {
            type: "section",
            text: { type: "mrkdwn", text: `*${summary(event)}*\n\`\`\`${JSON.stringify(event.payload)}\`\`\`` },
          },
        ],
      };
    case "discord":
      return { content: summary(event), embeds: [{ title: event.event, description: JSON.stringify(event.payload) }] };
    case "datadog":
      return {
        title: summary(event),
        text: JSON.stringify(event.payload),
        date_happened: event.timestamp,
        alert_type: event.event.endsWith(".failed") || event.event === "alarm.fired" ? "error" : "info",
        source_type_name: "plinth",
        tags: ["source:plinth", `event:${event.event}`, `org:${event.org.slug}`],
      };
    case "github":
      return {
        event_type: event.event,
        client_payload: { event: event.event, payload: event.payload, timestamp: event.timestamp, org: event.org.slug },
      };
  }
}

/** Credentials a provider takes in headers; added at send time, never stored with a delivery. */
export function providerAuthHeaders(kind: IntegrationKind, config: Record<string, unknown>): Record<string, string> {
  switch (kind) {
    case "datadog":
      return { "DD-API-KEY": String(config.apiKey) };
    case "github":
      return {
        Authorization: `Bearer ${String(config.token)}`,
        Accept: "application/vnd.github+json",
        "User-Agent": "plinth",
      };
    default:
      return {};
  }
}
