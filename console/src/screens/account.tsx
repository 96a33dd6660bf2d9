import { useState } from "preact/hooks";
import { api, data } from "../api.ts";
import { PlainLayout } from "../components/layout.tsx";
import { Button, Field, ProblemNote } from "../components/ui.tsx";
import { useAction } from "../hooks.ts";
import { account } from "../session.ts";

/** `/account`: the signed-in person's own name, title and time zone. */
export function AccountScreen() {
  const current = account.value;
  const [name, setName] = useState(current?.name ?? "");
  const [title, setTitle] = useState(current?.title ?? "");
  const [timezone, setTimezone] = useState(current?.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  return (
    <PlainLayout signedIn>
      <h1>Your account</h1>
      <p class="muted">{current?.email}</p>
      <form
        class="form"
        aria-label="Your account"
        onSubmit={async (event) => {
          event.preventDefault();
          setSaved(false);
          await action.run(async () => {
            await data(
              api.PATCH("/account", { body: { name: name || null, title: title || null, timezone: timezone || null } }),
            );
            account.value = (await data(api.GET("/account"))).account;
            setSaved(true);
          });
        }}
      >
        <ProblemNote problem={action.problem} />
        <Field
          label="Name"
          name="name"
          maxLength={120}
          value={name}
          problem={action.problem}
          onInput={(event) => setName(event.currentTarget.value)}
        />
        <Field
          label="Title"
          name="title"
          maxLength={120}
          value={title}
          problem={action.problem}
          onInput={(event) => setTitle(event.currentTarget.value)}
        />
        <Field
          label="Time zone"
          name="timezone"
          maxLength={60}
          placeholder="Europe/Paris"
          value={timezone}
          problem={action.problem}
          onInput={(event) => setTimezone(event.currentTarget.value)}
        />
        <Button type="submit" variant="primary" busy={action.busy}>
          Save account
        </Button>
        {saved ? <p role="status">Saved.</p> : null}
      </form>
    </PlainLayout>
  );
}
