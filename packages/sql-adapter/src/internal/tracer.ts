import { Effect } from "effect"

/** Effect's own tracer, which exports nowhere: with it, the clients skip the spans a statement would open. */
export const nativeTracer = Effect.runSync(Effect.tracer)
