import { Effect, Exit, Option } from "effect"
import type { ConcurrentUpdateExhausted, PersistenceError } from "../errors.js"
import { DirectDatabase, directFor } from "../ports/DirectDatabase.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { type DirectContext, directContextOf } from "./directContext.js"
import { isTypedFailure, type Transition } from "./program.js"
import { type PortRunner, portRows, type Position, type ReadWinnerOf, runNow, runOnPorts, START } from "./run.js"

const HOT: unique symbol = Symbol.for("@connector-store/core/hot")

/**
 * A method that runs one transition: how its arguments become the transition (`prepare`, once per call), how the Effect API
 * runs it, and how it goes on on the ports after a hand-over.
 */
export interface HotSpec<Args extends ReadonlyArray<unknown>, A, E> {
  /** The call's transition, or the typed failure its arguments meet: the one place a call's input is checked. */
  readonly prepare: (...args: Args) => Transition<A, unknown> | E
  /** Runs a prepared transition for the Effect API (in an uninterruptible region; see `runNow`). */
  readonly run: (transition: Transition<A, unknown>, context: DirectContext) => Effect.Effect<A, E>
  /** Runs a prepared transition on the ports from `at` (where another runner handed it over). */
  readonly ports: (transition: Transition<A, unknown>, at: Position) => Effect.Effect<A, E>
}

/** A method with its `HotSpec`. */
export type HotMethod<Args extends ReadonlyArray<unknown>, A, E> = ((...args: Args) => Effect.Effect<A, E>) & {
  readonly [HOT]: HotSpec<Args, A, E>
}

/** The `HotSpec` of `method`, when it is a hot method (or an instrumented one). */
export const hotSpecOf = (method: unknown): HotSpec<ReadonlyArray<never>, unknown, unknown> | undefined =>
  typeof method === "function" ? (method as { readonly [HOT]?: HotSpec<ReadonlyArray<never>, unknown, unknown> })[HOT] : undefined

/** `method` carrying `spec`, for `hotSpecOf`. */
export const withHotSpec = <F extends object>(method: F, spec: HotSpec<ReadonlyArray<never>, unknown, unknown> | undefined): F =>
  spec === undefined ? method : Object.assign(method, { [HOT]: spec })

/** A prepared call's failure, told from its transition. */
export const isPrepareFailure = <A, F, E>(prepared: Transition<A, F> | E): prepared is E => isTypedFailure(prepared)

/** The runners of a store's transitions, built once: `hot` makes a hot method of a `prepare`, `onPorts` runs on the ports. */
export const makeRunners = Effect.gen(function*() {
  const watches = yield* WatchRepository
  const operations = yield* OperationRepository
  const { withTransaction } = yield* Transactor
  const direct = directFor(yield* Effect.serviceOption(DirectDatabase), watches, operations)
  const ports: PortRunner = { rows: portRows(watches, operations), withTransaction }

  /** Runs `transition` on the ports, from the start or from `at`. */
  const onPorts = <A, F, W = never>(transition: Transition<A, F>, readWinner?: ReadWinnerOf<W>, at: Position = START) =>
    runOnPorts(ports, transition, readWinner, at)

  /** A hot method: `prepare` builds the transition, run on the direct database when there is one (the ports once it is busy). */
  const hot = <Args extends ReadonlyArray<unknown>, A, F, E, W = never>(
    prepare: (...args: Args) => Transition<A, F> | E,
    readWinner?: ReadWinnerOf<W>
  ): HotMethod<Args, A, E | W | F | PersistenceError | ConcurrentUpdateExhausted> => {
    type All = E | W | F | PersistenceError | ConcurrentUpdateExhausted
    const spec = {
      prepare,
      ports: (transition: Transition<A, F>, at: Position) => onPorts(transition, readWinner, at),
      run: direct === undefined
        ? (transition: Transition<A, F>, context: DirectContext) => context.bounded(context.restore(onPorts(transition, readWinner)))
        : (transition: Transition<A, F>, context: DirectContext) =>
          runNow(direct, transition, readWinner, context, (at) => onPorts(transition, readWinner, at))
    } as HotSpec<Args, A, All>
    const method = (...args: Args): Effect.Effect<A, All> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.withFiberRuntime((fiber) => {
          const prepared = prepare(...args)
          return isPrepareFailure(prepared) ? Exit.fail(prepared) : spec.run(prepared, directContextOf(fiber, restore))
        })
      )
    return Object.assign(method, { [HOT]: spec })
  }

  return { hot, onPorts, direct: Option.fromNullable(direct) }
})
