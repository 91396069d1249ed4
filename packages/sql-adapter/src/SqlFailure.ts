import { PersistenceError, type PersistenceReason } from "@connector-store/core"
import { Cause, Effect, Option } from "effect"

/** What the driver said: its error code (SQLSTATE, `SQLITE_*`, a Node `E*` code), if any, and its message. */
export interface DriverFailure {
  readonly code: string | undefined
  readonly message: string
}

// Codes scrubbed into a message (see the pending-auth repository) read back as `… [CODE]`.
const BRACKETED_CODE = /\[([0-9A-Z]{5}|SQLITE_[A-Z_]+|E[A-Z_]+)\]/

/**
 * The driver's own failure inside `cause`: the innermost error of the chain
 * that carries a code (else the innermost error at all).
 */
export const driverFailureOf = (cause: unknown): DriverFailure => {
  let current: unknown = cause
  let found: DriverFailure | undefined
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    const code = (current as { readonly code?: unknown }).code
    if (typeof code === "string") found = { code, message: current.message }
    else if (found === undefined || found.code === undefined) {
      found = { code: BRACKETED_CODE.exec(current.message)?.[1], message: current.message }
    }
    current = current.cause
  }
  return found ?? { code: undefined, message: String(cause) }
}

/** The code of the error the SQLite client fails with once its file was deleted, replaced or truncated under it. */
export const DATABASE_REPLACED_CODE = "CONNECTOR_STORE_DATABASE_REPLACED"

const NODE_UNREACHABLE = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EPIPE", "EAI_AGAIN"])

const postgresReason = (code: string): PersistenceReason | undefined => {
  if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") return "unreachable"
  if (code === "28P01" || code === "28000") return "authentication"
  if (code === "3D000") return "database-missing"
  if (code === "54000" || code === "54001" || code === "22001") return "value-too-large"
  if (code === "22021" || code === "22P05") return "invalid-text"
  if (code.startsWith("23")) return "constraint"
  if (code === "40001") return "serialization"
  if (code === "40P01") return "deadlock"
  if (code === "55P03") return "lock-timeout"
  if (code === "57014") return "timeout"
  if (code === "53300") return "too-many-connections"
  if (code === "53100") return "disk-full"
  if (code === "25006") return "read-only"
  return undefined
}

const sqliteReason = (code: string): PersistenceReason | undefined => {
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return "lock-timeout"
  if (code === "SQLITE_FULL") return "disk-full"
  if (code === "SQLITE_TOOBIG") return "value-too-large"
  if (code.startsWith("SQLITE_CONSTRAINT")) return "constraint"
  if (code.startsWith("SQLITE_CANTOPEN")) return "unreachable"
  if (code === "SQLITE_AUTH") return "authentication"
  if (code.startsWith("SQLITE_READONLY")) return "read-only"
  if (code === "SQLITE_NOTADB") return "not-a-database"
  if (code.startsWith("SQLITE_CORRUPT")) return "corrupt"
  return undefined
}

/**
 * What `pg` and its pool say when a time limit of theirs ran out: a new
 * connection not established in time, no free client in time, a query's
 * client-side timeout.
 */
const CLIENT_TIMEOUT = /timeout exceeded when trying to connect|due to connection timeout|Query read timeout/i

/** Whether an error of the chain `cause` says a client-side time limit ran out (see `CLIENT_TIMEOUT`). */
const clientTimedOut = (cause: unknown): boolean => {
  let current: unknown = cause
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (CLIENT_TIMEOUT.test(current.message)) return true
    current = current.cause
  }
  return false
}

/** The reason of a driver failure, from its code (Postgres SQLSTATE, SQLite, Node) or, lacking one, its words. */
export const classifyDriverFailure = (failure: DriverFailure): PersistenceReason => {
  const { code, message } = failure
  if (code !== undefined) {
    if (code === DATABASE_REPLACED_CODE) return "database-replaced"
    if (NODE_UNREACHABLE.has(code)) return "unreachable"
    const reason = code.startsWith("SQLITE_") ? sqliteReason(code) : /^[0-9A-Z]{5}$/.test(code) ? postgresReason(code) : undefined
    if (reason !== undefined) return reason
  }
  // better-sqlite3 throws a plain TypeError, without a code, for a file in a missing directory.
  if (/directory does not exist/i.test(message)) return "database-missing"
  if (CLIENT_TIMEOUT.test(message)) return "timeout"
  // pg refuses a query on a client whose connection broke or ended: "… and is not queryable".
  if (/connection terminated|connection ended|Connection refused|is not queryable/i.test(message)) return "unreachable"
  return "unknown"
}

/**
 * A `PersistenceError` with its `reason` and `driverMessage` filled in from
 * its driver cause. Anything else, and an error already classified, is
 * returned unchanged.
 */
export const classified = <E>(error: E): E => {
  if (!(error instanceof PersistenceError) || error.reason !== undefined) return error
  const failure = driverFailureOf(error.cause)
  return new PersistenceError({
    operation: error.operation,
    cause: error.cause,
    reason: clientTimedOut(error.cause) ? "timeout" : classifyDriverFailure(failure),
    driverMessage: failure.message,
    method: error.method
  }) as E
}

/**
 * `effect` with its failure classified (see `classified`). Only the failure
 * path does anything: a success passes through untouched (no continuation
 * is pushed for it), and a failure that needs no classification is passed
 * on as it is. Like `Effect.mapError`, a classified failure replaces the
 * cause with its first failure.
 */
const classifiedFailure = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.catchAllCause(effect, (cause) => {
    const failure = Cause.failureOption(cause)
    if (Option.isNone(failure)) return Effect.failCause(cause)
    const refined = classified(failure.value)
    return refined === failure.value ? Effect.failCause(cause) : Effect.fail(refined)
  })

/**
 * The port with the failure of every effect it returns classified (see
 * `classified`): the one place where SQL driver errors get their reason.
 */
export const classifiedPort = <S extends object>(service: S): S => {
  const out: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(service)) {
    out[name] = typeof value === "function"
      ? (...args: ReadonlyArray<unknown>) => {
        const result: unknown = (value as (...a: ReadonlyArray<unknown>) => unknown)(...args)
        return Effect.isEffect(result) ? classifiedFailure(result) : result
      }
      : Effect.isEffect(value)
      ? classifiedFailure(value)
      : value
  }
  return out as S
}
