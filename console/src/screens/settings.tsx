import { useState } from "preact/hooks";
import { useLocation, useRoute } from "preact-iso";
import type { Org, SsoConfig } from "../../../src/client/index.ts";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import { Button, ConfirmButton, Field, Loading, Page, ProblemNote, Secret, Select, When } from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { loadOrgs, roleIn } from "../session.ts";
import { REGIONS } from "./projects.tsx";

/** `/orgs/:slug/settings`: the org's settings, its single sign-on and SCIM, and deleting it. */
export function Settings() {
  const { slug } = useRoute().params as { slug: string };
  const overview = useLoad(() => data(api.GET("/org/{slug}/overview", { params: { path: { slug } } })), [slug]);
  return (
    <OrgLayout slug={slug}>
      <Page title="Settings">
        <Loading loaded={overview}>{({ org }) => <OrgSettings org={org} />}</Loading>
        <SingleSignOn slug={slug} />
        <Scim slug={slug} />
        <Export slug={slug} />
        <DangerZone slug={slug} />
      </Page>
    </OrgLayout>
  );
}

function OrgSettings({ org }: { org: Org }) {
  const [name, setName] = useState(org.name);
  const [region, setRegion] = useState(org.defaultRegion);
  const [allowlist, setAllowlist] = useState(org.ipAllowlist.join("\n"));
  const [webhookUrl, setWebhookUrl] = useState(org.webhookUrl ?? "");
  const [secret, setSecret] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  return (
    <form
      class="form card"
      aria-label="Organization settings"
      onSubmit={async (event) => {
        event.preventDefault();
        setSaved(false);
        await action.run(async () => {
          const answer = await data(
            api.PATCH("/org/{slug}", {
              params: { path: { slug: org.slug } },
              body: {
                name,
                defaultRegion: region as never,
                ipAllowlist: allowlist
                  .split(/\s+/)
                  .map((entry) => entry.trim())
                  .filter(Boolean),
                webhookUrl: webhookUrl.trim() ? webhookUrl.trim() : null,
              },
            }),
          );
          if (answer.webhookSecret) setSecret(answer.webhookSecret);
          setSaved(true);
          await loadOrgs();
        });
      }}
    >
      <h2>Organization</h2>
      <ProblemNote problem={action.problem} />
      <Field
        label="Organization name"
        name="name"
        required
        minLength={2}
        maxLength={80}
        value={name}
        problem={action.problem}
        onInput={(event) => setName(event.currentTarget.value)}
      />
      <Select
        label="Default region"
        name="defaultRegion"
        value={region}
        problem={action.problem}
        options={REGIONS.filter(Boolean)}
        onChange={(event) => setRegion(event.currentTarget.value)}
      />
      <div class="field">
        <label for="ip-allowlist">IP allow-list</label>
        <textarea
          id="ip-allowlist"
          rows={3}
          value={allowlist}
          aria-describedby="ip-allowlist-note"
          onInput={(event) => setAllowlist(event.currentTarget.value)}
        />
        <div id="ip-allowlist-note" class={action.problem?.fields.ipAllowlist ? "field-error" : "hint"}>
          {action.problem?.fields.ipAllowlist ??
            "Addresses or CIDR ranges, one per line: API keys are refused from elsewhere. Empty: any address."}
        </div>
      </div>
      <Field
        label="Webhook URL"
        name="webhookUrl"
        type="url"
        placeholder="https://hooks.example.com/plinth"
        hint="Receives every event of the org, signed with a secret shown once when it is set."
        value={webhookUrl}
        problem={action.problem}
        onInput={(event) => setWebhookUrl(event.currentTarget.value)}
      />
      <Button type="submit" variant="primary" busy={action.busy}>
        Save settings
      </Button>
      {saved ? <p role="status">Saved.</p> : null}
      {secret ? <Secret label="Webhook URL signing secret" value={secret} /> : null}
    </form>
  );
}

const OIDC_FIELDS = [
  ["issuer", "Issuer"],
  ["clientId", "Client ID"],
  ["clientSecret", "Client secret"],
] as const;
const SAML_FIELDS = [
  ["entryPoint", "IdP sign-in URL"],
  ["idpIssuer", "IdP issuer"],
] as const;

function SingleSignOn({ slug }: { slug: string }) {
  const sso = useLoad(() => data(api.GET("/org/{slug}/sso", { params: { path: { slug } } })), [slug]);
  return (
    <section class="card" aria-labelledby="sso">
      <h2 id="sso">Single sign-on</h2>
      <Loading loaded={sso}>
        {({ sso: current }) => <SsoForm slug={slug} current={current} onSaved={sso.reload} />}
      </Loading>
    </section>
  );
}

function SsoForm({ slug, current, onSaved }: { slug: string; current: SsoConfig | null; onSaved(): void }) {
  const [type, setType] = useState<"oidc" | "saml">(current?.type ?? "oidc");
  const [enabled, setEnabled] = useState(current?.enabled ?? false);
  const [domain, setDomain] = useState(current?.emailDomain ?? "");
  const [role, setRole] = useState<string>(current?.defaultRole ?? "viewer");
  const [config, setConfig] = useState<Record<string, string>>(
    Object.fromEntries(
      Object.entries(current?.config ?? {}).map(([key, value]) => [
        key,
        Array.isArray(value) ? value.join(", ") : String(value ?? ""),
      ]),
    ),
  );
  const action = useAction();
  const set = (key: string) => (value: string) => setConfig({ ...config, [key]: value });
  const fields = type === "oidc" ? OIDC_FIELDS : SAML_FIELDS;
  return (
    <>
      <form
        class="form"
        aria-label="Single sign-on"
        onSubmit={async (event) => {
          event.preventDefault();
          const relevant =
            type === "oidc"
              ? ["issuer", "clientId", "clientSecret", "scopes"]
              : ["entryPoint", "idpIssuer", "idpCert", "metadataXml"];
          const settings: Record<string, unknown> = Object.fromEntries(
            Object.entries(config).filter(([key, value]) => relevant.includes(key) && value.trim() !== ""),
          );
          if (typeof settings.scopes === "string") {
            settings.scopes = settings.scopes
              .split(",")
              .map((scope) => scope.trim())
              .filter(Boolean);
          }
          const body = {
            type,
            enabled,
            emailDomain: domain.trim() ? domain.trim() : null,
            defaultRole: role as "admin" | "developer" | "viewer",
            config: settings,
          };
          const done = await action.run(() => data(api.PUT("/org/{slug}/sso", { params: { path: { slug } }, body })));
          if (done) onSaved();
        }}
      >
        <ProblemNote problem={action.problem} />
        <Select
          label="Protocol"
          name="type"
          value={type}
          problem={action.problem}
          options={[
            ["oidc", "OpenID Connect"],
            ["saml", "SAML 2.0"],
          ]}
          onChange={(event) => setType(event.currentTarget.value as "oidc" | "saml")}
        />
        {fields.map(([key, label]) => (
          <Field
            key={key}
            label={label}
            name={`config.${key}`}
            value={config[key] ?? ""}
            problem={action.problem}
            onInput={(event) => set(key)(event.currentTarget.value)}
          />
        ))}
        {type === "saml" ? (
          <>
            <div class="field">
              <label for="sso-cert">IdP certificate (PEM)</label>
              <textarea
                id="sso-cert"
                rows={4}
                value={config.idpCert ?? ""}
                onInput={(event) => set("idpCert")(event.currentTarget.value)}
              />
              {action.problem?.fields["config.idpCert"] ? (
                <div class="field-error">{action.problem.fields["config.idpCert"]}</div>
              ) : null}
            </div>
            <div class="field">
              <label for="sso-metadata">Or the IdP's metadata XML</label>
              <textarea
                id="sso-metadata"
                rows={4}
                aria-describedby="sso-metadata-note"
                value={config.metadataXml ?? ""}
                onInput={(event) => set("metadataXml")(event.currentTarget.value)}
              />
              <div id="sso-metadata-note" class={action.problem?.fields["config.metadataXml"] ? "field-error" : "hint"}>
                {action.problem?.fields["config.metadataXml"] ??
                  "In place of the sign-in URL and certificate: both are read from it."}
              </div>
            </div>
          </>
        ) : (
          <Field
            label="Scopes"
            name="config.scopes"
            hint="Comma-separated, beyond openid, email and profile"
            value={config.scopes ?? ""}
            problem={action.problem}
            onInput={(event) => set("scopes")(event.currentTarget.value)}
          />
        )}
        <Field
          label="E-mail domain"
          name="emailDomain"
          placeholder="acme.com"
          hint="Single sign-on signs in addresses of this domain only, once it is proven by DNS."
          value={domain}
          problem={action.problem}
          onInput={(event) => setDomain(event.currentTarget.value)}
        />
        <Select
          label="Role of new members"
          name="defaultRole"
          value={role}
          problem={action.problem}
          options={["viewer", "developer", "admin"]}
          onChange={(event) => setRole(event.currentTarget.value)}
        />
        <div class="field checkbox">
          <input
            id="sso-enabled"
            type="checkbox"
            checked={enabled}
            onChange={(event) => setEnabled(event.currentTarget.checked)}
          />
          <label for="sso-enabled">Enabled</label>
        </div>
        <div class="actions">
          <Button type="submit" variant="primary" busy={action.busy}>
            Save single sign-on
          </Button>
          {current ? (
            <ConfirmButton
              label="Remove single sign-on"
              question="Remove single sign-on? Members sign in with their passwords again."
              onConfirm={() =>
                action.run(async () => {
                  await data(api.DELETE("/org/{slug}/sso", { params: { path: { slug } } }));
                  onSaved();
                })
              }
            />
          ) : null}
        </div>
      </form>
      {current ? <SsoDetails slug={slug} current={current} onVerified={onSaved} /> : null}
    </>
  );
}

function SsoDetails({ slug, current, onVerified }: { slug: string; current: SsoConfig; onVerified(): void }) {
  const verify = useAction();
  return (
    <div class="stack">
      <dl class="facts">
        <dt>Sign-in URL</dt>
        <dd>
          <code>{current.loginUrl}</code>
        </dd>
        {current.type === "oidc" ? (
          <>
            <dt>Redirect URI</dt>
            <dd>
              <code>{current.redirectUri}</code>
            </dd>
          </>
        ) : (
          <>
            <dt>ACS URL</dt>
            <dd>
              <code>{current.acsUrl}</code>
            </dd>
            <dt>Entity ID</dt>
            <dd>
              <code>{current.entityId}</code>
            </dd>
            <dt>Metadata</dt>
            <dd>
              <code>{current.metadataUrl}</code>
            </dd>
          </>
        )}
      </dl>
      {current.domainVerification ? (
        <div class="card">
          <h3>Domain proof</h3>
          {current.domainVerification.verifiedAt ? (
            <p>
              Proven <When at={current.domainVerification.verifiedAt} />.
            </p>
          ) : (
            <>
              <p>Publish this TXT record, then verify:</p>
              <dl class="facts">
                <dt>Name</dt>
                <dd>
                  <code>{current.domainVerification.name}</code>
                </dd>
                <dt>Value</dt>
                <dd>
                  <code>{current.domainVerification.value}</code>
                </dd>
              </dl>
              <ProblemNote problem={verify.problem} />
              <Button
                busy={verify.busy}
                onClick={async () => {
                  const done = await verify.run(() =>
                    data(api.POST("/org/{slug}/sso/verify-domain", { params: { path: { slug } } })),
                  );
                  if (done) onVerified();
                }}
              >
                Verify domain
              </Button>
            </>
          )}
        </div>
      ) : null}
    </div>
  );
}

function Scim({ slug }: { slug: string }) {
  const scim = useLoad(() => data(api.GET("/org/{slug}/scim", { params: { path: { slug } } })), [slug]);
  const action = useAction();
  const [token, setToken] = useState<string | null>(null);
  return (
    <section class="card" aria-labelledby="scim">
      <h2 id="scim">SCIM provisioning</h2>
      <ProblemNote problem={action.problem} />
      <Loading loaded={scim}>
        {(settings) => (
          <>
            <dl class="facts">
              <dt>SCIM base URL</dt>
              <dd>
                <code>{settings.scimBaseUrl}</code>
              </dd>
              <dt>Token</dt>
              <dd>
                {settings.enabled ? (
                  <>
                    made <When at={settings.tokenCreatedAt} />
                  </>
                ) : (
                  "none"
                )}
              </dd>
            </dl>
            {token ? <Secret label="SCIM token" value={token} /> : null}
            <div class="actions">
              <Button
                busy={action.busy}
                onClick={() =>
                  action.run(async () => {
                    setToken((await data(api.POST("/org/{slug}/scim/token", { params: { path: { slug } } }))).token);
                    scim.reload();
                  })
                }
              >
                {settings.enabled ? "Replace SCIM token" : "Create SCIM token"}
              </Button>
              {settings.enabled ? (
                <ConfirmButton
                  label="Revoke SCIM token"
                  question="Revoke the SCIM token? The identity provider can no longer provision members."
                  onConfirm={() =>
                    action.run(async () => {
                      await data(api.DELETE("/org/{slug}/scim", { params: { path: { slug } } }));
                      setToken(null);
                      scim.reload();
                    })
                  }
                />
              ) : null}
            </div>
          </>
        )}
      </Loading>
    </section>
  );
}

/** Every project's workspace as plain SQL, each dump a download. */
function Export({ slug }: { slug: string }) {
  const action = useAction();
  const [dumps, setDumps] = useState<{ projects: { slug: string; filename: string }[]; exportedAt: string } | null>(
    null,
  );
  return (
    <section class="card" aria-labelledby="export">
      <h2 id="export">Export</h2>
      <p class="muted">Every project's workspace as a plain SQL dump that loads into SQLite or PostgreSQL.</p>
      <ProblemNote problem={action.problem} />
      <Button
        busy={action.busy}
        onClick={() =>
          action.run(async () => setDumps(await data(api.POST("/org/{slug}/export", { params: { path: { slug } } }))))
        }
      >
        Export all projects
      </Button>
      {dumps ? (
        dumps.projects.length === 0 ? (
          <p class="empty">No projects to export.</p>
        ) : (
          <ul class="downloads" aria-label="Dumps">
            {dumps.projects.map((dump) => (
              <li key={dump.filename}>
                <a
                  href={`/api/org/${encodeURIComponent(slug)}/exports/${encodeURIComponent(dump.filename)}`}
                  download={dump.filename}
                >
                  {dump.slug}: {dump.filename}
                </a>
              </li>
            ))}
          </ul>
        )
      ) : null}
    </section>
  );
}

function DangerZone({ slug }: { slug: string }) {
  const location = useLocation();
  const action = useAction();
  if (roleIn(slug) !== "owner") return null;
  return (
    <section class="card danger-zone" aria-labelledby="danger">
      <h2 id="danger">Danger zone</h2>
      <ProblemNote problem={action.problem} />
      <ConfirmButton
        label="Delete organization"
        question="Delete this organization, its projects and their data? This cannot be undone."
        onConfirm={() =>
          action.run(async () => {
            await data(api.DELETE("/org/{slug}", { params: { path: { slug } } }));
            await loadOrgs();
            location.route("/");
          })
        }
      />
    </section>
  );
}
