import { PersistenceError, type Transactor } from "@connector-store/core"
import { SqlError } from "@effect/sql/SqlError"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import { isProjectSqliteClient } from "./SqliteConnection.js"

const asPersistence = (operation: string) => (error: unknown) =>
  error instanceof SqlError ? new PersistenceError({ operation, cause: error }) : error

/**
 * Transactions on the SQL client. A driver failure to begin, commit or roll
 * back surfaces as a `PersistenceError` (the stock clients report a failed
 * commit as a defect; it is turned back into a typed failure here).
 *
 * On SQLite, the project's client (see `SqliteConnection`) begins every
 * transaction IMMEDIATE, holding the write lock from the start. The stock
 * client begins them deferred, and a transaction that reads before it
 * writes fails at once, whatever the busy timeout, when another process
 * committed in between: there, with `lockTable` given, every transaction
 * takes the write lock as its very first statement (see `takeWriteLock`),
 * which makes it wait instead.
 */
export const makeSqlTransactor = (sql: SqlClient, lockTable?: string): Transactor["Type"] => {
  const lock = lockTable === undefined || isProjectSqliteClient(sql) ? undefined : takeWriteLock(sql, lockTable)
  return {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      sql.withTransaction(lock === undefined ? effect : Effect.zipRight(lock, effect)).pipe(
        Effect.mapError(asPersistence("transaction")),
        Effect.catchSomeDefect((defect) =>
          defect instanceof SqlError
            ? Option.some(Effect.fail(new PersistenceError({ operation: "transaction", cause: defect })))
            : Option.none()
        )
      ) as Effect.Effect<A, E | PersistenceError, R>
  }
}

/**
 * Takes the database write lock for the rest of the transaction before the
 * first read, on SQLite's stock client (a no-op write; SQLite has no FOR
 * UPDATE and that client begins transactions deferred); nothing on the
 * project's client, whose transactions begin IMMEDIATE. With the lock taken first, a
 * read-decide-write in another process waits for it (busy timeout) instead of
 * failing on a stale snapshot. On Postgres, rows are locked by FOR UPDATE.
 */
export const takeWriteLock = (sql: SqlClient, table: string): Effect.Effect<void, SqlError> =>
  sql.onDialectOrElse({
    pg: () => Effect.void,
    // Any column will do: the statement matches no row; compiling it as a write is what takes the lock.
    orElse: () =>
      isProjectSqliteClient(sql) ? Effect.void : Effect.asVoid(sql`UPDATE ${sql(table)} SET rowid = rowid WHERE 0 = 1`)
  })

/** `FOR UPDATE` on Postgres, nothing elsewhere. */
export const forUpdate = (sql: SqlClient) => sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
