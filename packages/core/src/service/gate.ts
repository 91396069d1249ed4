import { Effect, Exit, type Fiber, FiberRef } from "effect"
import { ReentrantCall } from "../errors.js"

/** The door every public call goes through: `shut` refuses new calls and completes when the admitted ones have left. */
export interface CallGate {
  /** Admits one call: `false` once the gate is shut (the call must not run). */
  readonly enter: () => boolean
  /** One admitted call has ended, however it ended. */
  readonly leave: () => void
  /** Whether the gate is shut. */
  readonly isShut: () => boolean
  /** Shuts the gate; resolves when every admitted call has left. Shutting again waits for the same calls. */
  readonly shut: () => Promise<void>
}

/** A gate that is open, with no call in flight. */
export const makeCallGate = (): CallGate => {
  let shut = false
  let inFlight = 0
  let drained: Promise<void> | undefined
  let wake: (() => void) | undefined
  return {
    enter: () => {
      if (shut) return false
      inFlight++
      return true
    },
    leave: () => {
      inFlight--
      if (inFlight === 0 && wake !== undefined) wake()
    },
    isShut: () => shut,
    shut: () => {
      shut = true
      drained ??= inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => wake = resolve)
      return drained
    }
  }
}

/** `gate.shut()` as an Effect, for a layer's finalizer. */
export const shutGate = (gate: CallGate): Effect.Effect<void> => Effect.promise(() => gate.shut())

/** The stores whose callbacks (a winner reader, a candidate's apply) run around the current code, innermost first. */
export interface InsideCallbacks {
  readonly store: object
  readonly outer: InsideCallbacks | undefined
}

/** Whether `store` is one of the stores whose callback the code in `inside` runs for. */
export const isInsideCallbackOf = (inside: InsideCallbacks | undefined, store: object): boolean => {
  for (let at = inside; at !== undefined; at = at.outer) if (at.store === store) return true
  return false
}

/** Which stores' callbacks the fiber runs inside; a forked fiber inherits it, a joined one leaves its parent's alone. */
export const insideCallbacks: FiberRef.FiberRef<InsideCallbacks | undefined> = FiberRef.unsafeMake<InsideCallbacks | undefined>(
  undefined,
  { fork: (inside) => inside, join: (parent) => parent }
)

/** `callback` run as a callback of the store behind `gate`: a call of that store from inside it is refused (see `refusedReentry`). */
export const asCallbackOf = (gate: CallGate) => <A, E, R>(callback: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // Set and put back by hand: `Effect.locallyWith` takes several times the runtime steps, on every asynchronous winner read.
  Effect.flatMap(FiberRef.getAndUpdate(insideCallbacks, (outer) => ({ store: gate, outer })), (outer) =>
    Effect.ensuring(callback, FiberRef.set(insideCallbacks, outer)))

/** A call of `method` made from inside the same store's callback, refused with `ReentrantCall`; `undefined` otherwise. */
export const refusedReentry = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  gate: CallGate,
  method: string
): Exit.Exit<never, ReentrantCall> | undefined => {
  const inside = fiber.getFiberRef(insideCallbacks)
  return inside !== undefined && isInsideCallbackOf(inside, gate) ? Exit.fail(new ReentrantCall({ method })) : undefined
}

const storeGates = new WeakMap<object, CallGate>()

/** `api`, remembered as the store whose calls go through `gate` (see `gateOf`). */
export const withGate = <Api extends object>(api: Api, gate: CallGate): Api => {
  storeGates.set(api, gate)
  return api
}

/** The gate of a store built with `withGate`. */
export const gateOf = (api: object): CallGate | undefined => storeGates.get(api)
