import { InvalidInput } from "@connector-store/core"
import { Context, Effect, Layer } from "effect"

/** The seed's table prefix: a database written by the original store opens unchanged. */
export const DEFAULT_TABLE_PREFIX = "kubun_connector_"

/** The names of the store's tables and indexes under one prefix. */
export interface TableNames {
  readonly prefix: string
  readonly syncState: string
  readonly pendingAuth: string
  readonly operation: string
  readonly projectionWatch: string
  readonly relistRun: string
  readonly relistReceipt: string
  readonly relistCandidate: string
  readonly relistBaseline: string
  readonly providerLimits: string
  /** The audit log of operators' actions. */
  readonly operatorAction: string
  /** Which server (or file generation) acknowledged the store's writes, and the last failover or restore noticed. */
  readonly serverHistory: string
  readonly migrations: string
  /** An index name: the seed's own under the default prefix, prefixed otherwise. */
  readonly index: (seedName: string) => string
}

/** What a table prefix may be: lower-case letters, digits and `_`, starting with a letter or `_`, at most 40 characters. */
export const TABLE_PREFIX_PATTERN = /^[a-z_][a-z0-9_]{0,39}$/
const PREFIX_PATTERN = TABLE_PREFIX_PATTERN

/** Why `prefix` cannot be a table prefix, or `undefined` when it can. */
export const tablePrefixProblem = (prefix: unknown): string | undefined =>
  typeof prefix === "string" && PREFIX_PATTERN.test(prefix)
    ? undefined
    : `must be lower-case letters, digits and _, starting with a letter or _, at most 40 characters`

/**
 * The table names under `prefix` (lower-case letters, digits and `_`,
 * starting with a letter or `_`, at most 40 characters). Throws on any other
 * prefix: table names are the one thing that cannot be a query parameter.
 */
export const tableNames = (prefix: string = DEFAULT_TABLE_PREFIX): TableNames => {
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new TypeError(`table prefix must match ${PREFIX_PATTERN}, got ${JSON.stringify(prefix)}`)
  }
  return {
    prefix,
    syncState: `${prefix}sync_state`,
    pendingAuth: `${prefix}pending_auth`,
    operation: `${prefix}operation`,
    projectionWatch: `${prefix}projection_watch`,
    relistRun: `${prefix}relist_run`,
    relistReceipt: `${prefix}relist_receipt`,
    relistCandidate: `${prefix}relist_candidate`,
    relistBaseline: `${prefix}relist_baseline`,
    providerLimits: `${prefix}provider_limits`,
    operatorAction: `${prefix}operator_action`,
    serverHistory: `${prefix}server_history`,
    migrations: `${prefix}schema_migrations`,
    index: (seedName) => prefix === DEFAULT_TABLE_PREFIX ? seedName : `${prefix}${seedName}`
  }
}

/** The table names a SQL store uses. */
export class Tables extends Context.Tag("@connector-store/sql-adapter/Tables")<Tables, TableNames>() {
  /** Tables under `prefix` (the seed's by default); any other prefix fails with `InvalidInput` naming `tablePrefix`. */
  static readonly layer = (prefix?: string): Layer.Layer<Tables, InvalidInput> =>
    Layer.effect(
      Tables,
      Effect.suspend(() => {
        const reason = prefix === undefined ? undefined : tablePrefixProblem(prefix)
        return reason === undefined
          ? Effect.succeed(tableNames(prefix))
          : Effect.fail(new InvalidInput({ method: "layer", field: "tablePrefix", reason }))
      })
    )
}
