import { Clock, Context, type Effect, type Fiber, FiberRef, type MetricLabel } from "effect"
import { clockReadingNow } from "../clock.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** Lets an effect be interrupted again inside an uninterruptible region (`Effect.uninterruptibleMask`'s `restore`). */
export type Restore = <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>

/**
 * What a direct runner needs from the fiber it runs on: the time (the
 * fiber's clock, read synchronously; undefined for a reading the Effect path
 * must refuse), the metric labels, and `restore`, the runner being called in
 * an uninterruptible region.
 */
export interface DirectContext {
  readonly now: () => Millis | undefined
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  readonly restore: Restore
}

/** A fiber's direct context: one object per call, its clock read when asked. */
class FiberDirectContext implements DirectContext {
  constructor(
    readonly fiber: Fiber.RuntimeFiber<unknown, unknown>,
    readonly restore: Restore,
    readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  ) {}
  now(): Millis | undefined {
    return clockReadingNow(Context.get(this.fiber.currentDefaultServices, Clock.Clock))
  }
}

/**
 * The direct context of `fiber`, inside the uninterruptible region `restore`
 * belongs to (`labels`: the fiber's metric labels, when the caller has read them).
 */
export const directContextOf = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  restore: Restore,
  labels: ReadonlyArray<MetricLabel.MetricLabel> = fiber.getFiberRef(FiberRef.currentMetricLabels)
): DirectContext => new FiberDirectContext(fiber, restore, labels)
