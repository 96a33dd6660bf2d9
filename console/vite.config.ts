import preact from "@preact/preset-vite";
import { defineConfig } from "vite";

// The console (DESIGN §15): built into dist/console, which the server serves at `/`.
export default defineConfig({
  root: import.meta.dirname,
  plugins: [preact()],
  build: {
    outDir: "../dist/console",
    emptyOutDir: true,
    // Modern browsers only: the console is an operator's tool.
    target: "es2022",
    sourcemap: true,
  },
});
