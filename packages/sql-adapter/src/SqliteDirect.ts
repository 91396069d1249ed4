import type { DirectDatabaseApi } from "@connector-store/core"
import type * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { Statement } from "@effect/sql/Statement"
import { Effect } from "effect"
import type { RawRow } from "./internal/columns.js"
import { type Compiled, compiled, directFailure, firstOf } from "./internal/directStatements.js"
import { withConnectionThen } from "./internal/transactionContext.js"
import { decodeOperation, operationStatements } from "./SqlOperationRepository.js"
import type { SharedDatabase } from "./SqliteConnection.js"
import type { TableNames } from "./Tables.js"
import { decodeWatch, watchStatements } from "./SqlWatchRepository.js"

/**
 * The project's SQLite connection as a `DirectDatabase`: the repositories'
 * own statements (`watchStatements`, `operationStatements`), compiled and
 * run on the connection at once, and transactions begun and ended on it
 * without a fiber. A transaction begun here holds the connection's queue
 * as one begun by the client does, so no other fiber's statement runs
 * inside it; a winner read joined to it (`joined`) runs its statements in it.
 * Driver failures are classified `PersistenceError`s named as the
 * repositories name them.
 */
export const makeSqliteDirect = (
  sql: Client.SqlClient,
  shared: SharedDatabase,
  tables: TableNames,
  repositories: DirectDatabaseApi["repositories"]
): DirectDatabaseApi => {
  const watch = watchStatements(sql, tables)
  const operation = operationStatements(sql, tables)

  const failed = directFailure
  /** Every row `statement` returns. */
  const rows = (name: string, statement: Statement<unknown> | Compiled): ReadonlyArray<RawRow> => {
    try {
      const [text, params] = compiled(statement)
      return shared.prepared(text).all(...params) as ReadonlyArray<RawRow>
    } catch (cause) {
      throw failed(name, cause)
    }
  }
  /** How many rows the write `statement` (no RETURNING) touched. */
  const touched = (name: string, statement: Statement<unknown> | Compiled): number => {
    try {
      const [text, params] = compiled(statement)
      return shared.prepared(text).run(...params).changes
    } catch (cause) {
      throw failed(name, cause)
    }
  }
  const first = firstOf

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
    watches: {
      lockRead: (identity) => first(decodeWatch, rows("watch.lockRead", watch.lockRead(identity))),
      update: (previous, next) => touched("watch.update", watch.update(previous, next)) > 0,
      insert: (row) => rows("watch.insert", watch.insert(row)).length > 0,
      delete: (identity, expectedVersion) => rows("watch.delete", watch.delete(identity, expectedVersion)).length > 0,
      claimAttempt: (identity, input, now, writtenAt) =>
        touched("watch.claimAttempt", watch.claimAttempt(identity, input, now, writtenAt)) > 0,
      deferAttempt: (identity, input, now) => touched("watch.deferAttempt", watch.deferAttempt(identity, input, now)) > 0,
      // The transaction holds the database's write lock: SQLite needs no slot lock.
      lockArmTargets: (slot, identity) => rows("watch.lockArmTargets", watch.lockArmTargets(slot, identity)).map(decodeWatch)
    },
    operations: {
      get: (key) => first(decodeOperation, rows("operation.get", operation.get(key))),
      lockRead: (key) => first(decodeOperation, rows("operation.lockRead", operation.lockRead(key))),
      insert: (row) => rows("operation.insert", operation.insert(row)).length > 0,
      update: (previous, next) => touched("operation.update", operation.update(previous, next)) > 0,
      markSent: (key, token, maxAttempts, now) =>
        first(decodeOperation, rows("operation.markSent", operation.markSent(key, token, maxAttempts, now)))
    }
  }
}
