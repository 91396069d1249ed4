import { Effect, Exit, Metric, Option } from "effect"
import { InvalidClockReading, StoreClosed } from "../errors.js"
import { StoreMetrics } from "./metrics.js"

/** The span of a public method is named `connector-store.<method>`. */
export const SPAN_PREFIX = "connector-store."

/**
 * The argument fields that identify what a call is about and may be put on
 * its span. Only these are read: secrets (a PKCE verifier, a payload, a
 * checkpoint) never reach a span, whatever the argument holds.
 */
export const IDENTITY_FIELDS = [
  "ownerDID",
  "connectorName",
  "model",
  "accountKey",
  "sourceID",
  "documentID",
  "callerDID",
  "operationID",
  "runID",
  "viewerDID",
  "visibleTo"
] as const

const plainArgs = Symbol.for("effect/Data/Error/plainArgs")

/**
 * The error with `method` set to the public method called, unless it already
 * names one. A tagged error is rebuilt (same class, same fields), never mutated.
 */
export const nameMethod = (method: string) => (error: unknown): unknown => {
  if (typeof error !== "object" || error === null || !(plainArgs in error)) return error
  if ((error as { readonly method?: unknown }).method !== undefined) return error
  const Tagged = error.constructor as new(args: object) => unknown
  return new Tagged({ ...(error as Record<symbol, object>)[plainArgs], method })
}

/** The identity attributes of a call's arguments (see `IDENTITY_FIELDS`). */
export const identityAttributes = (args: ReadonlyArray<unknown>): Record<string, string> => {
  const attributes: Record<string, string> = {}
  for (const arg of args) {
    if (typeof arg !== "object" || arg === null || Array.isArray(arg)) continue
    for (const field of IDENTITY_FIELDS) {
      const value = (arg as Record<string, unknown>)[field]
      if (typeof value === "string") attributes[`${SPAN_PREFIX}${field}`] = value
    }
  }
  return attributes
}

/** A short word for what a call returned: its outcome string, or `ok`. */
export const outcomeOf = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isFailure(exit)) {
    const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
    return typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "defect"
  }
  const value = exit.value
  if (typeof value === "string") return value
  if (typeof value === "boolean") return String(value)
  if (typeof value === "object" && value !== null) {
    for (const key of ["outcome", "status", "_tag"]) {
      const field = (value as Record<string, unknown>)[key]
      if (typeof field === "string") return field
    }
  }
  return "ok"
}

/** The tracer Effect runs with when none is installed. */
const nativeTracer = Effect.runSync(Effect.tracer)

type Method = (...args: ReadonlyArray<never>) => Effect.Effect<unknown, unknown, unknown>

/** One method's metric series, tagged once (tagging builds a new metric key, so it is not done per call). */
interface MethodMetrics {
  readonly calls: (outcome: string) => Metric.Metric.Counter<number>
  readonly duration: Metric.Metric.Histogram<number>
}

const methodMetrics = (method: string): MethodMetrics => {
  const calls = Metric.tagged(StoreMetrics.calls, "method", method)
  const byOutcome = new Map<string, Metric.Metric.Counter<number>>()
  return {
    calls: (outcome) => {
      let counter = byOutcome.get(outcome)
      if (counter === undefined) {
        counter = Metric.tagged(calls, "outcome", outcome)
        byOutcome.set(outcome, counter)
      }
      return counter
    },
    duration: Metric.tagged(StoreMetrics.duration, "method", method)
  }
}

const instrumentCall = (
  method: string,
  metrics: MethodMetrics,
  isClosed: () => boolean,
  call: () => Effect.Effect<unknown, unknown, unknown>,
  args: ReadonlyArray<unknown>
) =>
  Effect.suspend(() => {
    const started = performance.now()
    return Effect.suspend(() => isClosed() ? Effect.fail(new StoreClosed({ method })) : call()).pipe(
      // A bad reading of an injected clock dies inside the clock; it is the caller's typed error here.
      Effect.catchSomeDefect((defect) =>
        defect instanceof InvalidClockReading ? Option.some(Effect.fail(defect)) : Option.none()
      ),
      Effect.mapError(nameMethod(method)),
      Effect.onExit((exit) => {
        const outcome = outcomeOf(exit)
        return Effect.zipRight(
          Effect.annotateCurrentSpan(`${SPAN_PREFIX}outcome`, outcome),
          Effect.zipRight(
            Metric.increment(metrics.calls(outcome)),
            Metric.update(metrics.duration, performance.now() - started)
          )
        )
      }),
      (body) =>
        Effect.tracerWith((tracer) =>
          // Effect's own tracer exports nowhere: without an installed tracer the span is skipped, which keeps an uninstrumented store fast.
          tracer === nativeTracer ? body : Effect.withSpan(body, `${SPAN_PREFIX}${method}`, { attributes: identityAttributes(args) })
        )
    )
  })

/**
 * The API with every method wrapped once, generically: a call after the
 * store closed fails with `StoreClosed`; a bad reading of an injected clock
 * fails with `InvalidClockReading`; every error names the public method
 * (`method`); each call runs in a span `connector-store.<method>` with its
 * identity and outcome (when a tracer is installed: with Effect's default,
 * which exports nowhere, no span is made), and counts in `StoreMetrics`.
 */
export const instrumentApi = <Api extends object>(api: Api, isClosed: () => boolean): Api => {
  const out: Record<string, unknown> = {}
  for (const [method, value] of Object.entries(api)) {
    if (typeof value !== "function") {
      out[method] = value
      continue
    }
    const metrics = methodMetrics(method)
    out[method] = (...args: ReadonlyArray<never>) => instrumentCall(method, metrics, isClosed, () => (value as Method)(...args), args)
  }
  return out as Api
}
