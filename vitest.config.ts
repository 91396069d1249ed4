import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const pkg = (name: string) => fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url))

export default defineConfig({
  resolve: {
    alias: {
      "@connector-store/core": pkg("core"),
      "@connector-store/memory-adapter": pkg("memory-adapter"),
      "@connector-store/sql-adapter": pkg("sql-adapter"),
      "@connector-store/simulation": pkg("simulation")
    }
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["./test/support/globalSetup.ts"],
    reporters: ["default", "./test/support/postgresSkips.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000
  }
})
