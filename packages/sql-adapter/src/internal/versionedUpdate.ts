import type { PersistenceError } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { rawThen, statementThen } from "./queries.js"
import { Effect } from "effect"

/** One column of a row: its name and how a row's value is written to it. */
export interface ColumnOf<Row> {
  readonly name: string
  /** The value as bound to the statement (JSON already encoded), compared with `===`. */
  readonly value: (row: Row) => unknown
}

/**
 * How many rows a write touched, from the client's raw result: `rowCount`
 * on Postgres (`pg`'s result), `changes` on SQLite (`better-sqlite3`'s
 * run result). Anything else is a client this adapter does not know: a
 * defect, never a silently "lost" race.
 */
export const affectedRows = (raw: unknown): number => {
  if (raw !== null && typeof raw === "object") {
    const result = raw as { readonly rowCount?: unknown; readonly changes?: unknown }
    if (typeof result.rowCount === "number") return result.rowCount
    if (typeof result.changes === "number") return result.changes
  }
  throw new TypeError(`the SQL client answered a write with no row count: ${String(raw)}`)
}

/** Statement texts kept per set of changed columns; past this many, texts are built per call. */
export const TEXTS_KEPT = 256

/**
 * What the versioned write of `previous` to `next` sets: the names of the
 * columns that differ (then `version` and `updated_at`), and its values in
 * the order `versionedUpdateText` numbers them (those columns', then the
 * key's of `previous`, then `previous.version`).
 */
export const versionedChanges = <Row extends { readonly version: number; readonly updatedAt: number }>(
  columns: ReadonlyArray<ColumnOf<Row>>,
  key: ReadonlyArray<ColumnOf<Row>>,
  previous: Row,
  next: Row
): { readonly names: ReadonlyArray<string>; readonly values: ReadonlyArray<unknown> } => {
  const names: Array<string> = []
  const values: Array<unknown> = []
  for (const column of columns) {
    const value = column.value(next)
    if (value !== column.value(previous)) {
      names.push(column.name)
      values.push(value)
    }
  }
  names.push("version", "updated_at")
  values.push(next.version, next.updatedAt)
  for (const column of key) values.push(column.value(previous))
  values.push(previous.version)
  return { names, values }
}

/**
 * `UPDATE table SET <names> [FROM <from>] WHERE <key> AND version = …`, its
 * parameters written by `parameter` and numbered from `first`, in
 * `versionedChanges`' order.
 */
export const versionedUpdateText = (
  tableName: string,
  names: ReadonlyArray<string>,
  key: ReadonlyArray<{ readonly name: string }>,
  parameter: (n: number) => string,
  first = 1,
  from?: string
): string => {
  const set = names.map((name, i) => `${name} = ${parameter(first + i)}`).join(", ")
  const where = [...key.map((column) => column.name), "version"]
    .map((name, i) => `${name} = ${parameter(first + names.length + i)}`)
    .join(" AND ")
  return `UPDATE ${tableName} SET ${set}${from === undefined ? "" : ` FROM ${from}`} WHERE ${where}`
}

/**
 * The versioned write of a table, writing only what a decision changed:
 * `UPDATE table SET <columns where next differs from previous>, version,
 * updated_at WHERE <key of previous> AND version = <previous.version>`, one
 * statement with no RETURNING (the row count says whether it matched).
 * Outside a transaction it is a compare-and-set of its own. Answers the
 * statement's text and parameters; the text for each set of changed
 * columns is built once and kept.
 */
export const versionedUpdateStatement = <Row extends { readonly version: number; readonly updatedAt: number }>(
  sql: SqlClient,
  tableName: string,
  columns: ReadonlyArray<ColumnOf<Row>>,
  key: ReadonlyArray<ColumnOf<Row>>
) => {
  const parameter = sql.onDialectOrElse({ pg: () => (n: number) => `$${n}`, orElse: () => (_: number) => "?" })
  const texts = new Map<string, string>()
  const textFor = (names: ReadonlyArray<string>): string => {
    const signature = names.join(",")
    const kept = texts.get(signature)
    if (kept !== undefined) return kept
    const text = versionedUpdateText(tableName, names, key, parameter)
    if (texts.size < TEXTS_KEPT) texts.set(signature, text)
    return text
  }
  return (previous: Row, next: Row): readonly [text: string, params: ReadonlyArray<unknown>] => {
    const { names, values } = versionedChanges(columns, key, previous, next)
    return [textFor(names), values]
  }
}

/** `versionedUpdateStatement` run on the client: true when the row matched (its version was still `previous.version`). */
export const versionedUpdate = <Row extends { readonly version: number; readonly updatedAt: number }>(
  sql: SqlClient,
  operation: string,
  tableName: string,
  columns: ReadonlyArray<ColumnOf<Row>>,
  key: ReadonlyArray<ColumnOf<Row>>
) => {
  const statement = versionedUpdateStatement(sql, tableName, columns, key)
  return (previous: Row, next: Row): Effect.Effect<boolean, PersistenceError> => {
    const [text, values] = statement(previous, next)
    return rawThen(operation, sql.unsafe(text, values), (raw) => affectedRows(raw) > 0)
  }
}

/**
 * `versionedUpdate` of many rows. On Postgres one statement writes them all:
 * the rows travel as one JSON parameter (`jsonb_to_recordset`, each column
 * with its type from `types`), every changed column of any row is set from
 * it (a row that did not change a column writes its own value back), and
 * each row's version guards its own write; the keys it returns say which
 * matched. Elsewhere (SQLite, in-process) one `versionedUpdate` per row.
 * Answers, in order, whether each write matched.
 */
export const versionedUpdateAll = <Row extends { readonly version: number; readonly updatedAt: number }>(
  sql: SqlClient,
  operation: string,
  tableName: string,
  columns: ReadonlyArray<ColumnOf<Row>>,
  key: ReadonlyArray<ColumnOf<Row>>,
  types: Readonly<Record<string, string>>
) => {
  const single = versionedUpdate(sql, operation, tableName, columns, key)
  const typeOf = (name: string): string => {
    const type = types[name]
    if (type === undefined) throw new TypeError(`${tableName}.${name} has no type for a batch write`)
    return type
  }
  const keyOf = (values: ReadonlyArray<unknown>) => JSON.stringify(values)
  const batched = (changes: ReadonlyArray<readonly [previous: Row, next: Row]>): Effect.Effect<ReadonlyArray<boolean>, PersistenceError> => {
    const changedColumns = columns.filter((column) => changes.some(([previous, next]) => column.value(next) !== column.value(previous)))
    const names = [...changedColumns.map((column) => column.name), "version", "updated_at"]
    const records = changes.map(([previous, next]) => {
      const record: Record<string, unknown> = { expected_version: previous.version, version: next.version, updated_at: next.updatedAt }
      for (const column of key) record[column.name] = column.value(previous)
      for (const column of changedColumns) record[column.name] = column.value(next)
      return record
    })
    const recordType = [
      ...key.map((column) => `${column.name} ${typeOf(column.name)}`),
      `expected_version ${typeOf("version")}`,
      ...names.map((name) => `${name} ${typeOf(name)}`)
    ].join(", ")
    const text = `UPDATE ${tableName} AS t SET ${names.map((name) => `${name} = v.${name}`).join(", ")}
      FROM jsonb_to_recordset($1::jsonb) AS v(${recordType})
      WHERE ${key.map((column) => `t.${column.name} = v.${column.name}`).join(" AND ")} AND t.version = v.expected_version
      RETURNING ${key.map((column) => `t.${column.name}`).join(", ")}`
    return statementThen(operation, sql.unsafe<Record<string, unknown>>(text, [JSON.stringify(records)]), (rows) => {
      const matched = new Set(rows.map((row) => keyOf(key.map((column) => row[column.name]))))
      return changes.map(([previous]) => matched.has(keyOf(key.map((column) => column.value(previous)))))
    })
  }
  return (changes: ReadonlyArray<readonly [previous: Row, next: Row]>): Effect.Effect<ReadonlyArray<boolean>, PersistenceError> =>
    changes.length === 0
      ? Effect.succeed([])
      : sql.onDialectOrElse({
        pg: () => batched(changes),
        orElse: () => Effect.forEach(changes, ([previous, next]) => single(previous, next))
      })
}
