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
