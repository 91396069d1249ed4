import { Cause, Clock, Effect, Exit } from "effect"
import { ConcurrentUpdateExhausted, PersistenceError, WinnerReadFailed } from "../errors.js"
import { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import type { DirectDatabaseApi, DirectTransaction } from "../ports/DirectDatabase.js"
import type { Digest, Millis } from "../watch/ProjectionWatch.js"
import { countLostRace, MAX_CAS_ATTEMPTS } from "./cas.js"
import { nativeTracer } from "./instrument.js"

/**
 * Where a direct transition stands: done with its value, or waiting for
 * one document's winner, read inside the open transaction, to go on.
 */
export type Step<A> =
  | { readonly done: true; readonly value: A }
  | { readonly done: false; readonly documentID: string; readonly resume: (winner: Digest | null) => Step<A> }

/** A finished step. */
export const done = <A>(value: A): Step<A> => ({ done: true, value })

/** A step that goes on with the winner of `documentID`. */
export const withWinner = <A>(documentID: string, resume: (winner: Digest | null) => Step<A>): Step<A> => ({
  done: false,
  documentID,
  resume
})

/** Thrown by a direct transition whose versioned write matched nothing: the try is rolled back and run again. */
export const LOST_RACE: unique symbol = Symbol("connector-store/LostRace")

/** Continues when a versioned write landed; otherwise abandons the try (see `LOST_RACE`). */
export const wonDirect = (won: boolean): void => {
  if (!won) throw LOST_RACE
}

/** The failures a direct transition throws as typed errors; anything else it throws is a defect. */
const isTypedFailure = (error: unknown): error is PersistenceError | IdempotencyConflict | WinnerReadFailed =>
  error instanceof PersistenceError || error instanceof IdempotencyConflict || error instanceof WinnerReadFailed

/** A direct transition's try, given the time it decides at. */
export type DirectProgram<A> = (now: Millis) => Step<A>

/**
 * Runs `program` as one transaction on `db`, retried whole on a lost race as
 * `retryOnLostRace` does (same budget, same metric, same error). The
 * transaction begins, reads, decides and writes in one synchronous step;
 * only a winner read (`readWinner`, joined to the transaction) may suspend,
 * and an interruption there rolls the transaction back. When `db` is busy
 * with another transaction at the start of a try, that try and the rest
 * run as `fallback` (the Effect path, which waits its turn).
 *
 * `F` is what the program throws as a typed failure besides
 * `PersistenceError` (`IdempotencyConflict`); anything else it throws is a
 * defect.
 */
export const runDirectTransaction = <A, E, R, W = never, F = never>(
  db: DirectDatabaseApi,
  method: string,
  identity: string,
  program: DirectProgram<A>,
  readWinner: ((documentID: string) => Effect.Effect<Digest | null, W>) | undefined,
  fallback: () => Effect.Effect<A, E, R>,
  triedBefore = 0
): Effect.Effect<A, E | W | F | PersistenceError | ConcurrentUpdateExhausted, R> => {
  type Out = Effect.Effect<A, E | W | F | PersistenceError | ConcurrentUpdateExhausted, R>
  const afterThrow = (transaction: DirectTransaction, thrown: unknown, tried: number, rolledBack: boolean): Out => {
    if (!rolledBack) {
      try {
        transaction.rollback()
      } catch (failedRollback) {
        return Effect.failCause(Cause.sequential(Cause.die(thrown), Cause.die(failedRollback)))
      }
    }
    if (thrown === LOST_RACE) {
      return Effect.zipRight(
        countLostRace(method),
        tried + 1 >= MAX_CAS_ATTEMPTS
          ? Effect.fail(new ConcurrentUpdateExhausted({ method, identity, attempts: tried + 1 }))
          : attempt(tried + 1)
      )
    }
    return isTypedFailure(thrown) ? Effect.fail(thrown as F | PersistenceError) : Effect.die(thrown)
  }
  const proceed = (
    restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>,
    transaction: DirectTransaction,
    next: () => Step<A>,
    tried: number
  ): Out => {
    let step: Step<A>
    try {
      step = next()
    } catch (thrown) {
      return afterThrow(transaction, thrown, tried, false)
    }
    if (step.done) {
      try {
        transaction.commit()
      } catch (thrown) {
        return afterThrow(transaction, thrown, tried, true)
      }
      return Effect.succeed(step.value)
    }
    const waiting = step
    if (readWinner === undefined) {
      return afterThrow(transaction, new Error(`${method}: a direct transition read a winner without a reader`), tried, false)
    }
    const afterRead = (read: Exit.Exit<Digest | null, W>): Out => {
      if (Exit.isSuccess(read)) return proceed(restore, transaction, () => waiting.resume(read.value), tried)
      try {
        transaction.rollback()
      } catch (failedRollback) {
        return Effect.failCause(Cause.sequential(read.cause, Cause.die(failedRollback)))
      }
      return Effect.failCause(read.cause)
    }
    const reading = readWinner(waiting.documentID)
    // An answer already complete (`Effect.succeed`, `Effect.fail`) is used as
    // it is: nothing to run, nothing that could query inside the transaction.
    return Exit.isExit(reading)
      ? afterRead(reading as Exit.Exit<Digest | null, W>)
      : Effect.flatMap(Effect.exit(restore(transaction.joined(reading))), afterRead)
  }
  const attempt = (tried: number): Out =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.uninterruptibleMask((restore) => {
        let transaction: DirectTransaction | undefined
        try {
          transaction = db.begin()
        } catch (thrown) {
          return thrown instanceof PersistenceError ? Effect.fail(thrown) : Effect.die(thrown)
        }
        return transaction === undefined ? restore(fallback()) : proceed(restore, transaction, () => program(now), tried)
      }))
  // With a tracer installed, the Effect path runs, so every statement and try gets its span.
  return Effect.withFiberRuntime((fiber) => fiber.currentTracer === nativeTracer ? attempt(triedBefore) : fallback())
}

/**
 * The direct form of an optimistic-then-locked write (see the operation
 * methods): the first try runs `unlocked` as single statements with no
 * transaction (a versioned write is a compare-and-set of its own); if its
 * write loses (it throws `LOST_RACE`), every further try runs `locked` as a
 * transaction (see `runDirectTransaction`), where the write cannot lose
 * again. When a transaction is open at the start, `fallback` runs instead.
 */
export const runDirectOptimistic = <A, E, R, F = never>(
  db: DirectDatabaseApi,
  method: string,
  identity: string,
  unlocked: (now: Millis) => A,
  locked: DirectProgram<A>,
  fallback: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E | F | PersistenceError | ConcurrentUpdateExhausted, R> =>
  Effect.withFiberRuntime((fiber) =>
    fiber.currentTracer !== nativeTracer ? fallback() : Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (!db.free()) return fallback()
      try {
        return Effect.succeed(unlocked(now))
      } catch (thrown) {
        if (thrown !== LOST_RACE) return isTypedFailure(thrown) ? Effect.fail(thrown as F | PersistenceError) : Effect.die(thrown)
      }
      return Effect.zipRight(
        countLostRace(method),
        runDirectTransaction<A, E, R, never, F>(db, method, identity, locked, undefined, fallback, 1)
      )
    })
  )

/**
 * Runs `statement` (one guarded write, no transaction) on `db` now when no
 * transaction is open, else `fallback` (the Effect path, which waits its turn).
 */
export const runDirectStatement = <A, E, R>(
  db: DirectDatabaseApi,
  statement: (now: Millis) => A,
  fallback: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E | PersistenceError, R> =>
  Effect.withFiberRuntime<A, E | PersistenceError, R>((fiber) =>
    fiber.currentTracer === nativeTracer ? statementNow(db, statement, fallback) : fallback()
  )

const statementNow = <A, E, R>(
  db: DirectDatabaseApi,
  statement: (now: Millis) => A,
  fallback: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E | PersistenceError, R> =>
  Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<A, E | PersistenceError, R> => {
    if (!db.free()) return fallback()
    try {
      return Effect.succeed(statement(now))
    } catch (thrown) {
      return thrown instanceof PersistenceError ? Effect.fail(thrown) : Effect.die(thrown)
    }
  })
