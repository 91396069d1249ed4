import { Data, Effect } from "effect"

/** A public input was rejected at the boundary (`field` names it, `reason` says why); nothing was read or written. */
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
 * Why the storage failed, as the adapter classifies the driver's error:
 *
 * - `unreachable`: no connection; `authentication`: credentials refused; `database-missing`: no such database (or SQLite directory);
 * - `value-too-large`: past a storage limit; `invalid-text`: a string the database cannot store (NUL, invalid UTF-8);
 * - `constraint`: a constraint refused the write; `serialization`, `deadlock`: the transaction was aborted (a retry may succeed);
 * - `lock-timeout`: a lock not granted in time; `disk-full`; `read-only`: the database refuses writes;
 * - `not-a-database`: the SQLite file is something else; `corrupt`: the file is damaged;
 * - `timeout`: the call, a statement or the connect ran past its limit (`callTimeoutMs` included); nothing was committed;
 * - `too-many-connections`: no connection slot (Postgres 53300);
 * - `database-replaced`: the SQLite file was deleted, replaced or truncated since it was opened; every call is refused;
 * - `unknown`: anything else (see the driver's message).
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

/** The storage behind a port failed: `reason` classifies the driver's error, `method` names the public method called. */
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

/** A call reached a store after `close()` (or after its layer's scope closed); nothing was read or written. */
export class StoreClosed extends Data.TaggedError("StoreClosed")<{
  readonly method: string
}> {
  override get message(): string {
    return `${this.method}: the store is closed`
  }
}

/** A read-decide-write lost its optimistic-concurrency race on every attempt; nothing of them was applied. */
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

/** The store's injected clock (`now`) returned no time (a non-negative safe integer of epoch ms); nothing was written. */
export class InvalidClockReading extends Data.TaggedError("InvalidClockReading")<{
  readonly reading: string
  readonly method?: string | undefined
}> {
  override get message(): string {
    return `${this.method ?? "now"}: the store's clock returned ${this.reading}, not a non-negative integer of epoch milliseconds`
  }
}

/**
 * A stored row could not be decoded (`column` of row `key` in `table`, and why): a call that addresses it fails with
 * this, list calls and sweeps skip and report it; nothing was written.
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

/** A callback run inside the store's transaction (a winner reader) called the store back: refused at once, not deadlocked. */
export class ReentrantCall extends Data.TaggedError("ReentrantCall")<{
  readonly method: string
}> {
  override get message(): string {
    return `${this.method}: called from inside one of this store's own transactions (a winner reader or another ` +
      "callback calling the store back); read what it needs before the call, or from another store"
  }
}
