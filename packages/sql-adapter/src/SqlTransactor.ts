import { PersistenceError, type Transactor } from "@connector-store/core"
import { SqlError } from "@effect/sql/SqlError"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"

const asPersistence = (operation: string) => (error: unknown) =>
  error instanceof SqlError ? new PersistenceError({ operation, cause: error }) : error

/**
 * Transactions on the SQL client. A driver failure to begin, commit or roll
 * back surfaces as a `PersistenceError` (the client reports a failed commit
 * as a defect; it is turned back into a typed failure here).
 *
 * On SQLite, with `lockTable` given, every transaction takes the database
 * write lock as its very first statement (see `takeWriteLock`): the client
 * begins transactions deferred, and a transaction that reads before it
 * writes fails at once, whatever the busy timeout, when another process
 * committed in between. Taking the lock first makes it wait instead.
 */
export const makeSqlTransactor = (sql: SqlClient, lockTable?: string): Transactor["Type"] => ({
  withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    sql.withTransaction(lockTable === undefined ? effect : Effect.zipRight(takeWriteLock(sql, lockTable), effect)).pipe(
      Effect.mapError(asPersistence("transaction")),
      Effect.catchSomeDefect((defect) =>
        defect instanceof SqlError
          ? Option.some(Effect.fail(new PersistenceError({ operation: "transaction", cause: defect })))
          : Option.none()
      )
    ) as Effect.Effect<A, E | PersistenceError, R>
})

/**
 * Takes the database write lock for the rest of the transaction before the
 * first read, on SQLite (a no-op write; SQLite has no FOR UPDATE and the
 * client begins transactions deferred). With the lock taken first, a
 * read-decide-write in another process waits for it (busy timeout) instead of
 * failing on a stale snapshot. On Postgres, rows are locked by FOR UPDATE.
 */
export const takeWriteLock = (sql: SqlClient, table: string): Effect.Effect<void, SqlError> =>
  sql.onDialectOrElse({
    pg: () => Effect.void,
    // Any column will do: the statement matches no row; compiling it as a write is what takes the lock.
    orElse: () => Effect.asVoid(sql`UPDATE ${sql(table)} SET rowid = rowid WHERE 0 = 1`)
  })

/** `FOR UPDATE` on Postgres, nothing elsewhere. */
export const forUpdate = (sql: SqlClient) => sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
