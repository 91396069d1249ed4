/**
 * The stock `@effect/sql-sqlite-node` client still carries the store when a
 * user provides it (`layerPorts` over an ambient `SqlClient`): its
 * transactions begin deferred and the store takes the write lock first
 * (`takeWriteLock`). A smaller suite than the default client's: the watch
 * contract, the operation lifecycle, the read-decide-write races, and
 * migrations racing across processes, all on the stock client.
 */
import { layerStockSqliteClient, migrations, SqliteConnection, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { rerunSuites } from "./support/rerun.js"
import { freshSqlitePath } from "./support/databases.js"
import { runProcess } from "./support/processes.js"
import { useStockSqliteOnly } from "./support/stores.js"

const clientKind = (layer: Layer.Layer<SqlClient, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(layer), (context) =>
    Effect.provide(Effect.map(SqlClient, SqliteConnection.isProjectSqliteClient), context))))

describe("the stock SQLite client", () => {
  it("is told apart from the project's (which needs no lock statement)", async () => {
    expect(await clientKind(layerStockSqliteClient(freshSqlitePath()))).toBe(false)
    expect(await clientKind(SqliteConnection.layer({ filename: freshSqlitePath() }))).toBe(true)
  })

  it("three processes migrating one file at once on it apply each step exactly once", async () => {
    const file = freshSqlitePath()
    const startAt = String(Date.now() + 1_500)
    const runs = await Promise.all([1, 2, 3].map(() => runProcess("migrate", [file, startAt, "hold", "3", "stock"])))
    const applied = runs.flatMap((out) => (JSON.parse(out) as { applied: ReadonlyArray<number> }).applied)
    expect(applied.sort((a, b) => a - b)).toEqual(migrations.map((m) => m.id))
    const db = new Database(file, { readonly: true })
    const ledger = db.prepare(`SELECT id FROM ${tableNames().migrations} ORDER BY id`).all()
    db.close()
    expect(ledger).toEqual(migrations.map((m) => ({ id: m.id })))
  })
})

// The contract suites, re-run here on the stock client alone.
useStockSqliteOnly()
await rerunSuites("./watch.contract.test.js", "stock-sqlite")
await rerunSuites("./operations.claim.test.js", "stock-sqlite")
await rerunSuites("./operations.finalize.test.js", "stock-sqlite")
await rerunSuites("./cas.test.js", "stock-sqlite")
