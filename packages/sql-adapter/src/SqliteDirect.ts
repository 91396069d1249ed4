import { type DirectDatabaseApi, type DirectRowsOf, LOCKED_ELSEWHERE } from "@connector-store/core/adapter"
import type * as Client from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql/Statement"
import type { Connection } from "@effect/sql/SqlConnection"
import type Sqlite from "better-sqlite3"
import { Effect } from "effect"
import type { RawRow } from "./internal/columns.js"
import { directRows } from "./internal/directRows.js"
import { type Compiled, compiled, directFailure } from "./internal/directStatements.js"
import { withConnectionThen } from "./internal/transactionContext.js"
import { isLockedElsewhere, type SharedDatabase } from "./SqliteConnection.js"
import type { TableNames } from "./Tables.js"

/**
 * The project's SQLite connection as a `DirectDatabase`: the repositories'
 * own statements (`watchStatements`, `operationStatements`), compiled and
 * run on the connection at once, and transactions begun and ended on it
 * without a fiber. A transaction begun here holds the connection's queue
 * as one begun by the client does, so no other fiber's statement runs
 * inside it; a winner read joined to it (`joined`) runs its statements in it.
 * Driver failures are classified `PersistenceError`s named as the
 * repositories name them; a statement or `BEGIN` refused for another
 * connection's lock hands the call to the ports (`LOCKED_ELSEWHERE`, or no
 * transaction).
 */
export const makeSqliteDirect = (
  sql: Client.SqlClient,
  shared: SharedDatabase,
  tables: TableNames,
  repositories: DirectDatabaseApi["repositories"]
): DirectDatabaseApi => {
  const failed = directFailure
  /** `run` on `statement`'s prepared statement and parameters; a driver failure named `name`. */
  const onStatement = <A>(
    name: string,
    statement: Statement<unknown> | Compiled,
    run: (prepared: Sqlite.Statement, params: ReadonlyArray<unknown>) => A
  ): A => {
    try {
      const [text, params] = compiled(statement)
      const prepared = shared.prepared(text)
      const answer = run(prepared, params)
      shared.ran(prepared)
      return answer
    } catch (cause) {
      // Outside a transaction another connection's lock hands the call to the ports, which wait for it.
      if (isLockedElsewhere(cause) && !shared.db.inTransaction) throw LOCKED_ELSEWHERE
      throw failed(name, cause)
    }
  }
  // better-sqlite3 answers at once: these rows never answer with a Promise.
  const rows = directRows(sql, tables, {
    rows: (name, statement) =>
      onStatement(name, statement, (prepared, params) => prepared.all(...params) as ReadonlyArray<RawRow>),
    touchedAny: (name, statement) => onStatement(name, statement, (prepared, params) => prepared.run(...params).changes > 0),
    map: (answer, then) => then(answer as never)
  }) as DirectRowsOf<false>

  return {
    repositories,
    free: () => !shared.queue.busy,
    begin: () => {
      let connection: Connection | undefined
      try {
        connection = shared.beginNow()
      } catch (cause) {
        throw failed("transaction", cause)
      }
      if (connection === undefined) return undefined
      const open = connection
      let ended = false
      const end = (commit: boolean) => {
        if (ended) return
        ended = true
        try {
          shared.endNow(commit)
        } catch (cause) {
          throw failed("transaction", cause)
        }
      }
      return {
        commit: () => end(true),
        rollback: () => end(false),
        // joined runs with interruption off (see the port), as withConnectionThen needs.
        joined: (effect) =>
          Effect.withFiberRuntime((fiber) => withConnectionThen(fiber.currentContext, open, 0, effect, (exit) => exit))
      }
    },
    ...rows
  }
}
