import { Effect, type Fiber } from "effect"

/** The tracer Effect runs with when none is installed: its spans go nowhere. */
export const nativeTracer = Effect.runSync(Effect.tracer)

/**
 * Whether `fiber` runs with a tracer installed. This decides only whether
 * spans are made and annotated, never which code runs.
 */
export const isTraced = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean => fiber.currentTracer !== nativeTracer

/**
 * Sets `attributes` on the span the fiber runs in, when a tracer is
 * installed (with Effect's native tracer nothing reads them, so nothing is
 * done). No span, nothing done (and no `NoSuchElementException` built, as
 * `Effect.annotateCurrentSpan` does when there is none).
 */
export const annotateSpanOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>, attributes: Record<string, unknown>): void => {
  if (!isTraced(fiber)) return
  const span = fiber.currentSpan
  if (span === undefined || span._tag !== "Span") return
  for (const key in attributes) span.attribute(key, attributes[key])
}
