import { Cause, Effect, Exit, type Fiber, FiberRef, type Metric, type MetricLabel, Option } from "effect"
import { CorruptRow, InvalidClockReading, StoreClosed } from "../errors.js"
import { bounded, type CallBoundary, makeCallBoundary } from "./bound.js"
import { directContextOf } from "./directContext.js"
import { type CallGate, refusedReentry } from "./gate.js"
import { hotSpecOf, type HotSpec, isPrepareFailure, withHotSpec } from "./hot.js"
import { storeSeries } from "./metrics.js"
import { annotateSpanOf, isTraced } from "./tracing.js"

/** The span of a public method is named `connector-store.<method>`. */
export const SPAN_PREFIX = "connector-store."

/** The argument fields a call's span may show: only these are read, so secrets never reach a span. */
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

/** The error with `method` set to the public method called (unless it names one), rebuilt, never mutated. */
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

/** The outcome word of a successful call's value: its outcome string, or `ok`. */
const successOutcome = (value: unknown): string => {
  if (typeof value === "string") return value
  if (Option.isOption(value)) return "ok"
  if (typeof value === "boolean") return String(value)
  if (typeof value === "object" && value !== null) {
    for (const key of ["outcome", "status", "_tag"]) {
      const field = (value as Record<string, unknown>)[key]
      if (typeof field === "string") return field
    }
  }
  return "ok"
}

/** The outcome word of a call that failed with `error`: its `_tag`, or `defect`. */
const failureOutcome = (error: unknown): string =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "defect"

/** A short word for what a call returned: its outcome string, or `ok`. */
export const outcomeOf = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isFailure(exit)) return exit.cause._tag === "Fail" ? failureOutcome(exit.cause.error) : "defect"
  return successOutcome(exit.value)
}

type Method = (...args: ReadonlyArray<never>) => Effect.Effect<unknown, unknown, unknown>

/** What one public method's calls share, built once when the API is instrumented. */
interface MethodSpec {
  readonly method: string
  readonly spanName: string
  readonly named: (error: unknown) => unknown
  /** The method's call counter for `outcome` (a series per outcome, built on first use). */
  readonly calls: (outcome: string) => Metric.Metric.Counter<number>
  readonly duration: Metric.Metric.Histogram<number>
}

const methodSpec = (method: string): MethodSpec => {
  const byOutcome = new Map<string, Metric.Metric.Counter<number>>()
  return {
    method,
    spanName: `${SPAN_PREFIX}${method}`,
    named: nameMethod(method),
    calls: (outcome) => {
      let counter = byOutcome.get(outcome)
      if (counter === undefined) {
        counter = storeSeries("calls", [["method", method], ["outcome", outcome]])
        byOutcome.set(outcome, counter)
      }
      return counter
    },
    duration: storeSeries("duration", [["method", method]])
  }
}

/**
 * One call of a public method, in one fiber step and one exit handler: the gate, the call, and on exit the refined error,
 * metrics and the span's outcome (a span only with a tracer).
 */
const instrumentCall = (
  spec: MethodSpec,
  gate: CallGate,
  boundary: CallBoundary,
  call: Method,
  args: ReadonlyArray<never>
): Effect.Effect<unknown, unknown, unknown> =>
  Effect.withFiberRuntime((fiber) => {
    const admitted = gate.enter()
    const outcomes = outcomesOf(spec, fiber, performance.now(), admitted ? gate.leave : stayedOut)
    let body: Effect.Effect<unknown, unknown, unknown>
    try {
      body = admitted
        ? refusedReentry(fiber, gate, spec.method) ??
          (UNBOUNDED.has(spec.method) ? call(...args) : bounded(boundary, spec.method, call(...args)))
        : Effect.fail(new StoreClosed({ method: spec.method }))
    } catch (defect) {
      body = Effect.die(defect)
    }
    const measured = Effect.uninterruptibleMask((restore) => Effect.matchCauseEffect(restore(body), outcomes))
    // Effect's own tracer exports nowhere: without an installed tracer no span is made (the same code runs either way).
    return isTraced(fiber) ? Effect.withSpan(measured, spec.spanName, { attributes: identityAttributes(args) }) : measured
  })

/** The methods not bounded by `callTimeoutMs`: waits that hold nothing and carry their own timeout. */
const UNBOUNDED: ReadonlySet<string> = new Set(["awaitWork"])

/** What a call the gate refused does when it ends: nothing (it never entered). */
const stayedOut = (): void => {}

/** How a call ends: `leave` (the gate), its error refined, metrics and the span's outcome recorded. */
const outcomesOf = (spec: MethodSpec, fiber: Fiber.RuntimeFiber<unknown, unknown>, started: number, leave: () => void) => ({
  onFailure: (cause: Cause.Cause<unknown>): Effect.Effect<never, unknown> => {
    leave()
    return callFailed(spec, fiber, fiber.getFiberRef(FiberRef.currentMetricLabels), started, cause)
  },
  onSuccess: (value: unknown): Effect.Effect<unknown> => {
    leave()
    return callSucceeded(spec, fiber, fiber.getFiberRef(FiberRef.currentMetricLabels), started, value)
  }
})

/** A call that succeeded with `value`: counted, and its value as the call's exit. */
const callSucceeded = (
  spec: MethodSpec,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  labels: ReadonlyArray<MetricLabel.MetricLabel>,
  started: number,
  value: unknown
): Exit.Exit<unknown> => {
  finishCall(spec, fiber, labels, started, successOutcome(value))
  return Exit.succeed(value)
}

/** A call that failed with `cause`: counted, and its refined error (or the cause as it is) as the call's exit. */
const callFailed = (
  spec: MethodSpec,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  labels: ReadonlyArray<MetricLabel.MetricLabel>,
  started: number,
  cause: Cause.Cause<unknown>
): Exit.Exit<never, unknown> => {
  const error = refine(spec, cause)
  if (error === NOT_A_FAILURE) {
    finishCall(spec, fiber, labels, started, "defect")
    return Exit.failCause(cause)
  }
  finishCall(spec, fiber, labels, started, failureOutcome(error))
  return Exit.fail(error)
}

/** A call of `spec` that started at `started` ended with `outcome`: its metrics, and its span's outcome. */
const finishCall = (
  spec: MethodSpec,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  labels: ReadonlyArray<MetricLabel.MetricLabel>,
  started: number,
  outcome: string
): void => annotateSpanOf(fiber, { [OUTCOME]: countCall(spec, labels, started, outcome) })

/** Counts a call of `spec` that started at `started` and ended with `outcome`; answers `outcome`. */
const countCall = (spec: MethodSpec, labels: ReadonlyArray<MetricLabel.MetricLabel>, started: number, outcome: string): string => {
  spec.calls(outcome).unsafeUpdate(1, labels)
  spec.duration.unsafeUpdate(performance.now() - started, labels)
  return outcome
}

/**
 * An instrumented call of a hot method: its arguments prepared once and its transition run in this fiber step, with
 * `instrumentCall`'s gate, refinement and metrics; a call that finished at once is settled without a continuation.
 */
const instrumentHot = (
  spec: MethodSpec,
  gate: CallGate,
  boundary: CallBoundary,
  hot: HotSpec<ReadonlyArray<never>, unknown, unknown>,
  args: ReadonlyArray<never>
): Effect.Effect<unknown, unknown, unknown> =>
  Effect.uninterruptibleMask((restore) => {
    const body = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<unknown, unknown> => {
      const started = performance.now()
      const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
      if (!gate.enter()) return callFailed(spec, fiber, labels, started, Cause.fail(new StoreClosed({ method: spec.method })))
      let ran: Effect.Effect<unknown, unknown>
      try {
        const prepared = hot.prepare(...args)
        ran = refusedReentry(fiber, gate, spec.method) ??
          (isPrepareFailure(prepared)
            ? Exit.fail(prepared)
            : hot.run(prepared, directContextOf(fiber, restore, labels, { boundary, method: spec.method, started })))
      } catch (defect) {
        ran = Exit.die(defect)
      }
      // What is left of the call bounds itself (see `DirectContext`): a hand-over to the ports, a winner read's wait.
      if (!Exit.isExit(ran)) return Effect.matchCauseEffect(ran, outcomesOf(spec, fiber, started, gate.leave))
      gate.leave()
      const exit = ran as Exit.Exit<unknown, unknown>
      return Exit.isSuccess(exit)
        ? callSucceeded(spec, fiber, labels, started, exit.value)
        : callFailed(spec, fiber, labels, started, exit.cause)
    }
    return Effect.withFiberRuntime((fiber) =>
      isTraced(fiber)
        ? Effect.withSpan(Effect.withFiberRuntime(body), spec.spanName, { attributes: identityAttributes(args) })
        : body(fiber)
    )
  })

/** Counts calls of `method` made outside a fiber (the lane) in the same series as instrumented calls; answers the outcome counted. */
export const callMetrics = (method: string) => {
  const spec = methodSpec(method)
  return {
    succeeded: (value: unknown, started: number, labels: ReadonlyArray<MetricLabel.MetricLabel>) =>
      countCall(spec, labels, started, successOutcome(value)),
    failed: (error: unknown, started: number, labels: ReadonlyArray<MetricLabel.MetricLabel>) =>
      countCall(spec, labels, started, failureOutcome(error))
  }
}

const OUTCOME = `${SPAN_PREFIX}outcome`
const NOT_A_FAILURE: unique symbol = Symbol("not a failure")

/**
 * The error a failed call fails with, naming the method: an injected clock's bad reading and an undecodable row (defects inside
 * the ports) become `InvalidClockReading` and `CorruptRow`; `NOT_A_FAILURE` for a cause with neither.
 */
const refine = (spec: MethodSpec, cause: Cause.Cause<unknown>): unknown => {
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect) && (defect.value instanceof InvalidClockReading || defect.value instanceof CorruptRow)) {
    return spec.named(defect.value)
  }
  const failure = Cause.failureOption(cause)
  return Option.isSome(failure) ? spec.named(failure.value) : NOT_A_FAILURE
}

/**
 * The API with every method wrapped once: calls go through `gate` (`StoreClosed` once shut), errors name their method, and each
 * call is counted in `StoreMetrics` and spanned `connector-store.<method>` when a tracer is installed.
 */
export const instrumentApi = <Api extends object>(api: Api, gate: CallGate, boundary: CallBoundary = makeCallBoundary()): Api => {
  const out: Record<string, unknown> = {}
  for (const [method, value] of Object.entries(api)) {
    if (typeof value !== "function") {
      out[method] = value
      continue
    }
    const spec = methodSpec(method)
    const hot = hotSpecOf(value)
    out[method] = hot === undefined
      ? (...args: ReadonlyArray<never>) => instrumentCall(spec, gate, boundary, value as Method, args)
      : withHotSpec((...args: ReadonlyArray<never>) => instrumentHot(spec, gate, boundary, hot, args), hot)
  }
  return out as Api
}
