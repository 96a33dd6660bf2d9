/**
 * The URL to start a worker thread on for the module at `entry` (a `.ts` URL when running from
 * sources, as tests and `npm run dev` do; `.js` from `dist/`). From sources the thread needs
 * tsx's loader registered in it first: Node 20 does not carry a parent's `--import tsx` into
 * worker threads.
 */
export function threadUrl(entry: URL): URL {
  if (!entry.pathname.endsWith(".ts")) return entry;
  const api = import.meta.resolve("tsx/esm/api");
  const boot = `const m = await import(${JSON.stringify(api)}); (m.register ?? m.default.register)(); await import(${JSON.stringify(entry.href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(boot)}`);
}

/** A module beside `base` (an `import.meta.url`), in the same form (`.ts` from sources, `.js` built). */
export function sibling(base: string, name: string): URL {
  return new URL(`./${name}${base.endsWith(".ts") ? ".ts" : ".js"}`, base);
}
