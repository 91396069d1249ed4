import * as Options from "@effect/cli/Options"
import * as Config from "effect/Config"

/** What `--no-prepared-statements` says, for every command that opens a store. */
const NO_PREPARED_STATEMENTS = "Open the store with prepareStatements: false, its Postgres statements sent unnamed " +
  "(for PgBouncer in transaction mode before 1.21)"

/** `--no-prepared-statements`: the store's Postgres statements are never named prepared statements. */
export const noPreparedStatements = Options.boolean("no-prepared-statements").pipe(Options.withDescription(NO_PREPARED_STATEMENTS))

/** The environment variable `--database` falls back to. */
export const DATABASE_ENV = "CONNECTOR_STORE_DATABASE"

/** How long a command's work on the store may take when `--timeout` is not given. */
export const DEFAULT_TIMEOUT = "30s"

/** The options every command that opens the store takes. */
export const databaseOptions = {
  database: Options.text("database").pipe(
    Options.withAlias("d"),
    Options.withFallbackConfig(Config.string(DATABASE_ENV)),
    Options.withDescription(`A SQLite file path, a file: URI or a postgres:// URL (default: $${DATABASE_ENV})`)
  ),
  tablePrefix: Options.text("table-prefix").pipe(
    Options.optional,
    Options.withDescription("The store's table prefix (default: kubun_connector_)")
  ),
  connectTimeout: Options.integer("connect-timeout").pipe(
    Options.withDefault(10),
    Options.withDescription("Seconds to wait for the database to answer")
  ),
  timeout: Options.text("timeout").pipe(
    Options.withDefault(DEFAULT_TIMEOUT),
    Options.withDescription(
      "The longest the command's work on the store may take once connected, lock waits included: 30s, 2m, 500ms"
    )
  ),
  noPreparedStatements
} as const

/** `--json`: print JSON instead of a table. */
export const json = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of a table"))

/** The paging options of a list. */
export const paging = {
  limit: Options.integer("limit").pipe(Options.withDefault(50), Options.withDescription("Rows per page (1-500)")),
  cursor: Options.text("cursor").pipe(
    Options.optional,
    Options.withDescription("Continue after the page that printed this cursor")
  )
} as const

/** A repeatable option whose values may also be comma-separated (`--state dead,reconcile_only`). */
export const listOption = (name: string, description: string) =>
  Options.text(name).pipe(Options.repeated, Options.withDescription(`${description} (repeat or comma-separate)`))

/** The values of a `listOption`, split on commas; `undefined` when none were given. */
export const listValues = (values: ReadonlyArray<string>): ReadonlyArray<string> | undefined => {
  const split = values.flatMap((value) => value.split(",")).map((value) => value.trim()).filter((value) => value.length > 0)
  return split.length === 0 ? undefined : split
}
