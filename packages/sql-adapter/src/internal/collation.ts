import type { SqlClient } from "@effect/sql/SqlClient"

/**
 * `column` compared in byte order. Postgres compares text by the database's
 * collation; `COLLATE "C"` makes it byte order, as SQLite's BINARY and the
 * pure rules' `compareCodePoints` are, so every adapter orders alike.
 */
export const byteOrdered = (sql: SqlClient, column: string) =>
  sql.onDialectOrElse({ pg: () => sql.literal(`${column} COLLATE "C"`), orElse: () => sql.literal(column) })
