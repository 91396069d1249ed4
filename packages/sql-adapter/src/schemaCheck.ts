import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, Effect } from "effect"
import { type Migration, migrations } from "./migrations.js"
import type { TableNames } from "./Tables.js"
export { StoreSchemaTooNew } from "./StoreSchemaTooNew.js"

/**
 * A store opened read-only found its schema not ready, and wrote nothing:
 * no table of the store exists under `tablePrefix` (`tablesFound` false: a
 * wrong prefix, or a database nothing was migrated on), or some migrations
 * this version needs were never applied (`missing`; running `migrate`
 * applies them).
 */
export class StoreSchemaNotReady extends Data.TaggedError("StoreSchemaNotReady")<{
  readonly tablePrefix: string
  readonly tablesFound: boolean
  readonly missing: ReadonlyArray<{ readonly id: number; readonly name: string }>
  readonly method?: string | undefined
}> {
  override get message(): string {
    const where = this.method === undefined ? "" : `${this.method}: `
    if (!this.tablesFound) return `${where}no connector-store tables with prefix ${this.tablePrefix}`
    const steps = this.missing.map((step) => `${step.id} (${step.name})`).join(", ")
    return `${where}the schema under prefix ${this.tablePrefix} lacks migration${this.missing.length === 1 ? "" : "s"} ${steps}; ` +
      "migrating the store applies them"
  }
}

/** The store's tables (not the ledger), by their names under `t`. */
const storeTables = (t: TableNames): ReadonlyArray<string> => [
  t.syncState,
  t.pendingAuth,
  t.operation,
  t.projectionWatch,
  t.relistRun,
  t.relistReceipt,
  t.relistCandidate
]

/** The names among `names` that exist as tables (on Postgres, as the search path resolves them). */
const existingTables = (sql: SqlClient, names: ReadonlyArray<string>): Effect.Effect<ReadonlySet<string>, SqlError> =>
  Effect.map(
    sql.onDialectOrElse({
      pg: () =>
        Effect.forEach(names, (name) =>
          Effect.map(sql<{ found: unknown }>`SELECT to_regclass(${name}::text) IS NOT NULL AS found`, (rows) =>
            rows[0]?.found === true ? [name] : [])),
      orElse: () =>
        Effect.map(
          sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ${sql.in(names)}`,
          (rows) => [rows.map((row) => row.name)]
        )
    }),
    (found) => new Set(found.flat())
  )

/**
 * Checks, with reads only, that every migration of `steps` has been applied
 * under `t`: fails with `StoreSchemaNotReady` otherwise. A schema newer than
 * `steps` (migrations this version does not know) passes: reading it is
 * safe, and only writing opens refuse it (see `migrate`).
 */
export const checkSchema = (
  sql: SqlClient,
  t: TableNames,
  steps: ReadonlyArray<Migration> = migrations
): Effect.Effect<void, SqlError | StoreSchemaNotReady> =>
  Effect.gen(function*() {
    const found = yield* existingTables(sql, [t.migrations, ...storeTables(t)])
    const tablesFound = storeTables(t).some((name) => found.has(name))
    const applied = found.has(t.migrations)
      ? new Set((yield* sql<{ id: unknown }>`SELECT id FROM ${sql(t.migrations)}`).map((row) => Number(row.id)))
      : new Set<number>()
    const missing = steps.filter((step) => !applied.has(step.id)).map((step) => ({ id: step.id, name: step.name }))
    if (missing.length === 0) return
    return yield* new StoreSchemaNotReady({ tablePrefix: t.prefix, tablesFound: tablesFound || applied.size > 0, missing })
  })
