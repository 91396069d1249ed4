import type { TrackedPosition } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"

/**
 * `column` compared in byte order. Postgres compares text by the database's
 * collation; `COLLATE "C"` makes it byte order, as SQLite's BINARY and the
 * pure rules' `compareCodePoints` are, so every adapter orders alike.
 */
export const byteOrdered = (sql: SqlClient, column: string) =>
  sql.onDialectOrElse({ pg: () => sql.literal(`${column} COLLATE "C"`), orElse: () => sql.literal(column) })

/**
 * The rows strictly older than `after` in the operations' newest-first
 * order (created_at, caller_did, operation_id), ids compared in byte order:
 * the keyset step of every operation page.
 */
export const olderThanPosition = (sql: SqlClient, after: TrackedPosition) =>
  sql`(created_at < ${after.createdAt}
    OR (created_at = ${after.createdAt} AND ${byteOrdered(sql, "caller_did")} < ${after.callerDID})
    OR (created_at = ${after.createdAt} AND caller_did = ${after.callerDID} AND ${byteOrdered(sql, "operation_id")} < ${after.operationID}))`
