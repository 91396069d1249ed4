import { PersistenceError } from "@connector-store/core"
import { Effect, Option } from "effect"
import type { RawRow } from "./columns.js"

/** A statement as the client runs it: the rows it returns, or a driver error. */
export type RowQuery = Effect.Effect<ReadonlyArray<RawRow>, unknown>

/** Every row of `query`, decoded; a driver failure becomes a `PersistenceError` for `operation`. */
export const decodeAll = <A>(operation: string, decode: (row: RawRow) => A, query: RowQuery) =>
  query.pipe(Effect.map((rows) => rows.map(decode)), PersistenceError.refail(operation))

/** The first row of `query`, decoded, if any. */
export const decodeFirst = <A>(operation: string, decode: (row: RawRow) => A, query: RowQuery) =>
  Effect.map(decodeAll(operation, decode, query), (rows) => Option.fromNullable(rows[0]))

/** Whether a write's `RETURNING` gave any row: `false` means it matched none (a lost race, a conflict). */
export const returnedAny = (operation: string, query: RowQuery) =>
  query.pipe(Effect.map((rows) => rows.length > 0), PersistenceError.refail(operation))

/** `many` and `one` readers for one table's decoder. */
export const rowReaders = <A>(decode: (row: RawRow) => A) => ({
  many: (operation: string, query: RowQuery) => decodeAll(operation, decode, query),
  one: (operation: string, query: RowQuery) => decodeFirst(operation, decode, query)
})
