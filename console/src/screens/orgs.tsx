import { useEffect, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, data } from "../api.ts";
import { PlainLayout } from "../components/layout.tsx";
import { Button, Field, ProblemNote } from "../components/ui.tsx";
import { useAction } from "../hooks.ts";
import { loadOrgs, orgs } from "../session.ts";

/** `/`: the first org's projects, or creating the first org. */
export function Home() {
  const location = useLocation();
  const first = orgs.value[0];
  useEffect(() => {
    location.route(first ? `/orgs/${first.slug}` : "/orgs/new", true);
  }, [first, location]);
  return (
    <p class="loading" role="status">
      Loading…
    </p>
  );
}

export function NewOrg() {
  const location = useLocation();
  const [name, setName] = useState("");
  const action = useAction();
  return (
    <PlainLayout signedIn>
      <h1>Create an organization</h1>
      <p class="muted">An organization holds projects, members and API keys. You will be its owner.</p>
      <form
        class="form"
        onSubmit={async (event) => {
          event.preventDefault();
          let slug = "";
          const done = await action.run(async () => {
            slug = (await data(api.POST("/org", { body: { name } }))).org.slug;
            await loadOrgs();
          });
          if (done) location.route(`/orgs/${slug}`);
        }}
      >
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
        <Button type="submit" variant="primary" busy={action.busy}>
          Create organization
        </Button>
      </form>
    </PlainLayout>
  );
}

export function NotFound() {
  return (
    <PlainLayout signedIn>
      <h1>Not found</h1>
      <p>
        There is nothing here. <a href="/">Back to your projects</a>
      </p>
    </PlainLayout>
  );
}
