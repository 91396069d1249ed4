import { Metric, MetricBoundaries } from "effect"

/**
 * The store's Effect metrics. They are recorded whatever the metric backend
 * (Effect keeps them in its registry; `@effect/opentelemetry` exports them).
 * Every series is tagged with `method`, the public method called.
 */
export const StoreMetrics = {
  /** Calls per public method, tagged `outcome`: the success outcome or the error's `_tag`. */
  calls: Metric.counter("connector_store_calls", { description: "calls of a public method, by method and outcome" }),
  /** Wall time of each call of a public method in milliseconds (a transition's latency, retries included). */
  duration: Metric.histogram(
    "connector_store_call_duration_ms",
    MetricBoundaries.exponential({ start: 0.25, factor: 2, count: 16 }),
    "wall time of a public method call in milliseconds"
  ),
  /** Tries of a read-decide-write that lost their optimistic-concurrency race and were rolled back. */
  lostRaceRetries: Metric.counter("connector_store_lost_race_retries", {
    description: "read-decide-write tries that lost their race and were rolled back",
    incremental: true
  }),
  /** How many items one due sweep returned, tagged `kind` (`operations` or `watches`). */
  dueSweepSize: Metric.histogram(
    "connector_store_due_sweep_size",
    MetricBoundaries.exponential({ start: 1, factor: 2, count: 14 }),
    "items returned by one due sweep"
  )
} as const
