import { useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, data } from "../api.ts";
import { PlainLayout } from "../components/layout.tsx";
import { Button, Field, ProblemNote } from "../components/ui.tsx";
import { useAction } from "../hooks.ts";
import { loadSession } from "../session.ts";

/** Where to go once signed in: the `next` the guard kept, if it is a path here. */
function nextPath(query: Record<string, string>): string {
  const next = query.next ?? "/";
  return next.startsWith("/") && !next.startsWith("//") ? next : "/";
}

export function SignIn() {
  const location = useLocation();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const action = useAction();
  return (
    <PlainLayout>
      <h1>Sign in</h1>
      <form
        class="form"
        onSubmit={async (event) => {
          event.preventDefault();
          const done = await action.run(async () => {
            await data(api.POST("/auth/sign-in/email", { body: { email, password } }));
            await loadSession();
          });
          if (done) location.route(nextPath(location.query));
        }}
      >
        <ProblemNote problem={action.problem} />
        <Field
          label="Email"
          name="email"
          type="email"
          autoComplete="email"
          required
          value={email}
          problem={action.problem}
          onInput={(event) => setEmail(event.currentTarget.value)}
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete="current-password"
          required
          value={password}
          problem={action.problem}
          onInput={(event) => setPassword(event.currentTarget.value)}
        />
        <div class="actions">
          <Button type="submit" variant="primary" busy={action.busy}>
            Sign in
          </Button>
          <Button
            busy={action.busy}
            onClick={() =>
              action.run(async () => {
                const { url } = await data(api.POST("/auth/sso/lookup", { body: { email } }));
                // Off to the organization's identity provider, which brings the person back signed in.
                window.location.assign(url);
              })
            }
          >
            Use single sign-on
          </Button>
        </div>
      </form>
      <p>
        New here?{" "}
        <a href={location.query.next ? `/sign-up?next=${encodeURIComponent(nextPath(location.query))}` : "/sign-up"}>
          Create an account
        </a>
      </p>
    </PlainLayout>
  );
}

export function SignUp() {
  const location = useLocation();
  const [name, setName] = useState("");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const action = useAction();
  return (
    <PlainLayout>
      <h1>Create your account</h1>
      <form
        class="form"
        onSubmit={async (event) => {
          event.preventDefault();
          const done = await action.run(async () => {
            await data(api.POST("/auth/sign-up/email", { body: { name, email, password } }));
            await loadSession();
          });
          if (done) location.route(nextPath(location.query));
        }}
      >
        <ProblemNote problem={action.problem} />
        <Field
          label="Name"
          name="name"
          autoComplete="name"
          required
          value={name}
          problem={action.problem}
          onInput={(event) => setName(event.currentTarget.value)}
        />
        <Field
          label="Email"
          name="email"
          type="email"
          autoComplete="email"
          required
          value={email}
          problem={action.problem}
          onInput={(event) => setEmail(event.currentTarget.value)}
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete="new-password"
          required
          minLength={8}
          hint="At least 8 characters"
          value={password}
          problem={action.problem}
          onInput={(event) => setPassword(event.currentTarget.value)}
        />
        <Button type="submit" variant="primary" busy={action.busy}>
          Create account
        </Button>
      </form>
      <p>
        Have an account? <a href="/sign-in">Sign in</a>
      </p>
    </PlainLayout>
  );
}
