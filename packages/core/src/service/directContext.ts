import { Clock, Context, type Effect, type Fiber, FiberRef, type MetricLabel } from "effect"
import type { PersistenceError } from "../errors.js"
import { clockReadingNow } from "../clock.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import { bounded, type CallBoundary, PendingWait } from "./bound.js"
import { annotateSpanOf } from "./tracing.js"

/** Lets an effect be interrupted again inside an uninterruptible region (`Effect.uninterruptibleMask`'s `restore`). */
export type Restore = <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>

/**
 * What a direct runner needs from its fiber: the time (undefined for a reading the ports must refuse), the metric labels,
 * `restore`, and the span.
 */
export interface DirectContext {
  readonly now: () => Millis | undefined
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  readonly restore: Restore
  /** Tells the call's span how many tries it took (nothing without a tracer). */
  readonly tried: (attempts: number) => void
  /** `effect`, the rest of the call on the ports (a hand-over), under the call's bound (as it is without one). */
  readonly bounded: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E | PersistenceError>
  /** The deadline of a winner read the call waits on (`giveUp` rolls its transaction back), or undefined without a bound. */
  readonly pendingWait: (giveUp: () => void) => PendingWait | undefined
}

/** The bound of a call of `method` that started at `started` (`performance.now()`). */
export interface CallUnderBound {
  readonly boundary: CallBoundary
  readonly method: string
  readonly started: number
}

/** A fiber's direct context: one object per call, its clock read when asked. */
class FiberDirectContext implements DirectContext {
  constructor(
    readonly fiber: Fiber.RuntimeFiber<unknown, unknown>,
    readonly restore: Restore,
    readonly labels: ReadonlyArray<MetricLabel.MetricLabel>,
    readonly call: CallUnderBound | undefined
  ) {}
  bounded<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | PersistenceError> {
    return this.call === undefined ? effect : bounded(this.call.boundary, this.call.method, effect)
  }
  pendingWait(giveUp: () => void): PendingWait | undefined {
    return this.call === undefined ? undefined : new PendingWait(this.call.boundary, this.call.method, this.call.started, giveUp, this.fiber)
  }
  now(): Millis | undefined {
    return clockReadingNow(Context.get(this.fiber.currentDefaultServices, Clock.Clock))
  }
  tried(attempts: number): void {
    annotateSpanOf(this.fiber, { "connector-store.attempts": attempts, "connector-store.retries": attempts - 1 })
  }
}

/** The direct context of `fiber` in the uninterruptible region `restore` belongs to, for a call under `call`'s bound. */
export const directContextOf = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  restore: Restore,
  labels: ReadonlyArray<MetricLabel.MetricLabel> = fiber.getFiberRef(FiberRef.currentMetricLabels),
  call?: CallUnderBound
): DirectContext => new FiberDirectContext(fiber, restore, labels, call)
