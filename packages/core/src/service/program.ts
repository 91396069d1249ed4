import { type Cause, Effect } from "effect"
import type { PersistenceError } from "../errors.js"
import type { DirectOperationRows, DirectWatchRows } from "../ports/DirectDatabase.js"
import type { PairedWrite } from "../ports/OperationRepository.js"
import type { Digest, Millis } from "../watch/ProjectionWatch.js"

/** How a row call answers in a program: at once, with a Promise, or as an effect (the ports). */
export type Answer<A> = A | Promise<A> | Effect.Effect<A, PersistenceError>

type Answering<Rows> = {
  readonly [K in keyof Rows]: Rows[K] extends (...args: infer P) => infer R ? (...args: P) => Answer<R> : never
}

/** The rows a program reads and writes, whichever way they answer; each call means what the port method of its name means. */
export interface ProgramRows {
  readonly watches: Answering<DirectWatchRows>
  readonly operations: Answering<DirectOperationRows>
}

/** Where a transition's program stands: done, or waiting for a document's winner or for a row call's answer. */
export type Step<A> =
  | { readonly done: true; readonly value: A }
  | {
    readonly done: false
    readonly documentID: string
    readonly resume: (winner: Digest | null) => Step<A>
    /** The winner to go on with when the store has no winner reader; without it, a reader is required. */
    readonly unread?: { readonly winner: Digest | null } | undefined
  }
  | {
    readonly done: false
    readonly documentID?: undefined
    readonly answer: Promise<unknown> | Effect.Effect<unknown, PersistenceError>
    readonly resume: (answered: never) => Step<A>
  }

/** A step waiting for a winner (see `withWinner`). */
export type AwaitingWinner<A> = Extract<Step<A>, { readonly documentID: string }>

/** A finished step. */
export const done = <A>(value: A): Step<A> => ({ done: true, value })

/** A step that goes on with the winner of `documentID`. */
export const withWinner = <A>(
  documentID: string,
  resume: (winner: Digest | null) => Step<A>,
  unread?: { readonly winner: Digest | null }
): Step<A> => ({ done: false, documentID, resume, unread })

/** `step`, then `next` with its value: one program made of two. */
export const andThen = <A, B>(step: Step<A>, next: (value: A) => Step<B>): Step<B> => {
  if (step.done) return next(step.value)
  if (step.documentID !== undefined) {
    const waiting = step
    return { done: false, documentID: waiting.documentID, resume: (winner) => andThen(waiting.resume(winner), next), unread: waiting.unread }
  }
  const waiting = step
  return { done: false, answer: waiting.answer, resume: (answered: never) => andThen(waiting.resume(answered), next) }
}

/** Goes on with a row call's answer: at once when it has one, else once its Promise or effect answers. */
export const after = <T, A>(answer: Answer<T>, next: (answered: T) => Step<A>): Step<A> =>
  answer instanceof Promise || Effect.isEffect(answer)
    ? { done: false, answer, resume: next as unknown as (answered: never) => Step<A> }
    : next(answer as T)

/** Thrown by a program whose versioned write matched nothing: the try is rolled back and run again. */
export const LOST_RACE: unique symbol = Symbol("connector-store/LostRace")

/** Goes on when a versioned write landed; otherwise abandons the try (see `LOST_RACE`). */
export const afterWon = <A>(won: Answer<boolean>, next: () => Step<A>): Step<A> =>
  after(won, (landed) => {
    if (!landed) throw LOST_RACE
    return next()
  })

/** Goes on when both writes of a paired write landed; otherwise abandons the try. */
export const afterBothWon = <A>(written: Answer<PairedWrite>, next: () => Step<A>): Step<A> =>
  after(written, (answer) => {
    if (answer !== "written") throw LOST_RACE
    return next()
  })

/** What an unlocked first try answers when it cannot decide without the row locked: the locked tries decide, no race lost. */
export const LOCKED: unique symbol = Symbol("connector-store/Locked")

/** Whether a program (or a winner reader) threw `error` as one of the store's tagged errors, not a defect. */
export const isTypedFailure = (error: unknown): error is TaggedFailure =>
  error instanceof Error && Effect.isEffect(error) && typeof (error as { readonly _tag?: unknown })._tag === "string"

/** A store error a program throws (`PersistenceError`, `IdempotencyConflict`, an operator refusal, …). */
export type TaggedFailure = Cause.YieldableError & { readonly _tag: string }

/**
 * One call's prepared transition, what every runner runs: `locked` tries run in a transaction; an `unlocked` first try (if any)
 * runs without one, and its lost race or `LOCKED` sends the rest to `locked`. `F` is what its programs throw as typed failures.
 */
export interface Transition<A, F = never> {
  /** The public method, for metrics and errors. */
  readonly method: string
  /** What the call is about, as `ConcurrentUpdateExhausted` names it. */
  readonly identity: string
  readonly unlocked?: ((rows: ProgramRows, now: Millis) => Step<A | typeof LOCKED>) | undefined
  readonly locked?: ((rows: ProgramRows, now: Millis) => Step<A>) | undefined
  /** Only a type: the typed failures its programs throw, besides `PersistenceError`. */
  readonly fails?: F
}
