import preact from "@preact/preset-vite";
import { defineConfig, type ProxyOptions } from "vite";

// The API that `npm run dev:console` talks to: `npm start` or `npm run dev` in another terminal.
const api = process.env.PLINTH_URL ?? "http://localhost:8080";

// The dev server forwards the API under the console's own origin, as the real server does, and
// presents the API's origin so its cross-site checks see a same-origin request.
const toApi: ProxyOptions = {
  target: api,
  configure: (proxy) => proxy.on("proxyReq", (request) => request.setHeader("origin", api)),
};

// The console (DESIGN §15): built into dist/console, which the server serves at `/`.
export default defineConfig({
  root: import.meta.dirname,
  plugins: [preact()],
  server: { proxy: { "/api": toApi, "/w": toApi } },
  build: {
    outDir: "../dist/console",
    emptyOutDir: true,
    // Modern browsers only: the console is an operator's tool.
    target: "es2022",
    sourcemap: true,
  },
});
