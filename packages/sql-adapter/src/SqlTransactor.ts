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
 */
export const makeSqlTransactor = (sql: SqlClient): Transactor["Type"] => ({
  withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    sql.withTransaction(effect).pipe(
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
    orElse: () => Effect.asVoid(sql`UPDATE ${sql(table)} SET version = version WHERE 0 = 1`)
  })

/** `FOR UPDATE` on Postgres, nothing elsewhere. */
export const forUpdate = (sql: SqlClient) => sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
