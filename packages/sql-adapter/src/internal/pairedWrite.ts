import type { ConnectorOperation, PairedWrite, ProjectionWatch, WatchIdentity, WatchWrite } from "@connector-store/core"
import type { Compiled } from "./directStatements.js"
import type { RawRow } from "./columns.js"
import { type ColumnOf, TEXTS_KEPT, versionedChanges, versionedUpdateText } from "./versionedUpdate.js"

const parameter = (n: number) => `$${n}`

/** The columns of a table's versioned writes: those a transition may change, and the key. */
interface Versioned<Row> {
  readonly columns: ReadonlyArray<ColumnOf<Row>>
  readonly key: ReadonlyArray<ColumnOf<Row>>
}

/**
 * Postgres's paired write (`OperationRepository.updateWithWatch`) as one
 * statement of two data-modifying CTEs, each the very guarded write the
 * ports make on their own:
 *
 * ```
 * WITH operation_write AS (UPDATE <operation> SET … WHERE <key> AND version = <read> RETURNING 1),
 *   watch_write AS (INSERT INTO <watch> (…) SELECT … FROM operation_write ON CONFLICT DO NOTHING RETURNING 1
 *     | UPDATE <watch> SET … FROM operation_write WHERE <identity> AND version = <read> RETURNING 1
 *     | DELETE FROM <watch> USING operation_write WHERE <identity> AND version = <read> RETURNING 1)
 * SELECT EXISTS (SELECT FROM operation_write) AS operation, EXISTS (SELECT FROM watch_write) AS watch
 * ```
 *
 * The watch's write takes its one row from the operation's: it writes
 * nothing unless the operation's guard matched, so `operation` false means
 * that guard lost (and nothing was written), `watch` false with `operation`
 * true that the watch's did. Texts are kept per set of changed columns.
 */
export const pairedWriteStatement = (
  tables: { readonly operation: string; readonly watch: string },
  operation: Versioned<ConnectorOperation>,
  watch: {
    readonly columns: ReadonlyArray<ColumnOf<ProjectionWatch>>
    readonly key: ReadonlyArray<ColumnOf<WatchIdentity>>
    /** Every column of a row, as an insert names them. */
    readonly row: ReadonlyArray<ColumnOf<ProjectionWatch>>
  }
) => {
  const texts = new Map<string, string>()
  const insertNames = watch.row.map((column) => column.name).join(", ")
  const textOf = (signature: string, build: () => string): string => {
    const kept = texts.get(signature)
    if (kept !== undefined) return kept
    const text = build()
    if (texts.size < TEXTS_KEPT) texts.set(signature, text)
    return text
  }
  /** The watch's write: the columns it sets (an update's), its values, and its text with parameters from `first`. */
  const watchPart = (write: WatchWrite) => {
    switch (write.kind) {
      case "insert":
        return {
          names: [],
          values: watch.row.map((column) => column.value(write.row)),
          text: (first: number) =>
            `INSERT INTO ${tables.watch} (${insertNames})
      SELECT ${watch.row.map((_, i) => parameter(first + i)).join(", ")} FROM operation_write ON CONFLICT DO NOTHING RETURNING 1`
        }
      case "update": {
        const { names, values } = versionedChanges<ProjectionWatch>(watch.columns, watch.key, write.previous, write.next)
        return {
          names,
          values,
          text: (first: number) => `${versionedUpdateText(tables.watch, names, watch.key, parameter, first, "operation_write")} RETURNING 1`
        }
      }
      case "delete":
        return {
          names: [],
          values: [...watch.key.map((column) => column.value(write.identity)), write.version],
          text: (first: number) =>
            `DELETE FROM ${tables.watch} USING operation_write WHERE ${
              [...watch.key.map((column) => column.name), "version"].map((name, i) => `${name} = ${parameter(first + i)}`).join(" AND ")
            } RETURNING 1`
        }
    }
  }
  return (previous: ConnectorOperation, next: ConnectorOperation, write: WatchWrite): Compiled => {
    const op = versionedChanges(operation.columns, operation.key, previous, next)
    const part = watchPart(write)
    const text = textOf(`${op.names.join(",")}|${write.kind}|${part.names.join(",")}`, () =>
      `WITH operation_write AS (
      ${versionedUpdateText(tables.operation, op.names, operation.key, parameter)} RETURNING 1
    ), watch_write AS (
      ${part.text(op.values.length + 1)}
    )
    SELECT EXISTS (SELECT FROM operation_write) AS operation, EXISTS (SELECT FROM watch_write) AS watch`)
    return [text, [...op.values, ...part.values]]
  }
}

/** What the paired write's one row says (see `pairedWriteStatement`). */
export const pairedWriteOf = (rows: ReadonlyArray<RawRow>): PairedWrite => {
  const row = rows[0]
  if (row === undefined || typeof row["operation"] !== "boolean" || typeof row["watch"] !== "boolean") {
    throw new TypeError("the paired write answered no (operation, watch) row")
  }
  return !row["operation"] ? "operation-lost" : row["watch"] ? "written" : "watch-lost"
}
