import { type PendingAuth, PendingAuthRepository, PersistenceError } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Option, Redacted } from "effect"
import { epoch, type RawRow, text, textOrNull } from "./internal/columns.js"
import type { TableNames } from "./Tables.js"

/** A pending authorization as read from its table; the verifier is wrapped at once. */
export const decodePendingAuth = (row: RawRow): PendingAuth => {
  const scopes = textOrNull(row["scopes"])
  return {
    state: text(row["state"]),
    connectorName: text(row["connector_name"]),
    ownerDID: text(row["owner_did"]),
    codeVerifier: Redacted.make(text(row["code_verifier"])),
    redirectUri: text(row["redirect_uri"]),
    scopes: scopes === null ? [] : JSON.parse(scopes) as ReadonlyArray<string>,
    createdAt: epoch(row["created_at"]),
    expiresAt: epoch(row["expires_at"])
  }
}

const MASK = "<redacted>"

/** A run of characters long enough to be a PKCE verifier (RFC 7636: 43+ of `A-Z a-z 0-9 - . _ ~`). */
const VERIFIER_LIKE = /[A-Za-z0-9\-._~]{43,}/g

/**
 * The text of a driver failure, safe to keep: the messages and codes along
 * its cause chain, without the fields where databases quote the failing row
 * (Postgres' `detail`: "Failing row contains (…)"), and with every run of
 * characters that could be a verifier masked, since a trigger or check may
 * still quote one in a message (a consume does not know the verifier it is
 * deleting). A long identifier in the message is masked too; that is the price.
 */
export const scrubbedFailure = (cause: unknown): Error => {
  const parts: Array<string> = []
  let current: unknown = cause
  for (let depth = 0; depth < 5 && current !== null && current !== undefined; depth++) {
    if (!(current instanceof Error)) {
      parts.push(String(current))
      break
    }
    const code = (current as { readonly code?: unknown }).code
    parts.push(typeof code === "string" ? `${current.message} [${code}]` : current.message)
    current = current.cause
  }
  return new Error(parts.join(": ").replace(VERIFIER_LIKE, MASK))
}

/**
 * Runs a pending-auth statement so that nothing of its row escapes: untraced
 * (the SQL client's span would keep the returned row, verifier included, in
 * its exit, and a failure's driver error in its cause), and failing with a
 * `PersistenceError` whose cause is `scrubbedFailure`, never the driver's
 * error object.
 */
const sealed = (operation: string) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, PersistenceError, R> =>
  effect.pipe(
    Effect.mapError((cause) => new PersistenceError({ operation, cause: scrubbedFailure(cause) })),
    Effect.withTracerEnabled(false)
  )

/** The pending-authorization table on a SQL client. */
export const makeSqlPendingAuthRepository = (sql: SqlClient, tables: TableNames): PendingAuthRepository["Type"] => {
  const table = sql(tables.pendingAuth)
  return {
    insert: (record) =>
      sql<RawRow>`INSERT INTO ${table} (
          state, connector_name, owner_did, code_verifier, redirect_uri, scopes, created_at, expires_at
        ) VALUES (
          ${record.state}, ${record.connectorName}, ${record.ownerDID}, ${Redacted.value(record.codeVerifier)}, ${record.redirectUri},
          ${JSON.stringify(record.scopes)}, ${record.createdAt}, ${record.expiresAt}
        ) ON CONFLICT DO NOTHING RETURNING state`.pipe(
        Effect.map((rows) => rows.length > 0),
        sealed("pendingAuth.insert")
      ),
    // One DELETE … RETURNING: on Postgres a concurrent second delete waits on
    // the row lock and then finds nothing, so exactly one caller gets the row.
    take: (state) =>
      sql<RawRow>`DELETE FROM ${table} WHERE state = ${state} RETURNING *`.pipe(
        Effect.flatMap((rows) => Effect.try(() => Option.map(Option.fromNullable(rows[0]), decodePendingAuth))),
        sealed("pendingAuth.take")
      ),
    deleteExpiredBefore: (cutoff) =>
      sql<RawRow>`DELETE FROM ${table} WHERE expires_at < ${cutoff} RETURNING state`.pipe(
        Effect.map((rows) => rows.length),
        sealed("pendingAuth.deleteExpiredBefore")
      )
  }
}
