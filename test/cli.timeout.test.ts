import * as Sql from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { failureOf, jsonOf, runCli } from "./support/cli/run.js"
import { type CliDatabase, dbArgs, seedStore } from "./support/cli/seed.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The CLI tests spawn the built CLI: `npm run build` first.

/**
 * How long a spawned CLI may take beyond its --timeout and what the same
 * command takes on an unlocked store (`baseline`): the CLI's own 2 s grace,
 * and room for a loaded machine. The store's default lock wait (10 s) does not fit in it.
 */
const SLACK_MS = 4_000

const timed = async <A>(run: () => Promise<A>): Promise<{ readonly result: A; readonly ms: number }> => {
  const started = Date.now()
  const result = await run()
  return { result, ms: Date.now() - started }
}

const UNKNOWN = ["--caller", "did:caller:1", "--operation", "unknown"] as const

describe("--timeout", () => {
  it("refuses what is not a duration from 1ms to 1d, naming the flag, before opening anything", async () => {
    const file = freshSqlitePath()
    for (const bad of ["0s", "soon", "30", "2d"]) {
      expect(failureOf(await runCli(["status", "--timeout", bad, "--database", file]))).toEqual({
        code: 1,
        lines: [`connector-store: --timeout must be a duration from 1ms to 1d, like 30s or 2m; got "${bad}"`]
      })
    }
    expect(failureOf(await runCli(["status", "--connect-timeout", "0", "--database", file])).lines).toEqual([
      "connector-store: --connect-timeout must be a whole number of seconds, 1 or more; got 0"
    ])
  })

  it("is in every store command's help with its default", async () => {
    for (const command of [["status"], ["operations"], ["settle"], ["migrate"], ["sync", "list"]]) {
      const help = await runCli([...command, "--help"])
      expect(help.stdout, command.join(" ")).toMatch(/--timeout <text>\s+The longest the command's work on the store may take[^]*default[:\s]*"?30s/)
    }
  })
})

describe("a lock another session holds cannot hold a command past --timeout, on sqlite", { timeout: 600_000 }, () => {
  it("settle fails within its bound, in one line, and changes nothing", async () => {
    const db: CliDatabase = { url: freshSqlitePath() }
    await seedStore(db)
    // The same settle of an operation that does not exist: the CLI's own cost, with nothing locked.
    const baseline = await timed(() =>
      runCli(["settle", "--caller", "did:caller:9", "--operation", "unknown", "--outcome", "dead", "--timeout", "2s", ...dbArgs(db)])
    )
    const holder = new Database(db.url)
    holder.exec("BEGIN IMMEDIATE")
    try {
      const { ms, result } = await timed(() => runCli(["settle", ...UNKNOWN, "--outcome", "dead", "--timeout", "2s", ...dbArgs(db)]))
      const failure = failureOf(result)
      expect(failure.code).toBe(1)
      expect(failure.lines).toHaveLength(1)
      expect(failure.lines[0]).toMatch(/lock|time|no answer within 2s/)
      expect(ms).toBeLessThan(baseline.ms + 2_000 + SLACK_MS)
    } finally {
      holder.exec("ROLLBACK")
      holder.close()
    }
    const after = jsonOf(await runCli(["show", "operation", ...UNKNOWN, "--json", ...dbArgs(db)]))
    expect(after.state).toBe("reconcile_only")
  })
})

if (pgAvailable) {
  describe("a lock another session holds cannot hold a command past --timeout, on postgres", { timeout: 600_000 }, () => {
    /**
     * A seeded store, what `baseline` (CLI arguments) takes on it unlocked,
     * and a raw `pg` session on its database that holds `statement`'s lock in
     * an open transaction until `release`.
     */
    const lockedBy = async (statement: (operationTable: string) => string, baselineArgs: ReadonlyArray<string>) => {
      const db: CliDatabase = { url: await pgDatabaseForFile(), tablePrefix: freshPrefix() }
      await seedStore(db)
      const baseline = await timed(() => runCli([...baselineArgs, ...dbArgs(db)]))
      const session = new pg.Client({ connectionString: db.url })
      await session.connect()
      await session.query("BEGIN")
      await session.query(statement(Sql.tableNames(db.tablePrefix).operation))
      const release = async () => {
        await session.query("ROLLBACK")
        await session.end()
      }
      return { db, release, baseline }
    }

    it("settle on a row locked FOR UPDATE fails within its bound, in one line, and changes nothing", async () => {
      const { baseline, db, release } = await lockedBy(
        (table) => `SELECT 1 FROM ${table} WHERE caller_did = 'did:caller:1' AND operation_id = 'unknown' FOR UPDATE`,
        ["settle", "--caller", "did:caller:9", "--operation", "unknown", "--outcome", "dead"]
      )
      try {
        const { ms, result } = await timed(() => runCli(["settle", ...UNKNOWN, "--outcome", "dead", "--timeout", "2s", ...dbArgs(db)]))
        const failure = failureOf(result)
        expect(failure.code).toBe(1)
        expect(failure.lines).toHaveLength(1)
        expect(failure.lines[0]).toMatch(/lock|time|no answer within 2s/)
        expect(ms).toBeLessThan(baseline.ms + 2_000 + SLACK_MS)
      } finally {
        await release()
      }
      const after = jsonOf(await runCli(["show", "operation", ...UNKNOWN, "--json", ...dbArgs(db)]))
      expect(after.state).toBe("reconcile_only")
    })

    it("status on a table locked ACCESS EXCLUSIVE fails within its bound, in one line", async () => {
      const { baseline, db, release } = await lockedBy((table) => `LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`, ["status"])
      try {
        const { ms, result } = await timed(() => runCli(["status", "--timeout", "2s", ...dbArgs(db)]))
        const failure = failureOf(result)
        expect(failure.code).toBe(1)
        expect(failure.lines).toHaveLength(1)
        expect(failure.lines[0]).toMatch(/lock|time|no answer within/)
        expect(ms).toBeLessThan(baseline.ms + 2_000 + SLACK_MS)
      } finally {
        await release()
      }
      expect(jsonOf(await runCli(["status", "--json", ...dbArgs(db)])).operations.reconcile_only).toBe(1)
    })
  })
}
