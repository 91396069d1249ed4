import {
  type ConnectorOperation,
  OperationRepository,
  type PersistenceError,
  type ProjectionWatch,
  StoreSnapshot,
  type WatchIdentity,
  WatchRepository,
  type WinnerReaders
} from "@connector-store/core"
import { Cause, Effect, Exit, Option, TestClock } from "effect"
import { expect } from "vitest"
import type { AdapterUnderTest, StoreServices } from "../stores.js"

/** Runs `body` against a fresh, empty store of `adapter` whose winners are read by `readers`. */
export const onFreshStore = <A, E>(
  adapter: AdapterUnderTest,
  readers: WinnerReaders,
  body: Effect.Effect<A, E, StoreServices>
): Effect.Effect<A, E | PersistenceError> => Effect.provide(body, adapter.layer(readers))

/** Sets the store's clock (the test clock of `it.effect`) to `now`. */
export const at = (now: number): Effect.Effect<void> => TestClock.setTime(now)

/** Inserts watch rows through the repository port; dies if one is refused. */
export const seedWatches = (...rows: ReadonlyArray<ProjectionWatch>) =>
  Effect.flatMap(WatchRepository, (repo) =>
    Effect.forEach(rows, (row) =>
      Effect.flatMap(repo.insert(row), (inserted) =>
        inserted ? Effect.void : Effect.dieMessage(`seed watch refused: ${JSON.stringify(row)}`)), { discard: true }))

/** Inserts operation rows through the repository port; dies if one is refused. */
export const seedOperations = (...rows: ReadonlyArray<ConnectorOperation>) =>
  Effect.flatMap(OperationRepository, (repo) =>
    Effect.forEach(rows, (row) =>
      Effect.flatMap(repo.insert(row), (inserted) =>
        inserted ? Effect.void : Effect.dieMessage(`seed operation refused: ${JSON.stringify(row)}`)), { discard: true }))

/** The stored watch of `identity`; dies when there is none. */
export const storedWatch = (identity: WatchIdentity): Effect.Effect<ProjectionWatch, PersistenceError, WatchRepository> =>
  Effect.flatMap(WatchRepository, (repo) =>
    Effect.flatMap(repo.get(identity), Option.match({
      onNone: () => Effect.dieMessage(`no watch stored for ${JSON.stringify(identity)}`),
      onSome: Effect.succeed
    })))

/** The stored operation of a key, if any. */
export const storedOperation = (key: { readonly callerDID: string; readonly operationID: string }) =>
  Effect.flatMap(OperationRepository, (repo) => Effect.map(repo.get(key), Option.getOrUndefined))

/** Every row of every table, for proving that a call changed nothing. */
export const snapshot = Effect.flatMap(StoreSnapshot, (store) => store.snapshot)

/**
 * Runs `effect` and asserts that no table changed, whether it succeeded or
 * failed; returns its exit for assertions on the outcome.
 */
export const changesNothing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const before = yield* snapshot
    const exit = yield* Effect.exit(effect)
    expect(yield* snapshot).toEqual(before)
    return exit
  })

/** Runs `effect`, asserts that no table changed, and returns the error it failed with. */
export const failsChangingNothing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(changesNothing(effect), (exit) =>
    Exit.isFailure(exit) && Cause.isFailType(exit.cause)
      ? Effect.succeed(exit.cause.error)
      : Effect.dieMessage(
        Exit.isSuccess(exit)
          ? `expected a typed failure, got success ${JSON.stringify(exit.value)}`
          : `expected a typed failure, got ${Cause.pretty(exit.cause)}`
      ))

/** Runs `effect`, asserts that no table changed, and returns what it succeeded with. */
export const succeedsChangingNothing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(changesNothing(effect), (exit) =>
    Exit.isSuccess(exit) ? Effect.succeed(exit.value) : Effect.dieMessage(`expected success, got ${Cause.pretty(exit.cause)}`))
