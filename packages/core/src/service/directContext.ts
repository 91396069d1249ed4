import { Clock, Context, type Effect, type Fiber, FiberRef, type MetricLabel } from "effect"
import { clockReadingNow } from "../clock.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import { annotateSpanOf } from "./tracing.js"

/** Lets an effect be interrupted again inside an uninterruptible region (`Effect.uninterruptibleMask`'s `restore`). */
export type Restore = <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>

/**
 * What a direct runner needs from the fiber it runs on: the time (the
 * fiber's clock, read synchronously; undefined for a reading the ports
 * must refuse), the metric labels, `restore` (the runner is called in an
 * uninterruptible region), and the span to tell the tries.
 */
export interface DirectContext {
  readonly now: () => Millis | undefined
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  readonly restore: Restore
  /** Tells the call's span how many tries it took (nothing without a tracer). */
  readonly tried: (attempts: number) => void
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
  tried(attempts: number): void {
    annotateSpanOf(this.fiber, { "connector-store.attempts": attempts, "connector-store.retries": attempts - 1 })
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
