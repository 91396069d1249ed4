import {
  ConnectorStore,
  fromPromiseReaders,
  makePromiseStore,
  OperationPolicy,
  type OperationPolicyOverrides,
  OperationRepository,
  OperatorRepository,
  PendingAuthRepository,
  PersistenceError,
  RelistRepository,
  type PromiseConnectorStore,
  type PromiseWinnerReaders,
  StoreSnapshot,
  SyncStateRepository,
  Transactor,
  WatchRepository,
  WinnerReader,
  type WinnerReaders
} from "@connector-store/core"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Context, Duration, Effect, Exit, Layer, ManagedRuntime, Redacted, Runtime } from "effect"
import { migrate } from "./migrations.js"
import { makeSqlOperationRepository } from "./SqlOperationRepository.js"
import { makeSqlOperatorRepository } from "./SqlOperatorRepository.js"
import { makeSqlRelistRepository } from "./SqlRelistRepository.js"
import { makeSqlTransactor } from "./SqlTransactor.js"
import { makeSqlWatchRepository } from "./SqlWatchRepository.js"
import { makeSqlSyncStateRepository } from "./SqlSyncStateRepository.js"
import { makeSqlPendingAuthRepository } from "./SqlPendingAuthRepository.js"
import { Tables } from "./Tables.js"

/** Every port a SQL store provides, except the winner reader. */
export type SqlPorts = Transactor | WatchRepository | OperationRepository | StoreSnapshot | SyncStateRepository | PendingAuthRepository
  | RelistRepository | OperatorRepository

/**
 * The repository ports on the ambient `SqlClient`, after bringing the schema
 * up to date (migration failures fail the layer).
 */
export const layerPorts: Layer.Layer<SqlPorts, PersistenceError, SqlClient | Tables> = Layer.effectContext(
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const tables = yield* Tables
    yield* migrate(sql, tables).pipe(PersistenceError.refail("migrate"))
    const names = {
      sync_state: tables.syncState,
      pending_auth: tables.pendingAuth,
      operation: tables.operation,
      projection_watch: tables.projectionWatch,
      relist_run: tables.relistRun,
      relist_receipt: tables.relistReceipt,
      relist_candidate: tables.relistCandidate
    }
    return Context.make(Transactor, makeSqlTransactor(sql, tables.migrations)).pipe(
      Context.add(WatchRepository, makeSqlWatchRepository(sql, tables)),
      Context.add(OperationRepository, makeSqlOperationRepository(sql, tables)),
      Context.add(SyncStateRepository, makeSqlSyncStateRepository(sql, tables)),
      Context.add(PendingAuthRepository, makeSqlPendingAuthRepository(sql, tables)),
      Context.add(RelistRepository, makeSqlRelistRepository(sql, tables)),
      Context.add(OperatorRepository, makeSqlOperatorRepository(sql, tables)),
      Context.add(StoreSnapshot, {
        snapshot: Effect.gen(function*() {
          const out: Record<string, ReadonlyArray<unknown>> = {}
          for (const [name, table] of Object.entries(names)) {
            // Ordered by every column, so equal tables compare equal.
            out[name] = yield* sql.unsafe(`SELECT * FROM ${table} ORDER BY 1, 2, 3`)
          }
          return out
        }).pipe(PersistenceError.refail("snapshot"))
      })
    )
  })
)

/** Where a SQL store lives. */
export interface SqlConnection {
  /** A SQLite file path, `:memory:`, or a `postgres://` / `postgresql://` URL. */
  readonly url: string
  /** The table prefix; the seed's (`kubun_connector_`) by default. */
  readonly tablePrefix?: string | undefined
  /** Postgres pool size (default 10). */
  readonly maxConnections?: number | undefined
  /** How long SQLite waits for another process's write lock (default 10 s). */
  readonly busyTimeoutMs?: number | undefined
}

/** True when `url` names a Postgres server rather than a SQLite file. */
export const isPostgresUrl = (url: string): boolean => /^postgres(ql)?:\/\//.test(url)

/**
 * The `SqlClient` for `connection`. SQLite gets WAL (the client's default)
 * and a busy timeout, so several processes can share one file.
 */
export const layerClient = (connection: SqlConnection): Layer.Layer<SqlClient, PersistenceError> => {
  const client: Layer.Layer<SqlClient, unknown> = isPostgresUrl(connection.url)
    ? PgClient.layer({
      url: Redacted.make(connection.url),
      maxConnections: connection.maxConnections ?? 10,
      idleTimeout: Duration.seconds(30)
    })
    : Layer.effectDiscard(Effect.flatMap(SqlClient, (sql) =>
      sql.unsafe(`PRAGMA busy_timeout = ${Math.trunc(connection.busyTimeoutMs ?? 10_000)}`)
    )).pipe(Layer.provideMerge(SqliteClient.layer({ filename: connection.url })))
  // The SQLite driver throws (a defect) when the file cannot be opened.
  return Layer.catchAllCause(client, (cause) =>
    Layer.fail(new PersistenceError({ operation: "connect", cause: Cause.squash(cause) })))
}

/**
 * The whole store on SQL, for the Effect API: `ConnectorStore`, its ports
 * and the `SqlClient`, with winners read by `readers`.
 */
export const layer = (
  connection: SqlConnection,
  readers: WinnerReaders = {}
): Layer.Layer<ConnectorStore | SqlPorts | WinnerReader | SqlClient, PersistenceError> =>
  ConnectorStore.layer.pipe(
    Layer.provideMerge(layerPorts),
    Layer.provideMerge(Layer.succeed(WinnerReader, readers)),
    Layer.provideMerge(Tables.layer(connection.tablePrefix)),
    Layer.provideMerge(layerClient(connection))
  )

/**
 * What a SQL store hands winner readers: a way to query inside the very
 * transaction (and lock) the transition runs in.
 */
export interface SqlTransaction {
  readonly dialect: "sqlite" | "pg"
  /** Runs `text` with `$1`-style (Postgres) or `?` (SQLite) parameters. */
  readonly query: <Row = Record<string, unknown>>(text: string, params?: ReadonlyArray<unknown>) => Promise<ReadonlyArray<Row>>
}

/** The transaction handle of the calling fiber. */
const currentTransaction = (sql: SqlClient): Effect.Effect<SqlTransaction> =>
  Effect.map(Effect.runtime<never>(), (runtime) => ({
    dialect: sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const }),
    query: <Row>(text: string, params: ReadonlyArray<unknown> = []) =>
      Runtime.runPromise(runtime)(sql.unsafe<Row & object>(text, params)) as Promise<ReadonlyArray<Row>>
  }))

/** The options of `openConnectorStore`. */
export interface OpenConnectorStoreOptions extends SqlConnection, PromiseWinnerReaders<SqlTransaction> {
  /** The store's clock; the system clock when absent. */
  readonly now?: (() => number) | undefined
  /** Lease, attempt and backoff settings of write-back operations, over the defaults. */
  readonly operationPolicy?: OperationPolicyOverrides | undefined
}

/**
 * Opens a store on SQLite or Postgres with the Promise API, migrating the
 * schema first. Rejects with a `PersistenceError` when the database cannot be
 * reached or migrated.
 */
export const openConnectorStore = async (
  options: OpenConnectorStoreOptions
): Promise<PromiseConnectorStore<SqlTransaction>> => {
  let handle: Effect.Effect<SqlTransaction> = Effect.dieMessage("store not open")
  const handleOf = Effect.suspend(() => handle)
  const runtime = ManagedRuntime.make(
    layer(options, fromPromiseReaders(options, handleOf)).pipe(
      Layer.provide(OperationPolicy.layer(options.operationPolicy)),
      Layer.tap((context) => Effect.sync(() => {
        handle = currentTransaction(Context.get(context, SqlClient))
      }))
    )
  )
  const opened = await Effect.runPromiseExit(runtime.runtimeEffect)
  if (Exit.isFailure(opened)) {
    await runtime.dispose()
    throw Cause.squash(opened.cause)
  }
  return makePromiseStore({ runtime, handle: handleOf, now: options.now })
}
