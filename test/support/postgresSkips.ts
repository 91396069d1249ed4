import type { Reporter, TestModule } from "vitest/node"

const redacted = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return url
  }
}

/**
 * Ends the run with how many Postgres tests did not run (a test whose name,
 * suites included, says Postgres, skipped because no server answered:
 * `skipPostgresSuites`, `describe.runIf(pgAvailable)`), so a run without
 * Postgres cannot pass for a full one.
 */
export default class PostgresSkips implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let skipped = 0
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        // A test of a suite skipped at run time has no result of its own: "pending" at the end means it never ran.
        const { state } = test.result()
        if ((state === "skipped" || state === "pending") && /postgres/i.test(test.fullName)) skipped++
      }
    }
    if (skipped === 0) return
    const url = redacted(process.env["CONNECTOR_STORE_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
    const line = `*** ${skipped} Postgres test${skipped === 1 ? "" : "s"} SKIPPED: no server at ${url} ***`
    const bar = "*".repeat(line.length)
    process.stdout.write(`\n${bar}\n${line}\n${bar}\n` +
      "Start Postgres (or set CONNECTOR_STORE_PG_URL); CONNECTOR_STORE_REQUIRE_PG=1 makes a missing server fail the run.\n\n")
  }
}
