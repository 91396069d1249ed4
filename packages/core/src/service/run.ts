import { Cause, Clock, Data, Effect, Exit, type Fiber, FiberRef, type MetricLabel, Option } from "effect"
import { ConcurrentUpdateExhausted, PersistenceError } from "../errors.js"
import type { OperationRepository } from "../ports/OperationRepository.js"
import { type DirectDatabaseApi, type DirectDatabaseOf, type DirectTransaction, type DirectTransactionOf, LOCKED_ELSEWHERE } from "../ports/DirectDatabase.js"
import type { WatchRepository } from "../ports/WatchRepository.js"
import type { Digest, Millis } from "../watch/ProjectionWatch.js"
import { type LaneCall, onBehalfOf } from "./bound.js"
import type { DirectContext } from "./directContext.js"
import { annotateSpanOf } from "./tracing.js"
import { storeSeries } from "./metrics.js"
import {
  type AwaitingWinner,
  isTypedFailure,
  LOCKED,
  LOST_RACE,
  type ProgramRows,
  type Step,
  type TaggedFailure,
  type Transition
} from "./program.js"

/**
 * How a call runs a transition on any of three runners of the same programs: `runOnPorts` (effects over the ports), `runNow`
 * (synchronously on a `DirectDatabaseApi`, for the Effect API) and `runOnLane` (no fiber, for the Promise API). A call has one
 * budget of `MAX_CAS_ATTEMPTS` lost tries wherever they ran: a runner that cannot go on hands the call, with its `Position`, to
 * `runOnPorts`.
 */

/** How many tries of a read-decide-write a call makes before it gives up. */
export const MAX_CAS_ATTEMPTS = 6

/** A versioned write found the row changed since it was read: the try rolls back; callers never see it. */
export class LostRace extends Data.TaggedError("LostRace")<{}> {}

/** Continues when a versioned write landed; otherwise abandons the try. */
export const requireWon = (won: boolean): Effect.Effect<void, LostRace> =>
  won ? Effect.void : Effect.fail(new LostRace())

/** Where a call stands in its budget: the tries it lost, and whether its next try runs locked. */
export interface Position {
  readonly tried: number
  readonly locked: boolean
}

/** A call that has not tried yet. */
export const START: Position = { tried: 0, locked: false }

/** Whether the try at `at` runs `transition.unlocked` (outside any transaction). */
const unlockedAt = (transition: Transition<unknown, unknown>, at: Position): boolean =>
  !at.locked && transition.unlocked !== undefined

/** The try after a lost one at `at` (counted in `lostRaceRetries`), or `ConcurrentUpdateExhausted` once the budget is spent. */
const afterLost = (method: string, identity: string, at: Position, labels: ReadonlyArray<MetricLabel.MetricLabel>) => {
  lostRaceSeries(method).unsafeUpdate(1, labels)
  return at.tried + 1 >= MAX_CAS_ATTEMPTS
    ? new ConcurrentUpdateExhausted({ method, identity, attempts: at.tried + 1 })
    : { tried: at.tried + 1, locked: true }
}

/** What an unlocked try's value means: the call's answer, or (`LOCKED`) go on locked. */
const lockedAfter = (at: Position): Position => ({ tried: at.tried, locked: true })

/** Runs `resume`, turning what it throws into the try's failure: a lost race, a typed failure, or a defect. */
const resumed = <A>(resume: () => Step<A>): Step<A> | Exit.Exit<never, LostRace | TaggedFailure> => {
  try {
    return resume()
  } catch (thrown) {
    return thrown === LOST_RACE ? Exit.fail(new LostRace()) : isTypedFailure(thrown) ? Exit.fail(thrown) : Exit.die(thrown)
  }
}

// ---------------------------------------------------------------------------
// The ports

/** What `runOnPorts` runs on: the ports as program rows, and their transactions. */
export interface PortRunner {
  readonly rows: ProgramRows
  readonly withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | PersistenceError, R>
}

/** The repository ports as program rows: each call an effect. */
export const portRows = (watches: WatchRepository["Type"], operations: OperationRepository["Type"]): ProgramRows => ({
  watches: {
    lockRead: (identity) => Effect.map(watches.lockRead(identity), Option.getOrUndefined),
    update: watches.update,
    insert: watches.insert,
    delete: watches.delete,
    claimAttempt: watches.claimAttempt,
    deferAttempt: watches.deferAttempt,
    lockArmTargets: watches.lockArmTargets
  },
  operations: {
    get: (key) => Effect.map(operations.get(key), Option.getOrUndefined),
    lockRead: (key) => Effect.map(operations.lockRead(key), Option.getOrUndefined),
    lockReadWithSlot: (key, documentID) => Effect.map(operations.lockReadWithSlot(key, documentID), Option.getOrUndefined),
    insert: operations.insert,
    update: operations.update,
    updateWithWatch: operations.updateWithWatch,
    markSent: (key, leaseToken, maxAttempts, now) =>
      Effect.map(operations.markSent(key, leaseToken, maxAttempts, now), Option.getOrUndefined)
  }
})

/** Drives `step` as effects: row calls run, winners are read with `readWinner`. */
const interpret = <A, W>(
  step: Step<A> | Exit.Exit<never, LostRace | TaggedFailure>,
  readWinner: ReadWinnerOf<W> | undefined
): Effect.Effect<A, W | LostRace | TaggedFailure> => {
  if (Exit.isExit(step)) return step
  if (step.done) return Exit.succeed(step.value)
  const waiting = step
  if (waiting.documentID !== undefined) {
    if (readWinner !== undefined) {
      return Effect.flatMap(readWinner(waiting.documentID), (winner) => interpret(resumed(() => waiting.resume(winner)), readWinner))
    }
    if (waiting.unread !== undefined) return interpret(resumed(() => waiting.resume(waiting.unread!.winner)), readWinner)
    return Effect.dieMessage("a transition read a winner, and the store has no winner reader")
  }
  const answer = waiting.answer instanceof Promise
    ? Effect.tryPromise({ try: () => waiting.answer as Promise<unknown>, catch: (cause) => cause as PersistenceError })
    : waiting.answer
  return Effect.flatMap(answer, (answered) => interpret(resumed(() => waiting.resume(answered as never)), readWinner))
}

/** A winner reader as the Effect runners call it. */
export type ReadWinnerOf<W> = (documentID: string) => Effect.Effect<Digest | null, W>

/**
 * Runs `transition` over the ports from `at`, each try at the fiber's clock (locked ones in a transaction); a lost try is
 * rolled back whole and the next re-reads everything.
 */
export const runOnPorts = <A, F, W = never>(
  ports: PortRunner,
  transition: Transition<A, F>,
  readWinner: ReadWinnerOf<W> | undefined,
  at: Position = START
): Effect.Effect<A, W | F | PersistenceError | ConcurrentUpdateExhausted> =>
  // What a program throws as a typed failure is `F` (see `Transition.fails`).
  loopOnLostRace<A, W | F | PersistenceError, never>(transition.method, transition.identity, at, (at) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      unlockedAt(transition, at)
        ? interpret(resumed(() => transition.unlocked!(ports.rows, now)), readWinner)
        : ports.withTransaction(interpret(resumed(() => transition.locked!(ports.rows, now)), readWinner))) as Effect.Effect<
        A | typeof LOCKED,
        W | F | PersistenceError | LostRace
      >)

/** Runs `attempt` (a whole transaction) until no write of it loses its race, with the budget and metric of every transition. */
export const retryOnLostRace = <A, E, R>(
  method: string,
  identity: string,
  attempt: Effect.Effect<A, E | LostRace, R>
): Effect.Effect<A, Exclude<E, LostRace> | ConcurrentUpdateExhausted, R> => loopOnLostRace(method, identity, START, () => attempt)

/** The effect runners' loop: `tryAt` from `at` until a try neither loses its race nor answers `LOCKED`, within the call's budget. */
const loopOnLostRace = <A, E, R>(
  method: string,
  identity: string,
  at: Position,
  tryAt: (at: Position) => Effect.Effect<A | typeof LOCKED, E | LostRace, R>
): Effect.Effect<A, Exclude<E, LostRace> | ConcurrentUpdateExhausted, R> =>
  Effect.withFiberRuntime((fiber) => {
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    const loop = (at: Position): Effect.Effect<A, Exclude<E, LostRace> | ConcurrentUpdateExhausted, R> =>
      Effect.matchCauseEffect(tryAt(at), {
        onSuccess: (value) => {
          if (value === LOCKED) return loop(lockedAfter(at))
          annotateTries(fiber, at)
          return Exit.succeed(value as A)
        },
        onFailure: (cause) => {
          const failure = Cause.failureOption(cause)
          if (Option.isNone(failure) || !(failure.value instanceof LostRace)) {
            annotateTries(fiber, at)
            return Exit.failCause(cause as Cause.Cause<Exclude<E, LostRace>>)
          }
          const next = afterLost(method, identity, at, labels)
          if (next instanceof ConcurrentUpdateExhausted) {
            annotateTries(fiber, at)
            return Exit.fail(next)
          }
          return loop(next)
        }
      })
    return loop(at)
  })

/** Puts a call's tries on its span (nothing without a tracer; see `annotateSpanOf`). */
const annotateTries = (fiber: Fiber.RuntimeFiber<unknown, unknown>, at: Position): void =>
  annotateSpanOf(fiber, { "connector-store.attempts": at.tried + 1, "connector-store.retries": at.tried })

// ---------------------------------------------------------------------------
// Synchronously, on a direct database (the Effect API)

/**
 * Runs `transition` on `db` in the caller's fiber step, each try synchronous; a winner read that does not answer at once is
 * joined to the transaction. A try that cannot run now goes on with `handOver`. Call it in an uninterruptible region.
 */
export const runNow = <A, F, W, E>(
  db: DirectDatabaseApi,
  transition: Transition<A, F>,
  readWinner: ReadWinnerOf<W> | undefined,
  context: DirectContext,
  handOver: (at: Position) => Effect.Effect<A, E>,
  at: Position = START
): Effect.Effect<A, W | E | F | PersistenceError | ConcurrentUpdateExhausted> => {
  type Out = Effect.Effect<A, W | E | F | PersistenceError | ConcurrentUpdateExhausted>
  const { restore } = context
  const ended = <X extends Out>(at: Position, out: X): X => {
    context.tried(at.tried + 1)
    return out
  }
  const lost = (at: Position): Out => {
    const next = afterLost(transition.method, transition.identity, at, context.labels)
    return next instanceof ConcurrentUpdateExhausted ? ended(at, Exit.fail(next)) : attempt(next)
  }
  const failed = (thrown: unknown, at: Position): Out =>
    thrown === LOST_RACE
      ? lost(at)
      : ended(at, isTypedFailure(thrown) ? Exit.fail(thrown as F | PersistenceError) : Exit.die(thrown))
  const rollbackThen = (transaction: DirectTransaction, then: () => Out, cause: Cause.Cause<unknown>): Out => {
    try {
      transaction.rollback()
    } catch (failedRollback) {
      return Exit.failCause(Cause.sequential(cause, Cause.die(failedRollback))) as Out
    }
    return then()
  }
  const proceed = (transaction: DirectTransaction, next: () => Step<A>, at: Position): Out => {
    let step: Step<A>
    // The read that did not answer at once: run below, joined to the transaction.
    let pending: Effect.Effect<Digest | null, W> | undefined
    try {
      step = next()
      // Winners that answer at once are used as they are: nothing to run,
      // nothing that could query inside the transaction.
      while (!step.done) {
        if (step.documentID === undefined) throw new Error(`${transition.method}: a transition waited on rows that answer at once`)
        if (readWinner === undefined) {
          if (step.unread === undefined) throw new Error(`${transition.method}: a transition read a winner without a reader`)
          step = step.resume(step.unread.winner)
          continue
        }
        const reading = readWinner(step.documentID)
        if (!Exit.isExit(reading)) {
          pending = reading
          break
        }
        const read = reading as Exit.Exit<Digest | null, W>
        if (Exit.isFailure(read)) return rollbackThen(transaction, () => ended(at, Exit.failCause(read.cause)), read.cause)
        step = step.resume(read.value)
      }
    } catch (thrown) {
      return rollbackThen(transaction, () => failed(thrown, at), Cause.die(thrown))
    }
    if (step.done) {
      try {
        transaction.commit()
      } catch (thrown) {
        return failed(thrown, at)
      }
      return ended(at, Exit.succeed(step.value))
    }
    const waiting = step as AwaitingWinner<A>
    // The read runs on this fiber: at the call's deadline its transaction is given up (see `PendingWait`).
    const wait = context.pendingWait(() => transaction.rollback())
    /** The call's failure when its deadline passed during the read (its transaction already given up). */
    const expired = (): Out | undefined => {
      wait?.leave()
      return wait?.error === undefined ? undefined : ended(at, Exit.fail(wait.error as PersistenceError))
    }
    return Effect.matchCauseEffect(transaction.joined(restore(pending!)), {
      onFailure: (cause): Out => expired() ?? rollbackThen(transaction, () => ended(at, Exit.failCause(cause)), cause),
      onSuccess: (winner): Out => expired() ?? proceed(transaction, () => waiting.resume(winner), at)
    })
  }
  const attempt = (at: Position): Out => {
    const now = context.now()
    if (now === undefined) return context.bounded(restore(handOver(at)))
    if (unlockedAt(transition, at)) {
      if (!db.free()) return context.bounded(restore(handOver(at)))
      let step: Step<A | typeof LOCKED>
      try {
        step = transition.unlocked!(db, now)
      } catch (thrown) {
        return thrown === LOCKED_ELSEWHERE ? context.bounded(restore(handOver(at))) : failed(thrown, at)
      }
      if (!step.done) return Exit.die(new Error(`${transition.method}: an unlocked try waited on rows that answer at once`))
      return step.value === LOCKED ? attempt(lockedAfter(at)) : ended(at, Exit.succeed(step.value))
    }
    let transaction: DirectTransaction | undefined
    try {
      transaction = db.begin()
    } catch (thrown) {
      return ended(at, thrown instanceof PersistenceError ? Exit.fail(thrown) : Exit.die(thrown))
    }
    if (transaction === undefined) return context.bounded(restore(handOver(at)))
    const open = transaction
    return proceed(open, () => transition.locked!(db, now), at)
  }
  return attempt(at)
}

// ---------------------------------------------------------------------------
// With no fiber, on a database that answers at once or with Promises (the Promise API)

/** What a lane try answers when the call must go on on the ports: where it stands. */
export class HandOver {
  constructor(readonly at: Position) {}
}

/** A lane call's answer: at once, later, or handed over. */
export type LaneAnswer<A> = A | HandOver | Promise<A | HandOver>

/** What the lane runs with. */
export interface LaneRunner {
  readonly db: DirectDatabaseOf<boolean>
  /** The winner of `documentID` read inside `transaction` (a value, or a Promise of one); throws or rejects with `WinnerReadFailed`. */
  readonly readWinner: ((documentID: string, transaction: DirectTransactionOf<boolean>) => Digest | null | Promise<Digest | null>) | undefined
  /** The store's clock, read once per try: a reading that is not a time hands the call over (the ports refuse it). */
  readonly now: () => Millis | undefined
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
}

/**
 * Runs `transition` on the lane's database with no fiber (one synchronous step, or a Promise per statement); throws the typed
 * failure, answers `HandOver` when a try cannot run now, and once `call` ran out stops at its next step.
 */
export const runOnLane = <A, F>(
  lane: LaneRunner,
  transition: Transition<A, F>,
  at: Position = START,
  tried?: (attempts: number) => void,
  call?: LaneCall
): LaneAnswer<A> => {
  const { db } = lane
  const lost = (at: Position): LaneAnswer<A> => {
    const next = afterLost(transition.method, transition.identity, at, lane.labels)
    if (next instanceof ConcurrentUpdateExhausted) {
      tried?.(at.tried + 1)
      throw next
    }
    return attempt(next)
  }
  /** The call's answer at `at`: the span told its tries. */
  const answered = <X>(at: Position, value: X): X => {
    tried?.(at.tried + 1)
    return value
  }
  const attempt = (at: Position): LaneAnswer<A> => {
    if (call?.expired === true) throw CALL_ENDED
    const now = lane.now()
    if (now === undefined) return new HandOver(at)
    if (unlockedAt(transition, at)) {
      if (!db.free()) return new HandOver(at)
      const settle = (value: A | typeof LOCKED): LaneAnswer<A> => value === LOCKED ? attempt(lockedAfter(at)) : answered(at, value)
      const retried = (thrown: unknown): LaneAnswer<A> => {
        if (thrown === LOCKED_ELSEWHERE) return new HandOver(at)
        if (thrown !== LOST_RACE) throw answered(at, thrown)
        return lost(at)
      }
      let first: A | typeof LOCKED | Promise<A | typeof LOCKED>
      try {
        first = untransacted(call, () => transition.unlocked!(db, now))
      } catch (thrown) {
        return retried(thrown)
      }
      return first instanceof Promise ? first.then(settle, retried) : settle(first)
    }
    const begun = db.begin()
    if (!(begun instanceof Promise)) return begun === undefined ? new HandOver(at) : inTransaction(begun, now, at)
    return begun.then((open) => open === undefined ? new HandOver(at) : inTransaction(open, lane.now(), at))
  }
  const inTransaction = (open: DirectTransactionOf<boolean>, now: Millis | undefined, at: Position): LaneAnswer<A> => {
    let over = false
    const rollback = (): void | Promise<void> => {
      if (over) return
      over = true
      return open.rollback()
    }
    // A call that runs out (or whose store closes) gives its transaction up at once: its lock and connection are freed.
    if (call !== undefined) {
      call.onEnd = () => {
        if (open.abandon !== undefined && !over) {
          over = true
          return open.abandon()
        }
        try {
          const rolledBack = rollback()
          return rolledBack instanceof Promise ? rolledBack.catch(ignore) : undefined
        } catch {
          // The transaction is given up; a failed rollback leaves nothing committed either.
          return undefined
        }
      }
    }
    const recover = (thrown: unknown): LaneAnswer<A> => {
      const rolledBack = rollback()
      return rolledBack instanceof Promise ? rolledBack.then(() => retry(thrown)) : retry(thrown)
    }
    const retry = (thrown: unknown): LaneAnswer<A> => {
      if (thrown !== LOST_RACE) throw answered(at, thrown)
      return lost(at)
    }
    /** `resume`d, unless the call ended meanwhile: its transaction is given up, and no statement may follow it. */
    const goOn = (resume: () => Step<A>): A | Promise<A> => {
      if (over || call?.expired === true) throw CALL_ENDED
      return finish(resume())
    }
    const finish = (step: Step<A>): A | Promise<A> => {
      while (!step.done) {
        const waiting = step
        if (waiting.documentID === undefined) {
          if (!(waiting.answer instanceof Promise)) throw new Error(`${transition.method}: a lane transition waited on an effect`)
          return waiting.answer.then((answered) => goOn(() => waiting.resume(answered as never)))
        }
        if (lane.readWinner === undefined) {
          if (waiting.unread === undefined) throw new Error(`${transition.method}: a transition read a winner without a reader`)
          step = waiting.resume(waiting.unread.winner)
          continue
        }
        const winner = lane.readWinner(waiting.documentID, open)
        if (winner instanceof Promise) return winner.then((read) => goOn(() => waiting.resume(read)))
        step = waiting.resume(winner)
      }
      const value = step.value
      over = true
      const committed = open.commit()
      return committed instanceof Promise ? committed.then(() => answered(at, value)) : answered(at, value)
    }
    if (now === undefined) {
      const rolledBack = rollback()
      return rolledBack instanceof Promise ? rolledBack.then(() => new HandOver(at)) : new HandOver(at)
    }
    let result: A | Promise<A>
    try {
      result = goOn(() => transition.locked!(open.rows ?? db, now))
    } catch (thrown) {
      return recover(thrown)
    }
    return result instanceof Promise ? result.catch(recover) : result
  }
  return attempt(at)
}

const ignore = (): void => undefined

/** What a lane call that ran out throws to stop (its caller was answered already). */
const CALL_ENDED: unique symbol = Symbol("the call ended")

/** A step outside any transaction (an unlocked try), its statements sent on behalf of `call` and none once it ended. */
const untransacted = <A>(call: LaneCall | undefined, next: () => Step<A>): A | Promise<A> => {
  if (call?.expired === true) throw CALL_ENDED
  const step = onBehalfOf(call, next)
  if (step.done) return step.value
  const waiting = step
  if (waiting.documentID !== undefined) throw new Error("a transition read a winner outside a transaction")
  if (!(waiting.answer instanceof Promise)) throw new Error("a lane transition waited on an effect")
  return waiting.answer.then((answered) => untransacted(call, () => waiting.resume(answered as never)))
}

// ---------------------------------------------------------------------------

const lostRaceByMethod = new Map<string, ReturnType<typeof storeSeries>>()

/** The lost-race counter of `method`, built once per method (see `storeSeries`). */
const lostRaceSeries = (method: string) => {
  let series = lostRaceByMethod.get(method)
  if (series === undefined) {
    series = storeSeries("lostRaceRetries", [["method", method]])
    lostRaceByMethod.set(method, series)
  }
  return series
}

/** Counts one lost try of `method` in `StoreMetrics.lostRaceRetries`, outside a fiber, with the runtime's metric `labels`. */
export const countLostRaceNow = (method: string, labels: ReadonlyArray<MetricLabel.MetricLabel>): void =>
  lostRaceSeries(method).unsafeUpdate(1, labels)
