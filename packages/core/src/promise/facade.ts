import { Cause, type Clock, Effect, Exit, type ManagedRuntime, Option } from "effect"
import { StoreClosed } from "../errors.js"
import type { CollectParams } from "../operation/retention.js"
import type { ConnectorOperation } from "../operation/ConnectorOperation.js"
import type { StoreSnapshot } from "../ports/StoreSnapshot.js"
import { ConnectorStore, type StorePorts } from "../service/ConnectorStore.js"
import type { ArmWatchOptions, ClaimWatchOptions, ResumeAuthParams } from "../service/watches.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type {
  ArmOutcome,
  ArmReason,
  DeferInput,
  VerificationInput,
  VerificationOutcome
} from "../watch/transitions.js"
import { clockFrom } from "./clock.js"
import { fromPromiseReaders, type PromiseWinnerReaders } from "./readers.js"
import { promiseOperationMethods, type PromiseOperationMethods } from "./operations.js"
import { promiseOperatorMethods, type PromiseOperatorMethods } from "./operator.js"
import { promiseRelistMethods, type PromiseRelistMethods } from "./relist.js"
import { promiseSyncStateMethods, type PromiseSyncStateMethods } from "./syncState.js"

/**
 * The store as Promises, with the seed's method names, argument shapes and
 * outcome strings, for callers that do not use Effect. Every rejection of a
 * store method is one of the store's tagged errors (`InvalidInput`,
 * `PersistenceError`, `StoreClosed`, …): `_tag` tells which and `method`
 * names the method called.
 *
 * `H` is the adapter's transaction handle handed to winner readers.
 */
export interface PromiseConnectorStore<H> extends PromiseWatchMethods<H>, PromiseSyncStateMethods, PromiseRelistMethods,
  PromiseOperationMethods, PromiseOperatorMethods
{
  /**
   * Runs an Effect against the store's own runtime (for mixing the two APIs):
   * the `ConnectorStore` service and the adapter's ports are in its context.
   */
  runEffect<A, E>(effect: Effect.Effect<A, E, StoreContext>): Promise<A>
  /**
   * Releases the store's connections. Every call afterwards rejects with
   * `StoreClosed` naming the method; closing again does nothing.
   */
  close(): Promise<void>
}

/** Runs one call of the Effect API as a Promise (rejecting with the tagged error). */
export type PromiseCall = <A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) => Promise<A>

/** The watch, due-sweep and retention methods of the Promise API. */
export interface PromiseWatchMethods<H> {
  getWatch(identity: WatchIdentity): Promise<ProjectionWatch | null>
  getWatchByDocument(documentID: string): Promise<ProjectionWatch | null>
  listWatchesByDocuments(documentIDs: ReadonlyArray<string>): Promise<ReadonlyArray<ProjectionWatch>>
  armWatch(identity: WatchIdentity, reason: ArmReason, options: ArmWatchOptions): Promise<ArmOutcome>
  claimWatchAttempt(identity: WatchIdentity, options: ClaimWatchOptions): Promise<boolean>
  deferWatch(identity: WatchIdentity, options: DeferInput): Promise<boolean>
  recordVerification(identity: WatchIdentity, input: VerificationInput): Promise<VerificationOutcome>
  resumeOfflineDeferred(now: Millis): Promise<void>
  resumeAuthDeferred(params: ResumeAuthParams): Promise<void>
  /**
   * The due sweep (see the Effect API's `listDueOperations`). Winners are
   * read with `readers` when given, else with the readers the store was
   * opened with.
   */
  listDueOperations(
    now: Millis,
    readers?: PromiseWinnerReaders<H>
  ): Promise<{ operations: ReadonlyArray<ConnectorOperation>; watches: ReadonlyArray<ProjectionWatch> }>
  collectFinishedOperations(params: CollectParams): Promise<number>
}

const orNull = <A>(option: Option.Option<A>): A | null => Option.getOrNull(option)

/** The watch, due-sweep and retention methods over `call`. */
export const promiseWatchMethods = <H>(call: PromiseCall, handle: Effect.Effect<H>): PromiseWatchMethods<H> => ({
  getWatch: (identity) => call((s) => Effect.map(s.getWatch(identity), orNull)),
  getWatchByDocument: (documentID) => call((s) => Effect.map(s.getWatchByDocument(documentID), orNull)),
  listWatchesByDocuments: (documentIDs) => call((s) => s.listWatchesByDocuments(documentIDs)),
  armWatch: (identity, reason, options) => call((s) => s.armWatch(identity, reason, options)),
  claimWatchAttempt: (identity, options) => call((s) => s.claimWatchAttempt(identity, options)),
  deferWatch: (identity, options) => call((s) => s.deferWatch(identity, options)),
  recordVerification: (identity, input) => call((s) => s.recordVerification(identity, input)),
  resumeOfflineDeferred: (now) => call((s) => s.resumeOfflineDeferred(now)),
  resumeAuthDeferred: (params) => call((s) => s.resumeAuthDeferred(params)),
  listDueOperations: (now, readers) =>
    call((s) =>
      s.listDueOperations(
        now,
        // A non-object is handed on as it is, for the boundary to refuse; absent, the store's own readers.
        readers === undefined
          ? undefined
          : typeof readers === "object" && readers !== null
          ? fromPromiseReaders(readers, handle)
          : readers as never
      )
    ),
  collectFinishedOperations: (params) => call((s) => s.collectFinishedOperations(params))
})

/** How a Promise store is put together by an adapter. */
export interface PromiseStoreParts<H> {
  readonly runtime: ManagedRuntime.ManagedRuntime<StoreContext, unknown>
  /** Yields the adapter's handle on the current transaction, for winner readers. */
  readonly handle: Effect.Effect<H>
  /** An injected clock; the system clock when absent. */
  readonly now?: (() => number) | undefined
}

/** What an opened store's runtime provides: the service, every port, and the snapshot. */
export type StoreContext = ConnectorStore | StorePorts | StoreSnapshot

/** Builds the Promise facade over a store runtime. */
export const makePromiseStore = <H>(parts: PromiseStoreParts<H>): PromiseConnectorStore<H> => {
  const clock: Clock.Clock | undefined = parts.now === undefined ? undefined : clockFrom(parts.now)
  const run = async <A, E>(effect: Effect.Effect<A, E, ConnectorStore>): Promise<A> => {
    const exit = await parts.runtime.runPromiseExit(clock === undefined ? effect : Effect.withClock(effect, clock))
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }
  const call: PromiseCall = (use) => run(Effect.flatMap(ConnectorStore, use))
  let closed = false
  const store: PromiseConnectorStore<H> = {
    ...promiseWatchMethods(call, parts.handle),
    ...promiseSyncStateMethods(call),
    ...promiseRelistMethods(call),
    ...promiseOperationMethods(call),
    ...promiseOperatorMethods(call),
    runEffect: run,
    close: () => {
      if (closed) return Promise.resolve()
      closed = true
      return parts.runtime.dispose()
    }
  }
  return closedAware(store, () => closed)
}

/** `store` with every method but `close` rejecting with `StoreClosed` once `isClosed()`. */
const closedAware = <S extends object>(store: S, isClosed: () => boolean): S => {
  const out: Record<string, unknown> = {}
  for (const [method, value] of Object.entries(store)) {
    out[method] = typeof value === "function" && method !== "close"
      ? (...args: ReadonlyArray<unknown>) =>
        isClosed() ? Promise.reject(new StoreClosed({ method })) : (value as (...a: ReadonlyArray<unknown>) => unknown)(...args)
      : value
  }
  return out as S
}
