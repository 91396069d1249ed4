import * as Sql from "@connector-store/sql-adapter"
import { migrate, migrations, openConnectorStore, StoreSchemaTooNew, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import { Effect, Exit, Layer } from "effect"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { failureOf, runCli } from "./support/cli/run.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// A schema a newer version of connector-store migrated (its ledger holds a
// migration this version does not know) is never opened for writing: the
// open, `migrate` and the CLI's `migrate` say so, naming both versions, and
// write nothing. A read-only open still reads it.

const CODE_VERSION = Math.max(...migrations.map((step) => step.id))

const rejection = (promise: Promise<unknown>): Promise<Record<string, unknown>> =>
  promise.then((value) => ({ resolvedWith: value }), (error: unknown) => error as Record<string, unknown>)

/** A database under test: where it is, and raw SQL on it. */
interface Target {
  readonly url: string
  readonly tablePrefix: string
  readonly exec: (text: string) => Promise<ReadonlyArray<Record<string, unknown>>>
}

const sqliteTarget = (): Target => {
  const url = freshSqlitePath()
  return {
    url,
    tablePrefix: "kubun_connector_",
    exec: async (text) => {
      const db = new Database(url)
      try {
        const statement = db.prepare(text)
        return statement.reader ? statement.all() as ReadonlyArray<Record<string, unknown>> : (statement.run(), [])
      } finally {
        db.close()
      }
    }
  }
}

const pgTarget = async (): Promise<Target> => {
  const url = await pgDatabaseForFile()
  return {
    url,
    tablePrefix: freshPrefix(),
    exec: async (text) => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        return (await client.query(text)).rows
      } finally {
        await client.end()
      }
    }
  }
}

/** Migrates `target`, writes one sync state, then records a fake migration 999 as a newer version would. */
const newerSchema = async (target: Target) => {
  const store = await openConnectorStore({ url: target.url, tablePrefix: target.tablePrefix })
  await store.setSyncState("gcal", "did:owner:1", { status: "idle", lastSyncedAt: "t1", entityCount: 1 })
  await store.close()
  await target.exec(`INSERT INTO ${target.tablePrefix}schema_migrations (id, name, applied_at) VALUES (999, 'from_the_future', 0)`)
}

const ledger = async (target: Target) =>
  (await target.exec(`SELECT id FROM ${target.tablePrefix}schema_migrations ORDER BY id`)).map((row) => Number(row["id"]))

const runMigrate = (target: Target) =>
  Effect.runPromiseExit(
    Effect.scoped(
      Effect.flatMap(Layer.build(Sql.layerClient({ url: target.url })), (context) =>
        Effect.provide(Effect.flatMap(SqlClient, (sql) => migrate(sql, tableNames(target.tablePrefix))), context))
    )
  )

const suite = (name: string, make: () => Promise<Target>) =>
  describe(`a schema newer than the code (${name})`, { timeout: 120_000 }, () => {
    it("refuses to open for writing with StoreSchemaTooNew naming both versions, and writes nothing", async () => {
      const target = await make()
      await newerSchema(target)
      const before = await ledger(target)
      const failure = await rejection(openConnectorStore({ url: target.url, tablePrefix: target.tablePrefix }))
      expect(failure).toBeInstanceOf(StoreSchemaTooNew)
      expect(failure).toMatchObject({
        _tag: "StoreSchemaTooNew",
        tablePrefix: target.tablePrefix,
        databaseVersion: 999,
        codeVersion: CODE_VERSION,
        unknown: [999],
        method: "openConnectorStore"
      })
      expect(String((failure as unknown as Error).message)).toContain(`at migration 999, newer than this connector-store (migration ${CODE_VERSION})`)
      expect(await ledger(target)).toEqual(before)
    })

    it("the library's migrate fails with StoreSchemaTooNew and applies nothing", async () => {
      const target = await make()
      await newerSchema(target)
      // A step this version knows, missing from the newer schema's ledger, stays unapplied too.
      await target.exec(`DELETE FROM ${target.tablePrefix}schema_migrations WHERE id = 9`)
      const before = await ledger(target)
      const exit = await runMigrate(target)
      expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit).toMatchObject({
        _tag: "StoreSchemaTooNew",
        databaseVersion: 999,
        codeVersion: CODE_VERSION
      })
      expect(await ledger(target)).toEqual(before)
    })

    it("a read-only open still reads it", async () => {
      const target = await make()
      await newerSchema(target)
      const store = await openConnectorStore({ url: target.url, tablePrefix: target.tablePrefix, readOnly: true })
      try {
        expect(await store.getSyncState("gcal", "did:owner:1")).toMatchObject({ entityCount: 1 })
      } finally {
        await store.close()
      }
    })

    it("the CLI's migrate says the schema is newer instead of up to date, and exits 1", async () => {
      const target = await make()
      await newerSchema(target)
      const run = await runCli(["migrate", "--database", target.url, "--table-prefix", target.tablePrefix])
      const failed = failureOf(run)
      expect(failed.code).toBe(1)
      expect(failed.lines.join("\n")).toMatch(
        new RegExp(`schema under prefix ${target.tablePrefix} is at migration 999, newer than this connector-store \\(migration ${CODE_VERSION}\\)`)
      )
      expect(run.stdout).not.toMatch(/up to date/)
    })
  })

suite("SQLite", async () => sqliteTarget())
if (pgAvailable) suite("Postgres", pgTarget)
