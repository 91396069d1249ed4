import { CorruptRow } from "@connector-store/core"

/**
 * Column decoding shared by every row reader. Postgres hands `bigint`
 * columns back as strings and SQLite as numbers; both become JS numbers here,
 * and nowhere else.
 */
export const epoch = (value: unknown): number => {
  if (typeof value === "number") return value
  if (typeof value === "string" || typeof value === "bigint") {
    const n = Number(value)
    if (Number.isSafeInteger(n)) return n
  }
  throw new TypeError(`expected an integer column, got ${typeof value} ${String(value)}`)
}

/** A nullable integer column. */
export const epochOrNull = (value: unknown): number | null => value === null || value === undefined ? null : epoch(value)

/** A text column. */
export const text = (value: unknown): string => {
  if (typeof value === "string") return value
  throw new TypeError(`expected a text column, got ${typeof value}`)
}

/** A nullable text column. */
export const textOrNull = (value: unknown): string | null => value === null || value === undefined ? null : text(value)

/** A JSON value stored as text (`null` stays `null`). */
export const jsonOrNull = (value: unknown): unknown => value === null || value === undefined ? null : JSON.parse(text(value))

/** A JSON value for a text column (`null`/`undefined` become SQL null). */
export const encodeJson = (value: unknown): string | null => value === null || value === undefined ? null : JSON.stringify(value)

/** A row as the driver returns it. */
export type RawRow = Readonly<Record<string, unknown>>

/** A row decoder that fails, for a row it cannot decode, with `CorruptRow` (see `rowDecoder`). */
export type RowDecoder<A> = (row: RawRow) => A

/**
 * `decode` for the rows of `table`, whose key is `keyColumns` (joined with
 * `/` in a report): a row it cannot decode throws `CorruptRow` naming the
 * table, the row's key and the column that failed, never the decoder's own
 * `TypeError` or `SyntaxError`. A decoded row costs one call more, nothing
 * else: the failing column is found only once a row has failed, by decoding
 * it again and noting the last column read.
 */
export const rowDecoder = <A>(table: string, keyColumns: ReadonlyArray<string>, decode: (row: RawRow) => A): RowDecoder<A> =>
(row) => {
  try {
    return decode(row)
  } catch (cause) {
    throw corruptRow(table, keyColumns, decode, row, cause)
  }
}

/** The `CorruptRow` of a `row` of `table` that `decode` threw `cause` on. */
const corruptRow = (
  table: string,
  keyColumns: ReadonlyArray<string>,
  decode: (row: RawRow) => unknown,
  row: RawRow,
  cause: unknown
): CorruptRow => {
  if (cause instanceof CorruptRow) return cause
  let column = "(unknown)"
  let failure = cause
  const watched = new Proxy(row, {
    get: (target, name) => {
      if (typeof name === "string") column = name
      return target[name as string]
    }
  })
  try {
    decode(watched)
  } catch (again) {
    failure = again
  }
  return new CorruptRow({
    table,
    key: keyColumns.map((name) => String(row[name])).join("/"),
    column,
    detail: failure instanceof Error ? failure.message : String(failure)
  })
}

/**
 * Decodes each of `rows` with `decode` (a `rowDecoder`): the rows that
 * decode, in order, and the `CorruptRow` of each that does not.
 */
export const decodeEach = <A>(
  decode: RowDecoder<A>,
  rows: ReadonlyArray<RawRow>
): { readonly decoded: ReadonlyArray<A>; readonly corrupt: ReadonlyArray<CorruptRow> } => {
  const decoded: Array<A> = []
  let corrupt: Array<CorruptRow> | undefined
  for (const row of rows) {
    try {
      decoded.push(decode(row))
    } catch (failure) {
      if (!(failure instanceof CorruptRow)) throw failure
      ;(corrupt ??= []).push(failure)
    }
  }
  return { decoded, corrupt: corrupt ?? NONE }
}

const NONE: ReadonlyArray<CorruptRow> = []
