import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"
import LongestFirst from "./test/support/sequencer.js"

const pkg = (name: string, entry = "index") => fileURLToPath(new URL(`./packages/${name}/src/${entry}.ts`, import.meta.url))

const workers = (() => {
  const raw = process.env["CONNECTOR_STORE_TEST_WORKERS"]
  if (raw === undefined) return 3
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`CONNECTOR_STORE_TEST_WORKERS must be a positive whole number, got ${JSON.stringify(raw)}`)
  return n
})()

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
      "@connector-store/testkit": pkg("testkit"),
      "@connector-store/dashboard": pkg("dashboard"),
      "@connector-store/worker": pkg("worker")
    }
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["./test/support/globalSetup.ts"],
    // Run before every test file: its own database, temp folder and adapters, and their cleanup.
    setupFiles: ["./test/support/perFile.ts"],
    reporters: ["default", "./test/support/postgresSkips.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Test files run beside each other, each with a Postgres database and a temp folder of its own (see
    // test/support/databases.ts). Three at once on two cores: much of a file's time is spent waiting on Postgres,
    // a spawned process or a timeout, not on a core (four were slower). CONNECTOR_STORE_TEST_WORKERS sets another
    // number (1: one file at a time).
    pool: "forks",
    maxWorkers: workers,
    minWorkers: workers,
    // A worker process runs many files and keeps the modules it loaded (a new process per file spent ~3 s of a
    // core on loading the packages and Effect each time): each file's own state is started anew by perFile.ts,
    // and a file that runs another's suites again imports it as a module of its own (support/rerun.ts).
    poolOptions: { forks: { isolate: false } },
    // The longest files first, by vitest's timings or else the committed ones: the run ends with short files on
    // every worker instead of one long file on one (about 45 s of three idle-ended workers from a fresh clone).
    sequence: { sequencer: LongestFirst }
  }
})
