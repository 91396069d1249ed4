// A diagnostic baseline, not the reference: the raw reference's statements
// and decisions (raw-watch-steps.mjs) run through @effect/sql's own client
// and transactions, with none of the project's code. Project vs this shows
// what the project adds; this vs raw shows what @effect/sql itself costs.
import { SqliteConnection } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { decisions, identityParams, lostRace, manualOnly, numbered, statements } from "./raw-watch-steps.mjs"

/**
 * The watch steps on a `ManagedRuntime` providing `SqlClient`: one
 * `sql.withTransaction` per step (SQLite: on the stock client, the no-op-write
 * lock first, as the store does; Postgres: FOR UPDATE), one `runPromise` per step.
 */
export const effectSqlSteps = async (runtime, table, winners) => {
  const sql = await runtime.runPromise(SqlClient)
  const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  const texts = Object.fromEntries(
    Object.entries(statements(table)).map(([name, text]) => [name, isPg ? numbered(text) : text])
  )
  const lockRead = isPg ? `${texts.select} FOR UPDATE` : texts.select
  // The project's SQLite client begins IMMEDIATE: no lock statement there.
  const takeLock = isPg || SqliteConnection.isProjectSqliteClient(sql)
    ? Effect.void
    : sql.unsafe(`UPDATE ${table} SET version = version WHERE 0 = 1`)
  const decide = decisions(winners)
  const step = (name) => (identity, input) =>
    runtime.runPromise(sql.withTransaction(Effect.gen(function*() {
      yield* takeLock
      const rows = yield* sql.unsafe(lockRead, identityParams(identity))
      const { outcome, write } = decide[name](rows[0], identity, input)
      if (write !== undefined) {
        const changed = yield* Effect.map(sql.unsafe(texts[write[0]], write[1]).raw, (result) => isPg ? result.rowCount : result.changes)
        if (changed !== 1) return yield* Effect.die(lostRace(name))
      }
      return outcome
    })))
  const arm = step("armWatch")
  return {
    claimWatchAttempt: step("claimWatchAttempt"),
    recordVerification: step("recordVerification"),
    armWatch: (identity, reason, options) => {
      manualOnly(reason)
      return arm(identity, options)
    }
  }
}
