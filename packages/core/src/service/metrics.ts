import { Metric, MetricBoundaries, MetricKey, MetricLabel } from "effect"
import { corruptRowsSkipped } from "../ports/CorruptRows.js"

const keys = {
  calls: MetricKey.counter("connector_store_calls", { description: "calls of a public method, by method and outcome" }),
  duration: MetricKey.histogram(
    "connector_store_call_duration_ms",
    MetricBoundaries.exponential({ start: 0.25, factor: 2, count: 16 }),
    "wall time of a public method call in milliseconds"
  ),
  lostRaceRetries: MetricKey.counter("connector_store_lost_race_retries", {
    description: "read-decide-write tries that lost their race and were rolled back",
    incremental: true
  })
} as const

/** The store's Effect metrics, recorded whatever the backend, each series tagged `method`. */
export const StoreMetrics = {
  /** Calls per public method, tagged `outcome`: the success outcome or the error's `_tag`. */
  calls: Metric.fromMetricKey(keys.calls),
  /** Wall time of each call of a public method in milliseconds (a transition's latency, retries included). */
  duration: Metric.fromMetricKey(keys.duration),
  /** Tries of a read-decide-write that lost their optimistic-concurrency race and were rolled back. */
  lostRaceRetries: Metric.fromMetricKey(keys.lostRaceRetries),
  /** How many items one due sweep returned, tagged `kind` (`operations` or `watches`). */
  dueSweepSize: Metric.histogram(
    "connector_store_due_sweep_size",
    MetricBoundaries.exponential({ start: 1, factor: 2, count: 14 }),
    "items returned by one due sweep"
  ),
  /** Rows a list read or sweep skipped because they do not decode, tagged `table`. */
  corruptRowsSkipped,
  /** Claims handed out in doubt only because a failover or restore was noticed (each a reissue, or a person's). */
  failoverDoubtfulClaims: Metric.counter("connector_store_failover_doubtful_claims", {
    description: "claims handed out in doubt because a failover or restore was noticed",
    incremental: true
  }),
  /** When the window of doubt of the failover noticed last ends (ms since the epoch); 0 when none is in force. */
  failoverDoubtUntil: Metric.gauge("connector_store_failover_doubt_until_ms", {
    description: "when the window of doubt of a noticed failover or restore ends, 0 when none is in force"
  })
} as const

/** One series of a `StoreMetrics` metric with its tags fixed, built once from its full key (cheaper than `Metric.tagged`). */
export const storeSeries = <K extends keyof typeof keys>(
  metric: K,
  tags: ReadonlyArray<readonly [string, string]>
): (typeof StoreMetrics)[K] =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(keys[metric] as MetricKey.MetricKey<any>, tags.map(([key, value]) => MetricLabel.make(key, value)))
  ) as never
