import type { DueRead, PersistenceError } from "@connector-store/core"
import { Effect } from "effect"
import type { RawRow } from "./columns.js"
import { type RowQuery, statementThen } from "./queries.js"

/** A time column as read, for a position: null, a safe integer, or `undefined` when it is neither. */
export const rawTimeOrNull = (value: unknown): number | null | undefined => {
  if (value === null || value === undefined) return null
  const n = typeof value === "number" ? value : typeof value === "string" || typeof value === "bigint" ? Number(value) : Number.NaN
  return Number.isSafeInteger(n) ? n : undefined
}

/** A text column as read, for a position, or `undefined` when it is not text. */
export const rawText = (value: unknown): string | undefined => typeof value === "string" ? value : undefined

/**
 * One page of a due read: `query` run once, its rows decoded by `healthy`
 * (a `rowReaders` reader: a row that does not decode is skipped and
 * reported), and the position of the last row read whose key and time
 * `positionOf` can read, so a page whose last rows do not decode still
 * leads past them.
 */
export const readDuePage = <A, P>(
  operation: string,
  healthy: (operation: string, query: RowQuery) => Effect.Effect<ReadonlyArray<A>, PersistenceError>,
  query: RowQuery,
  positionOf: (row: RawRow) => P | undefined
): Effect.Effect<DueRead<A, P>, PersistenceError> =>
  Effect.flatMap(statementThen(operation, query, (raw: ReadonlyArray<RawRow>) => raw), (raw) =>
    Effect.map(healthy(operation, Effect.succeed(raw)), (rows) => {
      let last: P | undefined
      for (let i = raw.length - 1; i >= 0 && last === undefined; i--) last = positionOf(raw[i]!)
      return { rows, read: raw.length, last }
    }))
