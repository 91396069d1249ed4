import { Cause, Effect, Exit } from "effect"
import { ConcurrentUpdateExhausted, PersistenceError, WinnerReadFailed } from "../errors.js"
import { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import type { DirectDatabaseApi, DirectTransaction } from "../ports/DirectDatabase.js"
import type { Digest, Millis } from "../watch/ProjectionWatch.js"
import { countLostRaceNow, MAX_CAS_ATTEMPTS } from "./cas.js"
import { type DirectContext, directContextOf } from "./directContext.js"
import { nativeTracer } from "./instrument.js"

/**
 * Where a direct transition stands: done with its value, waiting for one
 * document's winner, read inside the open transaction, to go on, or (on a
 * database that answers later) waiting for a statement's answer.
 */
export type Step<A> =
  | { readonly done: true; readonly value: A }
  | {
    readonly done: false
    readonly documentID: string
    readonly resume: (winner: Digest | null) => Step<A>
  }
  | {
    readonly done: false
    readonly documentID?: undefined
    readonly answer: Promise<unknown>
    readonly resume: (answered: never) => Step<A>
  }

/** A step waiting for a winner (see `withWinner`). */
export type AwaitingWinner<A> = Extract<Step<A>, { readonly documentID: string }>

/** A finished step. */
export const done = <A>(value: A): Step<A> => ({ done: true, value })

/** A step that goes on with the winner of `documentID`. */
export const withWinner = <A>(documentID: string, resume: (winner: Digest | null) => Step<A>): Step<A> => ({
  done: false,
  documentID,
  resume
})

/** Goes on with a row call's answer: at once when it has one, else once its Promise settles. */
export const after = <T, A>(answer: T | Promise<T>, next: (answered: T) => Step<A>): Step<A> =>
  answer instanceof Promise ? { done: false, answer, resume: next as (answered: never) => Step<A> } : next(answer)

/**
 * The value of a step taken on rows that answer at once and read no
 * winner (a claim's unlocked try): throws if it was anything else.
 */
export const settledNow = <A>(step: Step<A>): A => {
  if (!step.done) throw new Error("a direct transition waited on rows that answer at once")
  return step.value
}

/** Thrown by a direct transition whose versioned write matched nothing: the try is rolled back and run again. */
export const LOST_RACE: unique symbol = Symbol("connector-store/LostRace")

/** Continues when a versioned write landed; otherwise abandons the try (see `LOST_RACE`). */
export const wonDirect = (won: boolean): void => {
  if (!won) throw LOST_RACE
}

/** The failures a direct transition throws as typed errors; anything else it throws is a defect. */
export const isTypedFailure = (error: unknown): error is PersistenceError | IdempotencyConflict | WinnerReadFailed =>
  error instanceof PersistenceError || error instanceof IdempotencyConflict || error instanceof WinnerReadFailed

/** A direct transition's try, given the time it decides at. */
export type DirectProgram<A> = (now: Millis) => Step<A>

/**
 * Runs `program` as one transaction on `db` now, retried whole on a lost
 * race as `retryOnLostRace` does (same budget, same metric, same error).
 * The transaction begins, reads, decides, writes and commits synchronously,
 * and the answer is then an `Exit`; only a winner read that does not answer
 * at once (`readWinner` giving anything but an `Exit`, joined to the
 * transaction) makes it an effect that continues after the read, where an
 * interruption rolls the transaction back. Undefined, with nothing done,
 * when the first try cannot begin (another transaction is open, or the
 * clock reading is not a time): take the Effect path. A later try that
 * cannot begin runs `fallback`.
 *
 * `F` is what the program throws as a typed failure besides
 * `PersistenceError` (`IdempotencyConflict`); anything else it throws is a
 * defect. Must be called in an uninterruptible region (`context.restore`).
 */
export const directTransactionNow = <A, E, R, W = never, F = never>(
  db: DirectDatabaseApi,
  method: string,
  identity: string,
  program: DirectProgram<A>,
  readWinner: ((documentID: string) => Effect.Effect<Digest | null, W>) | undefined,
  context: DirectContext,
  fallback: () => Effect.Effect<A, E, R>,
  triedBefore = 0
): Effect.Effect<A, E | W | F | PersistenceError | ConcurrentUpdateExhausted, R> | undefined => {
  type Out = Effect.Effect<A, E | W | F | PersistenceError | ConcurrentUpdateExhausted, R>
  const { restore } = context
  const afterThrow = (transaction: DirectTransaction, thrown: unknown, tried: number, rolledBack: boolean): Out => {
    if (!rolledBack) {
      try {
        transaction.rollback()
      } catch (failedRollback) {
        return Exit.failCause(Cause.sequential(Cause.die(thrown), Cause.die(failedRollback)))
      }
    }
    if (thrown === LOST_RACE) {
      countLostRaceNow(method, context.labels)
      return tried + 1 >= MAX_CAS_ATTEMPTS
        ? Exit.fail(new ConcurrentUpdateExhausted({ method, identity, attempts: tried + 1 }))
        : attempt(tried + 1) ?? restore(fallback())
    }
    return isTypedFailure(thrown) ? Exit.fail(thrown as F | PersistenceError) : Exit.die(thrown)
  }
  const proceed = (transaction: DirectTransaction, next: () => Step<A>, tried: number): Out => {
    let step: Step<A>
    // The read that did not answer at once: run below, joined to the transaction.
    let pending: Effect.Effect<Digest | null, W> | undefined
    try {
      step = next()
      // Winners that answer at once are used as they are: nothing to run,
      // nothing that could query inside the transaction.
      while (!step.done) {
        if (step.documentID === undefined) throw new Error(`${method}: a direct transition waited on rows that answer at once`)
        if (readWinner === undefined) throw new Error(`${method}: a direct transition read a winner without a reader`)
        const reading = readWinner(step.documentID)
        if (!Exit.isExit(reading)) {
          pending = reading
          break
        }
        const read = reading as Exit.Exit<Digest | null, W>
        if (Exit.isFailure(read)) return afterRead(transaction, read.cause)
        step = step.resume(read.value)
      }
    } catch (thrown) {
      return afterThrow(transaction, thrown, tried, false)
    }
    if (step.done) {
      try {
        transaction.commit()
      } catch (thrown) {
        return afterThrow(transaction, thrown, tried, true)
      }
      return Exit.succeed(step.value)
    }
    const waiting = step as AwaitingWinner<A>
    return Effect.matchCauseEffect(transaction.joined(restore(pending!)), {
      onFailure: (cause): Out => afterRead(transaction, cause),
      onSuccess: (winner): Out => proceed(transaction, () => waiting.resume(winner), tried)
    })
  }
  const afterRead = (transaction: DirectTransaction, cause: Cause.Cause<W>): Out => {
    try {
      transaction.rollback()
    } catch (failedRollback) {
      return Exit.failCause(Cause.sequential(cause, Cause.die(failedRollback)))
    }
    return Exit.failCause(cause)
  }
  const attempt = (tried: number): Out | undefined => {
    const now = context.now()
    if (now === undefined) return undefined
    let transaction: DirectTransaction | undefined
    try {
      transaction = db.begin()
    } catch (thrown) {
      return thrown instanceof PersistenceError ? Exit.fail(thrown) : Exit.die(thrown)
    }
    if (transaction === undefined) return undefined
    const open = transaction
    return proceed(open, () => program(now), tried)
  }
  return attempt(triedBefore)
}

/**
 * A direct attempt (one of the `direct…Now` runners, with its arguments) as
 * an effect of its own, for a method's effect: on the fiber it runs on, in
 * an uninterruptible region; with a tracer installed, or when the attempt
 * declines (a busy database, a clock reading to refuse), `fallback` (the
 * Effect path) runs instead, interruptibly.
 */
export const runAttempt = <A, E1, E2, R>(
  attempt: (context: DirectContext) => Effect.Effect<A, E1, R> | undefined,
  fallback: () => Effect.Effect<A, E2, R>
): Effect.Effect<A, E1 | E2, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<A, E1 | E2, R>((fiber) =>
      // With a tracer installed, the Effect path runs, so every statement and try gets its span.
      fiber.currentTracer !== nativeTracer ? restore(fallback()) : attempt(directContextOf(fiber, restore)) ?? restore(fallback())
    )
  )

/**
 * The direct form of an optimistic-then-locked write (see the operation
 * methods): the first try runs `unlocked` as single statements with no
 * transaction (a versioned write is a compare-and-set of its own); if its
 * write loses (it throws `LOST_RACE`), every further try runs `locked` as a
 * transaction (see `directTransactionNow`), where the write cannot lose
 * again. Undefined when the database is busy or the clock unreadable at the start.
 */
export const directOptimisticNow = <A, E, R, F = never>(
  db: DirectDatabaseApi,
  method: string,
  identity: string,
  unlocked: (now: Millis) => A,
  locked: DirectProgram<A>,
  context: DirectContext,
  fallback: () => Effect.Effect<A, E, R>
): Effect.Effect<A, E | F | PersistenceError | ConcurrentUpdateExhausted, R> | undefined => {
  const now = context.now()
  if (now === undefined || !db.free()) return undefined
  try {
    return Exit.succeed(unlocked(now))
  } catch (thrown) {
    if (thrown !== LOST_RACE) return isTypedFailure(thrown) ? Exit.fail(thrown as F | PersistenceError) : Exit.die(thrown)
  }
  countLostRaceNow(method, context.labels)
  return directTransactionNow<A, E, R, never, F>(db, method, identity, locked, undefined, context, fallback, 1) ??
    context.restore(fallback())
}

/**
 * Runs `statement` (one guarded write, no transaction) on `db` now: its
 * `Exit`, or undefined when a transaction is open or the clock unreadable
 * (take the Effect path, which waits its turn).
 */
export const directStatementNow = <A>(
  db: DirectDatabaseApi,
  statement: (now: Millis) => A,
  context: DirectContext
): Exit.Exit<A, PersistenceError> | undefined => {
  const now = context.now()
  if (now === undefined || !db.free()) return undefined
  try {
    return Exit.succeed(statement(now))
  } catch (thrown) {
    return thrown instanceof PersistenceError ? Exit.fail(thrown) : Exit.die(thrown)
  }
}
