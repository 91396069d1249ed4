import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const pkg = (name: string, entry = "index") => fileURLToPath(new URL(`./packages/${name}/src/${entry}.ts`, import.meta.url))

const workers = (() => {
  const raw = process.env["CONNECTOR_STORE_TEST_WORKERS"]
  if (raw === undefined) return 3
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`CONNECTOR_STORE_TEST_WORKERS must be a positive whole number, got ${JSON.stringify(raw)}`)
  return n
})()

/**
 * The test files that load every module anew: those that run other test
 * files' suites again by importing them (a module already loaded would not
 * declare its suites a second time), and those that change globals.
 */
const ISOLATED = [
  "test/sqlite-stock-client.test.ts",
  "test/memory-ports.test.ts",
  "test/doc-samples.test.ts",
  "test/simulation.test.ts"
]

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
    globalSetup: ["./test/support/globalSetup.ts"],
    // Run before every test file: its own database, temp folder and adapters, and their cleanup.
    setupFiles: ["./test/support/perFile.ts"],
    reporters: ["default", "./test/support/postgresSkips.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Test files run beside each other, each with a Postgres database and a temp folder of its own (see
    // test/support/databases.ts). Three at once on two cores: much of a file's time is spent waiting on Postgres
    // or on a spawned CLI, not on a core. CONNECTOR_STORE_TEST_WORKERS sets another number (1: one file at a time).
    pool: "forks",
    maxWorkers: workers,
    minWorkers: workers,
    // A worker process runs many files (a new process per file spent ~3 s of a core on loading the packages
    // and Effect each time); the projects below say which files also share the loaded modules.
    poolOptions: { forks: { isolate: false } },
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: ISOLATED,
          // The files share the modules a worker loaded: each one's own state is started anew by perFile.ts.
          poolOptions: { forks: { isolate: false } }
        }
      },
      {
        extends: true,
        test: {
          name: "isolated",
          include: ISOLATED,
          // Every module loaded anew for each file.
          poolOptions: { forks: { isolate: true } }
        }
      }
    ]
  }
})
