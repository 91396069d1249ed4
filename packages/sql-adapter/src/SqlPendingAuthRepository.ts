import { type PendingAuth, PendingAuthRepository, PersistenceError } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Option, Redacted } from "effect"
import { epoch, type RawRow, rowDecoder, text, textOrNull } from "./internal/columns.js"
import { columnsOf, rowSchema } from "./internal/rows.js"
import type { TableNames } from "./Tables.js"

/** `decode` for one column of a pending-auth row: a failure names the column, never its value. */
const named = <A>(name: string, decode: (value: unknown) => A) => (value: unknown): A => {
  try {
    return decode(value)
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

/** A pending authorization as stored: the wrappable DIDs null when none was kept. */
interface StoredPendingAuth extends Omit<PendingAuth, "ownerWrappableDID" | "controllerWrappableDID"> {
  readonly ownerWrappableDID: string | null
  readonly controllerWrappableDID: string | null
}

const pendingAuthColumn = columnsOf<StoredPendingAuth>()

/** The pending-authorization table's row (the original store's columns); the verifier is wrapped as it is read. */
const PENDING_AUTH_SCHEMA = rowSchema<StoredPendingAuth>([
  pendingAuthColumn("state", "state", named("state", text), "text"),
  pendingAuthColumn("code_verifier", "codeVerifier", named("code_verifier", (value) => Redacted.make(text(value))), "text", Redacted.value),
  pendingAuthColumn("provider", "provider", named("provider", text), "text"),
  pendingAuthColumn("owner_did", "ownerDID", named("owner_did", text), "text"),
  pendingAuthColumn("owner_wrappable_did", "ownerWrappableDID", named("owner_wrappable_did", textOrNull), "text"),
  pendingAuthColumn("controller_wrappable_did", "controllerWrappableDID", named("controller_wrappable_did", textOrNull), "text"),
  pendingAuthColumn("created_at", "createdAt", named("created_at", epoch), "bigint"),
  pendingAuthColumn("redirect_url", "redirectURL", named("redirect_url", text), "text"),
  pendingAuthColumn("scopes", "scopes", named("scopes", scopesOf), "text", (scopes) => JSON.stringify(scopes)),
  pendingAuthColumn("expires_at", "expiresAt", named("expires_at", epoch), "bigint")
], ["state"])

/**
 * A pending authorization as read from its table; the verifier is wrapped
 * at once. Throws, naming the column, on a row that is not a record.
 */
export const decodePendingAuth = (row: RawRow): PendingAuth => {
  const { controllerWrappableDID, ownerWrappableDID, ...stored } = PENDING_AUTH_SCHEMA.decode(row)
  return {
    ...stored,
    ...(ownerWrappableDID === null ? {} : { ownerWrappableDID }),
    ...(controllerWrappableDID === null ? {} : { controllerWrappableDID })
  }
}

/** The stored form of `record`. */
const storedOf = (record: PendingAuth): StoredPendingAuth => ({
  ...record,
  ownerWrappableDID: record.ownerWrappableDID ?? null,
  controllerWrappableDID: record.controllerWrappableDID ?? null
})

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
  const decode = rowDecoder(tables.pendingAuth, PENDING_AUTH_SCHEMA.key, decodePendingAuth)
  const allColumns = PENDING_AUTH_SCHEMA.columns.map((column) => column.name)
  const columns = sql.literal(PENDING_AUTH_SCHEMA.list)
  return {
    insert: (record) =>
      sql<RawRow>`INSERT INTO ${table} ${sql.insert(PENDING_AUTH_SCHEMA.record(storedOf(record), allColumns))}
        ON CONFLICT DO NOTHING RETURNING state`.pipe(
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
      sql<RawRow>`DELETE FROM ${table} WHERE state = ${state} RETURNING ${columns}`.pipe(
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
