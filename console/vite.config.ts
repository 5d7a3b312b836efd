/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The build goes where internal/console embeds it; assets are served
// under /console/ (internal/console.AssetPrefix), the page at /.
// `npm run dev` proxies the API to a local `astrabox serve`.
const server = process.env.ASTRABOX_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  plugins: [react()],
  base: "/console/",
  build: {
    outDir: "../internal/console/ui/app",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1500,
    rollupOptions: {
      // zod (under ai) has comments Rollup cannot place; they are harmless.
      onwarn(warning, warn) {
        if (warning.code !== "INVALID_ANNOTATION") warn(warning);
      },
    },
  },
  server: {
    proxy: {
      "/v1": { target: server, ws: true },
      "/api": server,
      "/metrics": server,
    },
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
