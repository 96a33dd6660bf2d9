import { randomBytes } from "node:crypto";
import type { Context } from "hono";
import type { AppEnv } from "./context.ts";

/**
 * The page an invitation mail links to (`{PUBLIC_URL}/accept-invite?token=…`, DESIGN §4): a
 * small stand-in for the web console's, so the link works. It signs the reader in (or up) with
 * the API's own auth routes and accepts through `POST /api/invitations/accept`; the token stays
 * in the page's address and is never written into the HTML. Everything it shows is set as text.
 */
export function acceptInvitePage(c: Context<AppEnv>): Response {
  const nonce = randomBytes(16).toString("base64");
  return c.html(PAGE.replace(/\{nonce\}/g, nonce), 200, {
    "Content-Security-Policy": `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'`,
    // The token is in this page's address: no request it makes may carry it on in a Referer.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
  });
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Join an organization · Plinth</title>
<style nonce="{nonce}">
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 26rem; margin: 4rem auto; padding: 0 1rem; color: #1b1f24; }
  h1 { font-size: 1.4rem; }
  form { display: grid; gap: .6rem; margin: 1rem 0; }
  input, button { font: inherit; padding: .5rem .6rem; }
  button { cursor: pointer; }
  #status { min-height: 1.5rem; }
  .error { color: #b42318; }
  [hidden] { display: none; }
</style>
</head>
<body>
<h1>Join an organization on Plinth</h1>
<p id="status"></p>
<section id="accept" hidden>
  <p>Signed in as <strong id="who"></strong>.</p>
  <form id="accept-form"><button>Accept the invitation</button></form>
  <p><a href="#" id="sign-out">Not you? Sign out</a></p>
</section>
<section id="sign-in" hidden>
  <p>Sign in (or create an account) with the e-mail address the invitation was sent to.</p>
  <form id="sign-in-form">
    <input name="email" type="email" autocomplete="email" placeholder="E-mail" required>
    <input name="password" type="password" autocomplete="current-password" placeholder="Password" minlength="8" required>
    <button name="mode" value="in">Sign in</button>
    <button name="mode" value="up">Create an account</button>
  </form>
</section>
<script nonce="{nonce}">
(() => {
  const token = new URLSearchParams(location.search).get("token");
  const $ = (id) => document.getElementById(id);
  const status = (text, error = false) => { $("status").textContent = text; $("status").className = error ? "error" : ""; };
  const api = async (path, body) => {
    const response = await fetch(new URL("api" + path, new URL(".", location.href)), {
      method: body === undefined ? "GET" : "POST",
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    const answer = await response.json().catch(() => null);
    return { ok: response.ok, answer, message: answer?.error?.message ?? "something went wrong (" + response.status + ")" };
  };
  async function show() {
    $("accept").hidden = $("sign-in").hidden = true;
    if (!token) return status("This link holds no invitation. Open the link from the invitation e-mail.", true);
    const session = await api("/auth/get-session");
    if (session.answer?.user) {
      $("who").textContent = session.answer.user.email;
      $("accept").hidden = false;
    } else {
      $("sign-in").hidden = false;
    }
  }
  $("accept-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    status("Accepting…");
    const accepted = await api("/invitations/accept", { token });
    if (!accepted.ok) return status(accepted.message, true);
    $("accept").hidden = true;
    status("You have joined " + accepted.answer.orgSlug + ".");
  });
  $("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const credentials = { email: form.get("email"), password: form.get("password") };
    const up = event.submitter?.value === "up";
    status(up ? "Creating your account…" : "Signing in…");
    const signed = await api(up ? "/auth/sign-up/email" : "/auth/sign-in/email", credentials);
    if (!signed.ok) return status(signed.message, true);
    status("");
    await show();
  });
  $("sign-out").addEventListener("click", async (event) => {
    event.preventDefault();
    await api("/auth/sign-out", {});
    status("");
    await show();
  });
  show().catch(() => status("The service could not be reached.", true));
})();
</script>
</body>
</html>
`;
