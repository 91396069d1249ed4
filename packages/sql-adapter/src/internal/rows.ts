import { type RawRow, type RowDecoder, rowDecoder } from "./columns.js"
import type { ColumnOf } from "./versionedUpdate.js"

/** A column's Postgres type, as a batch write casts its bound value. */
export type PgType = "text" | "integer" | "bigint"

/** One column of a table: its name, the field of the row it holds, how it is read and written, and its Postgres type. */
export interface RowColumn<Row> {
  readonly name: string
  readonly field: keyof Row & string
  /** The field's value from the column's value as the driver returns it; throws on one it cannot read. */
  readonly decode: (value: unknown) => unknown
  /** The column's value as bound from the field's (JSON encoded, so a structurally equal value compares equal). */
  readonly encode: (value: unknown) => unknown
  readonly type: PgType
}

/** The columns of rows of type `Row`, each typed by its field. */
export const columnsOf = <Row>() =>
<F extends keyof Row & string>(
  name: string,
  field: F,
  decode: (value: unknown) => Row[F],
  type: PgType,
  encode?: (value: Row[F]) => unknown
): RowColumn<Row> => ({ name, field, decode, encode: (encode ?? same) as (value: unknown) => unknown, type })

const same = (value: unknown): unknown => value

/**
 * One table's row, described once: its columns (in the order a read lists
 * them and a decoded row holds its fields) and its key. The decoder, the
 * column lists of reads and writes and the Postgres types derive from it.
 */
export interface RowSchema<Row> {
  readonly columns: ReadonlyArray<RowColumn<Row>>
  /** The key's column names: what a `CorruptRow` names the row by. */
  readonly key: ReadonlyArray<string>
  /** Every column name, comma separated: the list of a read or a RETURNING. */
  readonly list: string
  /** `list` with every name qualified by `alias`. */
  readonly listOf: (alias: string) => string
  /** A row as read; throws the failing column's error. */
  readonly decode: (row: RawRow) => Row
  /** `decode` for the rows of `table` (see `rowDecoder`): a row that does not decode throws `CorruptRow`. */
  readonly decoder: (table: string) => RowDecoder<Row>
  /** The Postgres type of every column. */
  readonly types: Readonly<Record<string, PgType>>
  /** The named columns, in that order, as versioned writes bind them. */
  readonly writes: (names: ReadonlyArray<string>) => ReadonlyArray<ColumnOf<Row>>
  /** The named columns' values of `row`, by column name, in that order. */
  readonly record: (row: Row, names: ReadonlyArray<string>) => Record<string, unknown>
}

/**
 * A decoder written as one object literal over `columns`, as a hand-written
 * one would be, so a row costs one call per column and nothing more; null
 * where code generation from strings is disallowed (Node's
 * `--disallow-code-generation-from-strings`, a content security policy).
 */
const generatedDecoder = <Row>(columns: ReadonlyArray<RowColumn<Row>>): ((row: RawRow) => Row) | null => {
  const body = `return (row) => ({ ${
    columns.map((column, i) => `${JSON.stringify(column.field)}: decoders[${i}](row[${JSON.stringify(column.name)}])`).join(", ")
  } })`
  try {
    return new Function("decoders", body)(columns.map((column) => column.decode)) as (row: RawRow) => Row
  } catch (error) {
    if (error instanceof EvalError) return null
    throw error
  }
}

/** The same decoder as a loop over the columns, for where none can be generated. */
const loopDecoder = <Row>(columns: ReadonlyArray<RowColumn<Row>>) => (row: RawRow): Row => {
  const decoded: Record<string, unknown> = {}
  for (const column of columns) decoded[column.field] = column.decode(row[column.name])
  return decoded as Row
}

/** The schema of a table whose rows have `columns` and are keyed by `key`. */
export const rowSchema = <Row>(columns: ReadonlyArray<RowColumn<Row>>, key: ReadonlyArray<string>): RowSchema<Row> => {
  const byName = new Map(columns.map((column) => [column.name, column]))
  const columnOf = (name: string): RowColumn<Row> => {
    const column = byName.get(name)
    if (column === undefined) throw new TypeError(`no column ${name}`)
    return column
  }
  for (const name of key) columnOf(name)
  const decode = generatedDecoder(columns) ?? loopDecoder(columns)
  const names = columns.map((column) => column.name)
  return {
    columns,
    key,
    list: names.join(", "),
    listOf: (alias) => names.map((name) => `${alias}.${name}`).join(", "),
    decode,
    decoder: (table) => rowDecoder(table, key, decode),
    types: Object.fromEntries(columns.map((column) => [column.name, column.type])),
    writes: (names) =>
      names.map((name) => {
        const { encode, field } = columnOf(name)
        return { name, value: (row: Row) => encode(row[field]) }
      }),
    record: (row, names) => {
      const out: Record<string, unknown> = {}
      for (const name of names) {
        const { encode, field } = columnOf(name)
        out[name] = encode(row[field])
      }
      return out
    }
  }
}
