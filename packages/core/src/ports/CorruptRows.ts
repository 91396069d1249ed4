import { Effect, FiberRef, Metric } from "effect"
import type { CorruptRow } from "../errors.js"

/**
 * A row a list read skipped because it does not decode: its table, its key
 * as text, the column that failed and why. The row is still stored; the
 * operator guide says how to repair it.
 */
export interface CorruptRowReport extends Pick<CorruptRow, "table" | "key" | "column" | "detail"> {}

/** The report of a `CorruptRow` (its fields without the method). */
export const corruptRowReport = (row: CorruptRow): CorruptRowReport => ({
  table: row.table,
  key: row.key,
  column: row.column,
  detail: row.detail
})

/**
 * Rows skipped by list reads because they do not decode, tagged `table`
 * (the table's name as stored).
 */
export const corruptRowsSkipped = Metric.counter("connector_store_corrupt_rows_skipped", {
  description: "rows a list read or sweep skipped because they do not decode, by table",
  incremental: true
})

/**
 * What a list read does with a row it cannot decode: skip it and report it
 * (`undefined`), skip it and add it to the reports collected
 * (`collectCorruptRows`), or fail the read with it (`refuseCorruptRows`).
 */
const handling = FiberRef.unsafeMake<ReadonlyArray<CorruptRowReport> | typeof REFUSE | undefined>(undefined)

const REFUSE: unique symbol = Symbol("connector-store/RefuseCorruptRows")

/**
 * How a list read of an adapter answers for the rows it could not decode
 * (`rows`, not empty): each one is logged as a warning with its table, key
 * and column, counted in `corruptRowsSkipped`, and handed to the
 * surrounding `collectCorruptRows`, if any; then the read goes on without
 * them. Under `refuseCorruptRows` the read dies with the first instead
 * (which the store's boundary turns into the call's `CorruptRow`). `read`
 * names the adapter's read.
 */
export const reportCorruptRows = (read: string, rows: ReadonlyArray<CorruptRow>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(handling), (mode) => {
    if (mode === REFUSE) return Effect.die(rows[0])
    const reports = rows.map(corruptRowReport)
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

/**
 * Runs `read` and answers what it read with the rows its list reads skipped
 * because they do not decode (see `reportCorruptRows`), in the order skipped.
 */
export const collectCorruptRows = <A, E, R>(
  read: Effect.Effect<A, E, R>
): Effect.Effect<readonly [A, ReadonlyArray<CorruptRowReport>], E, R> =>
  Effect.locally(Effect.zip(read, FiberRef.get(handling)), handling, []).pipe(
    Effect.map(([value, reports]) => [value, Array.isArray(reports) ? reports : []] as const)
  )

/**
 * Runs `read` with its list reads failing on a row they cannot decode
 * instead of skipping it: for the reads a safety decision rests on, where a
 * row left out would change the answer.
 */
export const refuseCorruptRows = <A, E, R>(read: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(read, handling, REFUSE)
