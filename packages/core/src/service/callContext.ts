import type { Effect } from "effect"
import type { PersistenceError } from "../errors.js"
import { bounded, type CallBoundary } from "./bound.js"

/** Lets an effect be interrupted again inside an uninterruptible region (`Effect.uninterruptibleMask`'s `restore`). */
export type Restore = <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>

/**
 * What a hot method's `run` needs from the instrumented call around it:
 * `restore` (it is called in an uninterruptible region) and the call's
 * bound.
 */
export interface CallContext {
  readonly restore: Restore
  /** `effect`, the call, under the call's bound (as it is without one). */
  readonly bounded: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E | PersistenceError>
}

/** The bound of a call of `method`. */
export interface CallUnderBound {
  readonly boundary: CallBoundary
  readonly method: string
}

/** The context of a call inside the uninterruptible region `restore` belongs to, under `call`'s bound (none when undefined). */
export const callContextOf = (restore: Restore, call?: CallUnderBound): CallContext => ({
  restore,
  bounded: call === undefined
    ? <A, E>(effect: Effect.Effect<A, E>) => effect
    : <A, E>(effect: Effect.Effect<A, E>) => bounded(call.boundary, call.method, effect)
})
