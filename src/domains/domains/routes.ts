import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { NotFoundError } from "../../errors.ts";
import {
  anyone,
  authedErrors,
  createRouter,
  errorResponses,
  jsonBody,
  jsonContent,
  sessionOrKey,
} from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { ProjectParams } from "../projects/schemas.ts";
import { hostOf, projectOfHost } from "./hosts.ts";
import { DomainCheckQuery, DomainInput, DomainList, DomainParams, DomainResponse } from "./schemas.ts";
import { createDomain, deleteDomain, listDomains, verifyDomain } from "./service.ts";

const tags = ["Domains"];
const domains = "/org/{slug}/projects/{projectSlug}/domains";

const createDomainRoute = createRoute({
  method: "post",
  path: domains,
  tags,
  summary: "Add a custom domain to the project (developer+)",
  description:
    "The domain starts `pending`: publish its `verification` TXT record and point it at `target`, then verify. " +
    "A job re-checks pending domains with backoff and marks them `failed` after DOMAIN_VERIFY_DAYS. " +
    "422 on a hostname that is not a DNS name of two or more labels (IPs, localhost, PUBLIC_URL's host and names beneath it); " +
    "409 when it is already this project's or active on another; 409 `PLAN_LIMIT` past 10 per project.",
  security: sessionOrKey,
  request: { params: ProjectParams, body: jsonBody(DomainInput) },
  responses: { 201: jsonContent(DomainResponse, "The domain, pending"), ...authedErrors },
});

const listDomainsRoute = createRoute({
  method: "get",
  path: domains,
  tags,
  summary: "The project's custom domains",
  security: sessionOrKey,
  request: { params: ProjectParams },
  responses: { 200: jsonContent(DomainList, "The domains"), ...authedErrors },
});

const verifyDomainRoute = createRoute({
  method: "post",
  path: `${domains}/{id}/verify`,
  tags,
  summary: "Look the domain's TXT record up now",
  description:
    "A match makes the domain `active` (requests whose Host is the domain are then served the project's workspace API at `/api/…`, " +
    "and `domain.verified` goes out); otherwise `error` says what the look-up found. A failed domain can be verified again.",
  security: sessionOrKey,
  request: { params: DomainParams },
  responses: { 200: jsonContent(DomainResponse, "The domain after the look-up"), ...authedErrors },
});

const deleteDomainRoute = createRoute({
  method: "delete",
  path: `${domains}/{id}`,
  tags,
  summary: "Remove a custom domain; it stops serving",
  security: sessionOrKey,
  request: { params: DomainParams },
  responses: { 204: { description: "Deleted" }, ...authedErrors },
});

const checkRoute = createRoute({
  method: "get",
  path: "/domains/check",
  tags,
  summary: "Whether a host is an active custom domain (the `ask` hook of on-demand TLS)",
  description: "200 when `domain` is an active custom domain of a live project, else 404. Public.",
  security: anyone,
  request: { query: DomainCheckQuery },
  responses: {
    200: jsonContent(z.object({ ok: z.boolean() }).openapi("DomainCheck"), "Active"),
    ...errorResponses(404, 422, 429),
  },
});

export function domainRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...createDomainRoute, middleware: requires(deps, "domains:manage") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await createDomain({ ctx, projectSlug, input: c.req.valid("json") }), 201);
    })
    .openapi(listDomainsRoute, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await listDomains({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi({ ...verifyDomainRoute, middleware: requires(deps, "domains:manage") }, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      return c.json(await verifyDomain({ ctx: await orgCtx(c, deps, slug), projectSlug, id }), 200);
    })
    .openapi({ ...deleteDomainRoute, middleware: requires(deps, "domains:manage") }, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      await deleteDomain({ ctx: await orgCtx(c, deps, slug), projectSlug, id });
      return c.body(null, 204);
    })
    .openapi(checkRoute, async (c) => {
      const host = hostOf(c.req.valid("query").domain);
      const ownHost = new URL(deps.config.publicUrl).hostname.toLowerCase();
      if (host === null || (await projectOfHost(deps, host, ownHost)) === null) {
        throw new NotFoundError("not an active domain");
      }
      return c.json({ ok: true }, 200);
    });
}
