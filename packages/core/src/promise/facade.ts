import { Cause, Clock, Context, DefaultServices, Effect, Exit, FiberRef, FiberRefs, identity, type ManagedRuntime, Option, Runtime } from "effect"
import { DirectDatabase, type DirectDatabaseOf, directFor, type DirectTransactionOf, LaneDatabase } from "../ports/DirectDatabase.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { type CallGate, gateOf, insideCallbacks, isInsideCallbackOf, makeCallGate } from "../service/gate.js"
import { callBoundaryIn, type CallBoundary, CLOSE_MARGIN_MS, DEFAULT_CLOSE_TIMEOUT_MS, endedWith, type LaneCall } from "../service/bound.js"
import { hotSpecOf } from "../service/hot.js"
import type { Transition } from "../service/program.js"
import type { Position } from "../service/run.js"
import { nativeTracer } from "../service/tracing.js"
import { type DirectLane, makeDirectLane } from "./lane.js"
import { ReentrantCall, StoreClosed } from "../errors.js"
import type { StoreSnapshot } from "../ports/StoreSnapshot.js"
import { ConnectorStore, type ConnectorStoreApi, type StorePorts } from "../service/ConnectorStore.js"
import { clockFrom } from "../clock.js"
import { promiseAnswer, type PromiseCall } from "./call.js"
import { promiseAdaptedMethods, type PromiseAdaptedMethods } from "./adapted.js"
import { type PromiseMethods, promiseMethods } from "./methods.js"
import { promiseCallbacksNow, promiseReadersOf, type PromiseWinnerReaders } from "./readers.js"

/**
 * The store as Promises, for callers that do not use Effect: each method takes and answers what the Effect method does (an
 * `Option` as its value or `null`) and rejects with its tagged errors, or with `StoreClosed` or `ReentrantCall`. `H` is the
 * adapter's transaction handle winner readers get.
 */
export interface PromiseConnectorStore<H>
  extends Omit<PromiseMethods<ConnectorStoreApi>, keyof PromiseAdaptedMethods<H>>, PromiseAdaptedMethods<H>
{
  /** Runs an Effect on the store's own runtime, with the `ConnectorStore` service and the ports in its context. */
  runEffect<A, E>(effect: Effect.Effect<A, E, StoreContext>): Promise<A>
  /**
   * Closes the store: new calls reject with `StoreClosed`, running ones get up to `closeTimeoutMs` (default 5 s) and are then
   * ended, and the connections are released; resolves within `closeTimeoutMs` plus a second. A pending `awaitWork` rejects at
   * once.
   */
  close(): Promise<void>
}

/** How a Promise store is put together by an adapter. */
export interface PromiseStoreParts<H> {
  readonly runtime: ManagedRuntime.ManagedRuntime<StoreContext, unknown>
  /** Yields the adapter's handle on the current transaction, for winner readers. */
  readonly handle: Effect.Effect<H>
  /** An injected clock; the system clock when absent. */
  readonly now?: (() => number) | undefined
  /** The user's winner readers as given; with them and a `DirectDatabase` or `LaneDatabase`, the hot methods run on the direct lane. */
  readonly readers?: PromiseWinnerReaders<H> | undefined
  /** The handle readers get inside a direct transaction; by default `handle` run joined to it. */
  readonly directHandle?: ((transaction: DirectTransactionOf<boolean>) => H) | undefined
}

/** What an opened store's runtime provides: the service, every port, and the snapshot. */
export type StoreContext = ConnectorStore | StorePorts | StoreSnapshot

/** The store's runtime once built: every call runs on it, with the service at hand. */
interface Ready {
  readonly runtime: Runtime.Runtime<StoreContext>
  readonly store: ConnectorStore["Type"]
  /** The hot methods on the direct lane by name (empty without a direct database and readers). */
  readonly onLane: ReadonlyMap<string, (args: ReadonlyArray<never>) => Promise<unknown>>
  /** What the store's callbacks run inside of (its gate): a call from inside one is refused. */
  readonly callbacksOf: object
}

/**
 * Runs `effect` on `runtime` as a Promise of `answer(value)`, settled at once when the fiber finishes on the caller's stack;
 * rejects with `Cause.squash`.
 */
const runOn = <A, E, R, B = A>(
  runtime: Runtime.Runtime<R>,
  effect: Effect.Effect<A, E, R>,
  answer: (value: A) => B = identity as (value: A) => B
): Promise<B> => {
  const fiber = Runtime.runFork(runtime)(effect)
  const exit = fiber.unsafePoll()
  if (exit !== null) return settled(exit, answer)
  return new Promise<B>((resolve, reject) => {
    fiber.addObserver((exit) => Exit.isSuccess(exit) ? resolve(answer(exit.value)) : reject(Cause.squash(exit.cause)))
  })
}

const settled = <A, E, B = A>(exit: Exit.Exit<A, E>, answer: (value: A) => B = identity as (value: A) => B): Promise<B> =>
  Exit.isSuccess(exit) ? Promise.resolve(answer(exit.value)) : Promise.reject(Cause.squash(exit.cause))

/** Builds the Promise facade over a store runtime, built once (on the first call unless already) with the injected clock set in it. */
export const makePromiseStore = <H>(parts: PromiseStoreParts<H>): PromiseConnectorStore<H> => {
  const clock: Clock.Clock | undefined = parts.now === undefined ? undefined : clockFrom(parts.now)
  let ready: Ready | Exit.Exit<never, unknown> | undefined
  let building: Promise<Ready | Exit.Exit<never, unknown>> | undefined
  const prepare = (exit: Exit.Exit<Runtime.Runtime<StoreContext>, unknown>): Ready | Exit.Exit<never, unknown> => {
    if (Exit.isFailure(exit)) return exit as Exit.Exit<never, unknown>
    const runtime = clock === undefined ? exit.value : Runtime.setFiberRef(
      exit.value,
      DefaultServices.currentServices,
      Context.add(FiberRefs.getOrDefault(exit.value.fiberRefs, DefaultServices.currentServices), Clock.Clock, clock)
    )
    const store = Context.get(runtime.context, ConnectorStore)
    const callbacksOf = gateOf(store) ?? store
    return { runtime, store, callbacksOf, onLane: laneMethods(runtime, store, callbacksOf) }
  }
  /** Each hot method of `store` as the lane runs it, handed to the ports on `runtime` when the lane cannot go on. */
  const laneMethods = (runtime: Runtime.Runtime<StoreContext>, store: ConnectorStore["Type"], callbacksOf: object): Ready["onLane"] => {
    const methods = new Map<string, (args: ReadonlyArray<never>) => Promise<unknown>>()
    const lane = laneOn(runtime, callbacksOf)
    if (lane === undefined) return methods
    for (const [method, value] of Object.entries(store)) {
      const hot = hotSpecOf(value)
      if (hot === undefined) continue
      const handOver = (transition: Transition<unknown, unknown>, at: Position, call: LaneCall) =>
        runOn(runtime, endedWith(call, hot.ports(transition, at)))
      methods.set(method, lane.method(method, hot, handOver))
    }
    return methods
  }
  const laneOn = (runtime: Runtime.Runtime<StoreContext>, callbacksOf: object): DirectLane | undefined => {
    const context = runtime.context as Context.Context<StoreContext | DirectDatabase | LaneDatabase>
    const watches = Context.get(context, WatchRepository)
    const operations = Context.get(context, OperationRepository)
    const direct: DirectDatabaseOf<boolean> | undefined = directFor(Context.getOption(context, DirectDatabase), watches, operations) ??
      directFor(Context.getOption(context, LaneDatabase), watches, operations)
    if (direct === undefined || parts.readers === undefined) return undefined
    const handle = parts.handle
    const tracer = Runtime.runSync(runtime)(Effect.tracer)
    return makeDirectLane({
      db: direct,
      tracer: tracer === nativeTracer ? undefined : tracer,
      readers: promiseReadersOf(parts.readers, callbacksOf),
      handle: parts.directHandle ?? ((transaction) => Effect.runSync(transaction.joined(handle))),
      now: parts.now ?? Date.now,
      labels: FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentMetricLabels),
      boundary: callBoundaryIn(runtime.context)
    })
  }
  /** The runtime built on the spot when its layers build synchronously (the memory adapter's do); `undefined` when they do not. */
  const builtAtOnce = (): Ready | Exit.Exit<never, unknown> | undefined => {
    const exit = Effect.runSyncExit(parts.runtime.runtimeEffect)
    if (Exit.isFailure(exit) && Option.exists(Cause.dieOption(exit.cause), Runtime.isAsyncFiberException)) return undefined
    return prepare(exit)
  }
  /** The built runtime; a failure to build it rejects every call, as running on it would. */
  const whenReady = <A>(use: (ready: Ready) => Promise<A>): Promise<A> => {
    if (ready === undefined && building === undefined) ready = builtAtOnce()
    if (ready !== undefined) return "runtime" in ready ? use(ready) : settled(ready)
    building ??= Effect.runPromiseExit(parts.runtime.runtimeEffect).then((exit) => ready = prepare(exit))
    return building.then((built) => "runtime" in built ? use(built) : settled(built))
  }
  const run = <A, E>(effect: Effect.Effect<A, E, StoreContext>): Promise<A> =>
    whenReady((ready) => runOn(ready.runtime, insideCallbacksNow(effect)))
  const call: PromiseCall = (use) =>
    whenReady((ready) => {
      let effect: Effect.Effect<unknown, unknown>
      try {
        effect = use(ready.store)
      } catch (defect) {
        return Promise.reject(defect)
      }
      return runOn(ready.runtime, insideCallbacksNow(effect), promiseAnswer) as Promise<never>
    })
  /** A call from inside one of this store's own callbacks, refused; `undefined` for any other. */
  const reentrant = (method: string): ReentrantCall | undefined => {
    const inside = promiseCallbacksNow()
    if (inside === undefined || ready === undefined || !("runtime" in ready)) return undefined
    return method !== "runEffect" && isInsideCallbackOf(inside, ready.callbacksOf) ? new ReentrantCall({ method }) : undefined
  }
  const gate = makeCallGate()
  let closing: Promise<void> | undefined
  const viaEffect = { ...promiseMethods(call), ...promiseAdaptedMethods(call, parts.handle) }
  // A hot method runs on the lane, when the store has one; its Promise form takes and answers what its Effect form does.
  const viaLane: Record<string, unknown> = {}
  for (const [method, slow] of Object.entries(viaEffect) as Array<[string, (...args: ReadonlyArray<unknown>) => Promise<unknown>]>) {
    viaLane[method] = (...args: ReadonlyArray<never>) =>
      whenReady((ready) => {
        const onLane = ready.onLane.get(method)
        return onLane === undefined ? slow(...args) : onLane(args)
      })
  }
  const store: PromiseConnectorStore<H> = {
    ...viaEffect,
    ...viaLane as typeof viaEffect,
    runEffect: run,
    close: () => closing ??= closeWithin(gate, parts.runtime, ready !== undefined && "runtime" in ready ? callBoundaryIn(ready.runtime.context) : undefined)
  }
  return gated(store, gate, reentrant)
}

/** `effect` run inside the callbacks the current async context is inside of, so the stores it calls can refuse a call back. */
const insideCallbacksNow = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const inside = promiseCallbacksNow()
  return inside === undefined ? effect : Effect.locally(effect, insideCallbacks, inside)
}

/**
 * Shuts `gate`, waits `closeTimeoutMs` at most for the calls in flight (ending the rest with `StoreClosed`), then disposes of
 * the runtime, all within `closeTimeoutMs` plus `CLOSE_MARGIN_MS`.
 */
const closeWithin = async (
  gate: CallGate,
  runtime: ManagedRuntime.ManagedRuntime<StoreContext, unknown>,
  boundary: CallBoundary | undefined
): Promise<void> => {
  const deadline = performance.now() + (boundary?.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS) + CLOSE_MARGIN_MS
  const drained = gate.shut()
  if (!await settledWithin(drained, deadline - CLOSE_MARGIN_MS - performance.now())) {
    boundary?.endAll()
    await settledWithin(drained, CLOSE_MARGIN_MS / 4)
  }
  await settledWithin(runtime.dispose(), deadline - performance.now())
}

/** Whether `promise` settled within `ms` (its outcome is not looked at). */
const settledWithin = (promise: Promise<unknown>, ms: number): Promise<boolean> =>
  new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.max(0, ms))
    const settled = () => {
      clearTimeout(timer)
      resolve(true)
    }
    promise.then(settled, settled)
  })

/** `store` with every method but `close` going through `gate`; a reentrant call rejects at once and never enters. */
const gated = <S extends object>(store: S, gate: CallGate, reentrant: (method: string) => ReentrantCall | undefined): S => {
  const out: Record<string, unknown> = {}
  const leave = <A>(value: A): A => {
    gate.leave()
    return value
  }
  const leaveRejected = (error: unknown): never => {
    gate.leave()
    throw error
  }
  for (const [method, value] of Object.entries(store)) {
    const call = value as (...args: ReadonlyArray<unknown>) => Promise<unknown>
    out[method] = typeof value === "function" && method === "awaitWork"
      // A wait holds nothing and ends when the store closes: admitted, never waited for.
      ? (...args: ReadonlyArray<unknown>) => {
        if (gate.isShut()) return Promise.reject(new StoreClosed({ method }))
        const refused = reentrant(method)
        return refused !== undefined ? Promise.reject(refused) : call(...args)
      }
      : typeof value === "function" && method !== "close"
      ? (...args: ReadonlyArray<unknown>) => {
        if (!gate.enter()) return Promise.reject(new StoreClosed({ method }))
        const refused = reentrant(method)
        if (refused !== undefined) {
          gate.leave()
          return Promise.reject(refused)
        }
        let settled: Promise<unknown>
        try {
          settled = call(...args)
        } catch (defect) {
          gate.leave()
          return Promise.reject(defect)
        }
        return settled.then(leave, leaveRejected)
      }
      : value
  }
  return out as S
}
