import { Data, Effect, Metric, type MetricLabel } from "effect"
import { ConcurrentUpdateExhausted } from "../errors.js"
import { annotateSpanOf, nativeTracer } from "./instrument.js"
import { storeSeries } from "./metrics.js"

/** How many times a read-decide-write is tried before it gives up. */
export const MAX_CAS_ATTEMPTS = 6

/**
 * A versioned write found the row changed since it was read. Raised inside
 * the transaction so the whole try rolls back; never seen by callers.
 */
export class LostRace extends Data.TaggedError("LostRace")<{}> {}

/** Continues when a versioned write landed; otherwise abandons the try. */
export const requireWon = (won: boolean): Effect.Effect<void, LostRace> =>
  won ? Effect.void : Effect.fail(new LostRace())

/**
 * Runs `attempt` (a whole transaction: lock-read, decide, versioned writes)
 * until no write of it loses its race. A lost try is rolled back whole and
 * the next try re-reads everything, so no decision computed from a stale
 * read is ever applied. After `MAX_CAS_ATTEMPTS` lost tries it fails with
 * `ConcurrentUpdateExhausted` naming `identity`. Each lost try counts in
 * `StoreMetrics.lostRaceRetries`; the current span gets `attempts` and `retries`.
 */
export const retryOnLostRace = <A, E, R>(
  method: string,
  identity: string,
  attempt: Effect.Effect<A, E | LostRace, R>
): Effect.Effect<A, Exclude<E, LostRace> | ConcurrentUpdateExhausted, R> => {
  type Out = Effect.Effect<A, Exclude<E, LostRace> | ConcurrentUpdateExhausted, R>
  return Effect.withFiberRuntime((fiber) => {
    // The span learns the tries when the loop ends, and only when a tracer reads it (see `annotateSpanOf`).
    const traced = fiber.currentTracer !== nativeTracer
    const tries = (tried: number) =>
      Effect.sync(() => annotateSpanOf(fiber, { "connector-store.attempts": tried, "connector-store.retries": tried - 1 }))
    const loop = (tried: number): Out =>
      Effect.catchIf(
        traced ? Effect.tap(attempt, () => tries(tried + 1)) : attempt,
        (error): error is LostRace => error instanceof LostRace,
        () =>
          Effect.zipRight(
            Metric.increment(lostRaceSeries(method)),
            tried + 1 >= MAX_CAS_ATTEMPTS
              ? Effect.zipRight(
                tries(tried + 1),
                Effect.fail(new ConcurrentUpdateExhausted({ method, identity, attempts: tried + 1 }))
              )
              : loop(tried + 1)
          )
      ) as Out
    return loop(0)
  })
}

/** Counts one lost try of `method` in `StoreMetrics.lostRaceRetries`. */
export const countLostRace = (method: string): Effect.Effect<void> => Metric.increment(lostRaceSeries(method))

/** `countLostRace` outside a fiber, with the runtime's metric `labels`. */
export const countLostRaceNow = (method: string, labels: ReadonlyArray<MetricLabel.MetricLabel>): void =>
  lostRaceSeries(method).unsafeUpdate(1, labels)

const lostRaceByMethod = new Map<string, Metric.Metric.Counter<number>>()

/** The lost-race counter of `method`, built once per method (see `storeSeries`). */
const lostRaceSeries = (method: string): Metric.Metric.Counter<number> => {
  let series = lostRaceByMethod.get(method)
  if (series === undefined) {
    series = storeSeries("lostRaceRetries", [["method", method]])
    lostRaceByMethod.set(method, series)
  }
  return series
}
