import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const pkg = (name: string, entry = "index") => fileURLToPath(new URL(`./packages/${name}/src/${entry}.ts`, import.meta.url))

export default defineConfig({
  resolve: {
    // The subpath first: an alias also matches the paths under its name.
    alias: {
      "@connector-store/core/adapter": pkg("core", "adapter"),
      "@connector-store/core": pkg("core"),
      "@connector-store/memory-adapter": pkg("memory-adapter"),
      "@connector-store/sql-adapter": pkg("sql-adapter"),
      "@connector-store/simulation": pkg("simulation"),
      "@connector-store/promise": pkg("promise"),
      "@connector-store/testkit/provider": pkg("testkit", "provider"),
      "@connector-store/testkit": pkg("testkit")
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
