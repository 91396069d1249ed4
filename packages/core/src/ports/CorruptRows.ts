import { Effect, FiberRef, Metric } from "effect"
import type { CorruptRow } from "../errors.js"

/** A row a list read skipped because it does not decode (it is still stored; the operator guide says how to repair it). */
export interface CorruptRowReport extends Pick<CorruptRow, "table" | "key" | "column" | "detail"> {}

/** Rows skipped by list reads because they do not decode, tagged `table`. */
export const corruptRowsSkipped = Metric.counter("connector_store_corrupt_rows_skipped", {
  description: "rows a list read or sweep skipped because they do not decode, by table",
  incremental: true
})

/**
 * What a list read does with a row it cannot decode: report it (`undefined`), collect it too (`collectCorruptRows`) or die with
 * it (`refuseCorruptRows`).
 */
const handling = FiberRef.unsafeMake<ReadonlyArray<CorruptRowReport> | typeof REFUSE | undefined>(undefined)

const REFUSE: unique symbol = Symbol("connector-store/RefuseCorruptRows")

/**
 * How an adapter's list read `read` answers for the rows it could not decode: each is logged, counted in `corruptRowsSkipped`
 * and handed to the surrounding `collectCorruptRows`, and the read goes on; under `refuseCorruptRows` it dies with the first.
 */
export const reportCorruptRows = (read: string, rows: ReadonlyArray<CorruptRow>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(handling), (mode) => {
    if (mode === REFUSE) return Effect.die(rows[0])
    const reports = rows.map(({ table, key, column, detail }): CorruptRowReport => ({ table, key, column, detail }))
    return Effect.zipRight(
      Effect.forEach(reports, (report) =>
        Effect.zipRight(
          Effect.logWarning(`skipped a row that cannot be decoded: ${report.table} ${report.key}: ${report.column}: ${report.detail}`)
            .pipe(Effect.annotateLogs({ read, ...report })),
          Metric.increment(Metric.tagged(corruptRowsSkipped, "table", report.table))
        ), { discard: true }),
      mode === undefined ? Effect.void : FiberRef.set(handling, [...mode, ...reports])
    )
  })

/** Runs `read` and answers its value with the rows its list reads skipped, in order. */
export const collectCorruptRows = <A, E, R>(
  read: Effect.Effect<A, E, R>
): Effect.Effect<readonly [A, ReadonlyArray<CorruptRowReport>], E, R> =>
  Effect.locally(Effect.zip(read, FiberRef.get(handling)), handling, []).pipe(
    Effect.map(([value, reports]) => [value, Array.isArray(reports) ? reports : []] as const)
  )

/** Runs `read` with its list reads failing on a row they cannot decode: for reads a safety decision rests on. */
export const refuseCorruptRows = <A, E, R>(read: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(read, handling, REFUSE)
