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
 * The storage behind a port failed (driver error, lost connection, a
 * constraint). Adapters turn their driver errors into this once, so no driver
 * error type leaks through a port.
 */
export class PersistenceError extends Data.TaggedError("PersistenceError")<{
  readonly operation: string
  readonly cause: unknown
}> {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `${this.operation}: storage failed: ${cause}`
  }

  /** Turns every failure of an effect into a `PersistenceError` for `operation`. */
  static refail(operation: string) {
    return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, PersistenceError, R> =>
      Effect.mapError(effect, (cause) => new PersistenceError({ operation, cause }))
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
}> {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `reading the current winner of document ${this.documentID} failed: ${cause}`
  }
}
