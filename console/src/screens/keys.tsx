import { useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import {
  Button,
  ConfirmButton,
  Field,
  Loading,
  Page,
  ProblemNote,
  Secret,
  Select,
  Table,
  When,
} from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";

const SCOPES = ["read-only", "deploy", "full"] as const;

/** `/orgs/:slug/keys`: API keys; create one (its token shown once), revoke. */
export function Keys() {
  const { slug } = useRoute().params as { slug: string };
  const keys = useLoad(() => data(api.GET("/org/{slug}/api-keys", { params: { path: { slug } } })), [slug]);
  const create = useAction();
  const revoke = useAction();
  const [name, setName] = useState("");
  const [scope, setScope] = useState<(typeof SCOPES)[number]>("read-only");
  const [days, setDays] = useState("");
  const [tools, setTools] = useState("");
  const [token, setToken] = useState<string | null>(null);
  return (
    <OrgLayout slug={slug}>
      <Page title="API keys">
        <form
          class="form card"
          aria-label="Create an API key"
          onSubmit={async (event) => {
            event.preventDefault();
            await create.run(async () => {
              const answer = await data(
                api.POST("/org/{slug}/api-keys", {
                  params: { path: { slug } },
                  body: {
                    name,
                    scope,
                    ...(days ? { expiresInDays: Number(days) } : {}),
                    ...(tools.trim()
                      ? {
                          mcpTools: tools
                            .split(",")
                            .map((tool) => tool.trim())
                            .filter(Boolean),
                        }
                      : {}),
                  },
                }),
              );
              setToken(answer.token);
              setName("");
              keys.reload();
            });
          }}
        >
          <ProblemNote problem={create.problem} />
          <Field
            label="Key name"
            name="name"
            required
            maxLength={60}
            value={name}
            problem={create.problem}
            onInput={(event) => setName(event.currentTarget.value)}
          />
          <Select
            label="Scope"
            name="scope"
            value={scope}
            problem={create.problem}
            options={[
              ["read-only", "read-only: reads"],
              ["deploy", "deploy: reads and project lifecycle"],
              ["full", "full: everything an admin may"],
            ]}
            onChange={(event) => setScope(event.currentTarget.value as (typeof SCOPES)[number])}
          />
          <Field
            label="Expires in days"
            name="expiresInDays"
            type="number"
            min={1}
            hint="Empty: it does not expire"
            value={days}
            problem={create.problem}
            onInput={(event) => setDays(event.currentTarget.value)}
          />
          <Field
            label="MCP tools"
            name="mcpTools"
            hint="Comma-separated tool names it may call over MCP; empty: all its scope allows"
            value={tools}
            problem={create.problem}
            onInput={(event) => setTools(event.currentTarget.value)}
          />
          <ToolPicker chosen={tools} onChange={setTools} />
          <Button type="submit" variant="primary" busy={create.busy}>
            Create key
          </Button>
        </form>
        {token ? <Secret label="API key token" value={token} /> : null}
        <ProblemNote problem={revoke.problem} />
        <Loading loaded={keys}>
          {({ apiKeys }) => (
            <Table
              label="API keys"
              rows={apiKeys}
              empty="No API keys yet."
              columns={[
                { header: "Name", cell: (key) => key.name },
                { header: "Scope", cell: (key) => key.scope },
                { header: "Prefix", cell: (key) => <code>{key.prefix}</code> },
                { header: "Expires", cell: (key) => <When at={key.expiresAt} /> },
                { header: "Last used", cell: (key) => <When at={key.lastUsedAt} /> },
                {
                  header: "Actions",
                  cell: (key) => (
                    <ConfirmButton
                      label="Revoke"
                      question={`Revoke ${key.name}? Whatever uses it stops working at once.`}
                      onConfirm={() =>
                        revoke.run(async () => {
                          await data(
                            api.DELETE("/org/{slug}/api-keys/{id}", { params: { path: { slug, id: key.id } } }),
                          );
                          keys.reload();
                        })
                      }
                    />
                  ),
                },
              ]}
            />
          )}
        </Loading>
      </Page>
    </OrgLayout>
  );
}

/** The MCP tools (`GET /api/mcp/tools`) as checkboxes that fill the comma-separated field. */
function ToolPicker({ chosen, onChange }: { chosen: string; onChange(text: string): void }) {
  const tools = useLoad(() => data(api.GET("/mcp/tools")), []);
  const names = chosen
    .split(",")
    .map((name) => name.trim())
    .filter(Boolean);
  return (
    <details class="picker">
      <summary>Choose MCP tools</summary>
      <Loading loaded={tools}>
        {({ tools: list }) => (
          <fieldset class="tool-list">
            <legend class="visually-hidden">MCP tools</legend>
            {list.map((tool) => (
              <label key={tool.name} class="tool" title={tool.description}>
                <input
                  type="checkbox"
                  checked={names.includes(tool.name)}
                  onChange={(event) =>
                    onChange(
                      (event.currentTarget.checked
                        ? [...names, tool.name]
                        : names.filter((name) => name !== tool.name)
                      ).join(", "),
                    )
                  }
                />{" "}
                <code>{tool.name}</code>
                {tool.readOnlyHint ? <span class="muted"> (reads)</span> : null}
              </label>
            ))}
          </fieldset>
        )}
      </Loading>
    </details>
  );
}
