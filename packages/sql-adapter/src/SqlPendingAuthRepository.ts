import { type PendingAuth, PendingAuthRepository, PersistenceError } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Option, Redacted } from "effect"
import { epoch, type RawRow, rowDecoder, text, textOrNull } from "./internal/columns.js"
import type { TableNames } from "./Tables.js"

/** Decodes one column of a pending-auth row; a failure names the column, never its value. */
const column = <A>(row: RawRow, name: string, decode: (value: unknown) => A): A => {
  try {
    return decode(row[name])
  } catch (cause) {
    throw new TypeError(`pending-auth column ${name}: ${cause instanceof Error ? cause.message : "cannot be read"}`)
  }
}

/** The `scopes` column: JSON text of an array of strings. */
const scopesOf = (value: unknown): ReadonlyArray<string> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text(value))
  } catch {
    throw new TypeError("expected the JSON text of an array of strings")
  }
  if (!Array.isArray(parsed) || !parsed.every((scope) => typeof scope === "string")) {
    throw new TypeError("expected the JSON text of an array of strings")
  }
  return parsed
}

/**
 * A pending authorization as read from its table (the original store's
 * columns); the verifier is wrapped at once. Throws, naming the column, on a
 * row that is not a record.
 */
export const decodePendingAuth = (row: RawRow): PendingAuth => {
  const ownerWrappableDID = column(row, "owner_wrappable_did", textOrNull)
  const controllerWrappableDID = column(row, "controller_wrappable_did", textOrNull)
  return {
    state: column(row, "state", text),
    codeVerifier: Redacted.make(column(row, "code_verifier", text)),
    provider: column(row, "provider", text),
    ownerDID: column(row, "owner_did", text),
    ...(ownerWrappableDID === null ? {} : { ownerWrappableDID }),
    ...(controllerWrappableDID === null ? {} : { controllerWrappableDID }),
    createdAt: column(row, "created_at", epoch),
    redirectURL: column(row, "redirect_url", text),
    scopes: column(row, "scopes", scopesOf),
    expiresAt: column(row, "expires_at", epoch)
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
  const decode = rowDecoder(tables.pendingAuth, ["state"], decodePendingAuth)
  return {
    insert: (record) =>
      sql<RawRow>`INSERT INTO ${table} (
          state, code_verifier, provider, owner_did, owner_wrappable_did, controller_wrappable_did,
          created_at, redirect_url, scopes, expires_at
        ) VALUES (
          ${record.state}, ${Redacted.value(record.codeVerifier)}, ${record.provider}, ${record.ownerDID},
          ${record.ownerWrappableDID ?? null}, ${record.controllerWrappableDID ?? null},
          ${record.createdAt}, ${record.redirectURL}, ${JSON.stringify(record.scopes)}, ${record.expiresAt}
        ) ON CONFLICT DO NOTHING RETURNING state`.pipe(
        Effect.map((rows) => rows.length > 0),
        sealed("pendingAuth.insert")
      ),
    // One DELETE … RETURNING: on Postgres a concurrent second delete waits on
    // the row lock and then finds nothing, so exactly one caller gets the row.
    // A row that does not decode fails the take with `CorruptRow` (a defect
    // here, which the store's boundary turns into the call's failure) inside
    // the caller's transaction, whose rollback keeps it (a second take
    // waiting on the lock then finds it again, and fails the same way).
    take: (state) =>
      sql<RawRow>`DELETE FROM ${table} WHERE state = ${state} RETURNING *`.pipe(
        sealed("pendingAuth.take"),
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), decode))
      ),
    deleteExpiredBefore: (cutoff) =>
      sql<RawRow>`DELETE FROM ${table} WHERE expires_at < ${cutoff} RETURNING state`.pipe(
        Effect.map((rows) => rows.length),
        sealed("pendingAuth.deleteExpiredBefore")
      )
  }
}
