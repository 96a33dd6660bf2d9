import { AggregatorRegistry, Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * Plinth's metrics (DESIGN §16), in one registry per thread: the HTTP series under
 * OpenTelemetry's names, and Plinth's own. A worker thread counts in its own registry, which its
 * server adds to what it shows (`metricsText`).
 */
export const registry = new Registry();

/** OpenTelemetry's recommended boundaries for `http.server.request.duration`, in seconds. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

export const requestDuration = new Histogram({
  name: "http_server_request_duration_seconds",
  help: "Duration of HTTP server requests, by method, route template and status code.",
  labelNames: ["http_request_method", "http_route", "http_response_status_code"] as const,
  buckets: DURATION_BUCKETS,
  registers: [registry],
});

export const activeRequests = new Gauge({
  name: "http_server_active_requests",
  help: "HTTP server requests in flight.",
  labelNames: ["http_request_method"] as const,
  registers: [registry],
});

export const webhookDeliveries = new Counter({
  name: "plinth_webhook_deliveries_total",
  help: "Webhook delivery attempts, by kind (control: org webhooks and integrations; workspace) and outcome.",
  labelNames: ["kind", "outcome"] as const,
  registers: [registry],
});

export const storageErrors = new Counter({
  name: "plinth_storage_errors_total",
  help: "Object storage requests that failed or could not reach the server.",
  registers: [registry],
});

/** What the gauges read at scrape time, given by the running server. */
export interface GaugeSources {
  /** Jobs due to run now, and how long the oldest of them has waited (seconds; 0 when none). */
  readyJobs(): Promise<{ ready: number; oldestSeconds: number }>;
  workspacesOpen(): number;
}

/** The running servers' sources (one in production; tests start several in one process). */
const sources: GaugeSources[] = [];

/** Adds what the gauges read; returns what takes it away (at the server's close). */
export function setGaugeSources(next: GaugeSources): () => void {
  sources.push(next);
  return () => {
    const at = sources.indexOf(next);
    if (at >= 0) sources.splice(at, 1);
  };
}

const jobsReady = new Gauge({
  name: "plinth_jobs_ready",
  help: "Jobs due to run now and not yet claimed.",
  registers: [registry],
});

const jobsOldestReady = new Gauge({
  name: "plinth_jobs_oldest_ready_seconds",
  help: "How long the oldest job due to run has waited, in seconds.",
  registers: [registry],
});

new Gauge({
  name: "plinth_workspaces_open",
  help: "Workspaces this process holds open.",
  registers: [registry],
  collect() {
    this.set(sources.reduce((open, source) => open + source.workspacesOpen(), 0));
  },
});

let defaultsOn = false;

/**
 * The exposition text: this thread's registry, the job gauges read once, and `others` (a worker
 * thread's registries, as JSON) added in. Process metrics are collected from the first call on.
 */
export async function metricsText(others: object[][] = []): Promise<string> {
  if (!defaultsOn) {
    collectDefaultMetrics({ register: registry });
    defaultsOn = true;
  }
  // The queue is the database's, the same for every server on it: the latest server's reads it.
  const jobs = (await sources.at(-1)?.readyJobs()) ?? { ready: 0, oldestSeconds: 0 };
  jobsReady.set(jobs.ready);
  jobsOldestReady.set(jobs.oldestSeconds);
  if (others.length === 0) return registry.metrics();
  const all = [await registry.getMetricsAsJSON(), ...others];
  return AggregatorRegistry.aggregate(all).metrics();
}

/** This thread's counters as JSON, for the server to add in (a worker thread's). */
export function countersJson(): Promise<object[]> {
  return registry.getMetricsAsJSON();
}

export const METRICS_CONTENT_TYPE = registry.contentType;
