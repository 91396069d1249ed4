import { Data, Effect } from "effect"

/**
 * A public input was rejected at the boundary. Nothing was read or written.
 * `field` names the argument (dotted for nested fields) and `reason` says what
 * was wrong with it.
 */
export class InvalidInput extends Data.TaggedError("InvalidInput")<{
  readonly method: string
  readonly field: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.method}: ${this.field} ${this.reason}`
  }
}

/**
 * Why the storage failed, classified from the driver's error by the adapter:
 *
 * - `unreachable`: no connection (refused, reset, timed out, the file cannot be opened);
 * - `authentication`: the server refused the credentials;
 * - `database-missing`: the database (or the SQLite file's directory) does not exist;
 * - `value-too-large`: a value exceeds a storage limit (an index row, a column, SQLite's maximum);
 * - `invalid-text`: a string the database cannot store (Postgres refuses NUL and invalid UTF-8);
 * - `constraint`: a constraint refused the write;
 * - `serialization`, `deadlock`: the database aborted the transaction; a retry may succeed;
 * - `lock-timeout`: a lock was not granted in time (Postgres `lock_timeout`, SQLite busy);
 * - `disk-full`: no space left;
 * - `read-only`: the database refuses writes (a SQLite file opened read-only or not writable, a read-only Postgres transaction or standby);
 * - `not-a-database`: the SQLite file is something else (not a database, or encrypted);
 * - `timeout`: the call, a statement or the connection attempt ran past its time limit (the
 *   store's `callTimeoutMs`, Postgres `statement_timeout`, the connect timeout); nothing of the call was committed;
 * - `too-many-connections`: the server refused a new connection for lack of slots (Postgres 53300);
 * - `corrupt`: the database file is damaged (SQLite `SQLITE_CORRUPT`, a truncated file);
 * - `database-replaced`: the SQLite file under the store was deleted, replaced or truncated since it
 *   was opened; the store refuses every call rather than acknowledge writes that would vanish;
 * - `unknown`: anything else (the driver's message says what).
 */
export type PersistenceReason = (typeof REASONS)[number]

const REASONS = [
  "unreachable",
  "authentication",
  "database-missing",
  "value-too-large",
  "invalid-text",
  "constraint",
  "serialization",
  "deadlock",
  "lock-timeout",
  "disk-full",
  "read-only",
  "not-a-database",
  "timeout",
  "too-many-connections",
  "corrupt",
  "database-replaced",
  "unknown"
] as const

/** Every `PersistenceReason`, in the order of its documentation. */
export const PERSISTENCE_REASONS: ReadonlyArray<PersistenceReason> = REASONS

/**
 * The storage behind a port failed. Adapters turn their driver errors into
 * this once, so no driver error type leaks through a port. `reason` is the
 * classified kind, `driverMessage` the driver's own words, `cause` the raw
 * driver error; `operation` names the adapter step and `method` the public
 * method the caller called (set at the store's boundary).
 */
export class PersistenceError extends Data.TaggedError("PersistenceError")<{
  readonly operation: string
  readonly cause: unknown
  readonly reason?: PersistenceReason | undefined
  readonly driverMessage?: string | undefined
  readonly method?: string | undefined
}> {
  override get message(): string {
    const detail = this.driverMessage ?? deepestMessage(this.cause)
    return `${this.method ?? this.operation}: ${this.reason ?? "unknown"}: ${detail} (${this.operation})`
  }

  /** Turns every failure of an effect into a `PersistenceError` for `operation`. */
  static refail(operation: string) {
    return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, PersistenceError, R> =>
      Effect.mapError(effect, (cause) => new PersistenceError({ operation, cause }))
  }
}

/** The message of the innermost error of a `cause` chain: usually the driver's own. */
export const deepestMessage = (cause: unknown): string => {
  let current = cause
  for (let depth = 0; depth < 8; depth++) {
    const next = current instanceof Error ? current.cause : undefined
    if (next === undefined || next === null) break
    current = next
  }
  return current instanceof Error ? current.message : String(current)
}

/**
 * A call reached a store after `close()` (or after the scope of its layer
 * closed). Nothing was read or written.
 */
export class StoreClosed extends Data.TaggedError("StoreClosed")<{
  readonly method: string
}> {
  override get message(): string {
    return `${this.method}: the store is closed`
  }
}

/**
 * A read-decide-write lost its optimistic-concurrency race on every attempt.
 * Nothing from the lost attempts was applied. `identity` names the row.
 */
export class ConcurrentUpdateExhausted extends Data.TaggedError("ConcurrentUpdateExhausted")<{
  readonly method: string
  readonly identity: string
  readonly attempts: number
}> {
  override get message(): string {
    return `${this.method}: lost the concurrent-update race ${this.attempts} times for ${this.identity}`
  }
}

/** `armWatch` was asked for the `finalize` reason, which only finalize itself may apply. */
export class ReservedArmReason extends Data.TaggedError("ReservedArmReason")<{
  readonly reason: "finalize"
  readonly method?: string | undefined
}> {
  override get message(): string {
    return "armWatch: reason 'finalize' is reserved for finalizeOperationAndArmWatch"
  }
}

/** A call needs the current winner of a document, and the store was given no winner reader. */
export class WinnerReaderMissing extends Data.TaggedError("WinnerReaderMissing")<{
  readonly method: string
}> {
  override get message(): string {
    return `${this.method}: the store was opened without a readWinner dependency`
  }
}

/** The winner reader failed for a document while a transition needed its current winner. */
export class WinnerReadFailed extends Data.TaggedError("WinnerReadFailed")<{
  readonly documentID: string
  readonly cause: unknown
  readonly method?: string | undefined
}> {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `${this.method === undefined ? "" : `${this.method}: `}reading the current winner of document ${this.documentID} failed: ${cause}`
  }
}

/**
 * The store's injected clock (`now` option) returned something that is not a
 * time: not a non-negative safe integer of epoch milliseconds. The call
 * stopped before writing anything.
 */
export class InvalidClockReading extends Data.TaggedError("InvalidClockReading")<{
  readonly reading: string
  readonly method?: string | undefined
}> {
  override get message(): string {
    return `${this.method ?? "now"}: the store's clock returned ${this.reading}, not a non-negative integer of epoch milliseconds`
  }
}

/**
 * A stored row could not be decoded (a JSON column holding text that is not
 * JSON, a number column holding text, an unknown state). A call that
 * addresses the row fails with this; list calls and sweeps skip the row and
 * report it, so every healthy row stays reachable. Nothing was written.
 * `table` is the table's name, `key` the row's identity as text, `column`
 * the column that failed to decode and `detail` why.
 */
export class CorruptRow extends Data.TaggedError("CorruptRow")<{
  readonly table: string
  readonly key: string
  readonly column: string
  readonly detail: string
  readonly method?: string | undefined
}> {
  override get message(): string {
    return `${this.method === undefined ? "" : `${this.method}: `}row ${this.key} of ${this.table} cannot be decoded: ` +
      `${this.column}: ${this.detail}`
  }
}

/**
 * A callback the store called while it held a transaction (a winner reader,
 * say) called the same store back. Waiting would deadlock the store (its
 * transaction waits for the callback, the callback for the store), so the
 * inner call is refused at once. Nothing of the inner call was read or
 * written; the outer call goes on with the callback's failure.
 */
export class ReentrantCall extends Data.TaggedError("ReentrantCall")<{
  readonly method: string
}> {
  override get message(): string {
    return `${this.method}: called from inside one of this store's own transactions (a winner reader or another ` +
      "callback calling the store back); read what it needs before the call, or from another store"
  }
}
