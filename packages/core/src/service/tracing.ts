import { Effect, type Fiber } from "effect"

/** The tracer Effect runs with when none is installed: its spans go nowhere. */
export const nativeTracer = Effect.runSync(Effect.tracer)

/** Whether `fiber` runs with a tracer installed: it decides only whether spans are made, never which code runs. */
export const isTraced = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean => fiber.currentTracer !== nativeTracer

/** Sets `attributes` on the fiber's span when a tracer is installed (and builds nothing when there is none). */
export const annotateSpanOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>, attributes: Record<string, unknown>): void => {
  if (!isTraced(fiber)) return
  const span = fiber.currentSpan
  if (span === undefined || span._tag !== "Span") return
  for (const key in attributes) span.attribute(key, attributes[key])
}
