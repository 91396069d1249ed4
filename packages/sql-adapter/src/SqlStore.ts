import {
  ConnectorStore,
  InvalidInput,
  OperationPolicy,
  OperationRepository,
  OperatorRepository,
  PendingAuthRepository,
  PersistenceError,
  ProviderLimitEnforcement,
  ProviderLimitRepository,
  RelistRepository,
  ServerHistory,
  StoreSnapshot,
  SyncStateRepository,
  Transactor,
  WatchRepository,
  WinnerReader,
  type WinnerReaders
} from "@connector-store/core"
import {
  DirectDatabase,
  type DirectTransactionOf,
  fieldOf,
  fromPromiseReaders,
  LaneDatabase,
  WorkSignal,
  nameMethod,
  openOptionsProblem,
  optional,
  Rules,
  makePromiseStore,
  winnerReadersProblem,
  CallBounds
} from "@connector-store/core/adapter"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as fs from "node:fs"
import * as PgConnection from "./PgConnection.js"
import * as SqliteConnection from "./SqliteConnection.js"
import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Context, Effect, Exit, Layer, ManagedRuntime, Option, Runtime } from "effect"
import { migrate } from "./migrations.js"
import { databaseUrlProblem, parseDatabaseUrl } from "./databaseUrl.js"
import { checkSchema, StoreSchemaNotReady, type StoreSchemaTooNew } from "./schemaCheck.js"
import { makeSqlOperationRepository } from "./SqlOperationRepository.js"
import { makeSqlOperatorRepository } from "./SqlOperatorRepository.js"
import { makeSqlRelistRepository } from "./SqlRelistRepository.js"
import { makeSqlProviderLimitRepository } from "./SqlProviderLimitRepository.js"
import { makeSqlTransactor } from "./SqlTransactor.js"
import { makeSqliteDirect } from "./SqliteDirect.js"
import { makePgLane } from "./PgLane.js"
import { makePgWorkSignal, workChannelOf } from "./PgWorkSignal.js"
import { makeSqlWatchRepository } from "./SqlWatchRepository.js"
import { makeSqlSyncStateRepository } from "./SqlSyncStateRepository.js"
import { makeSqlPendingAuthRepository } from "./SqlPendingAuthRepository.js"
import { defaultGenerationFile, type IdentityCheckedPool, makeSqlServerHistory, type ReplicationNotSynchronous, requireSynchronousReplication } from "./ServerHistory.js"
import { classified, classifiedPort } from "./SqlFailure.js"
import { tablePrefixProblem, Tables } from "./Tables.js"
import { clockSourceOf, makeDatabaseClock } from "./DatabaseClock.js"
import type { OpenConnectorStoreOptions, SqlConnection, SqlConnectorStore, SqlTransaction } from "./connection.js"
import {
  CONNECTION_OPTIONS,
  connectionOf,
  connectionOptionsProblem,
  DEFAULT_APPLICATION_NAME,
  OPEN_OPTIONS,
  unknownConnectionOption
} from "./openChecks.js"

/** Every port a SQL store provides, except the winner reader. */
export type SqlPorts = Transactor | WatchRepository | OperationRepository | StoreSnapshot | SyncStateRepository | PendingAuthRepository
  | RelistRepository | OperatorRepository | ProviderLimitRepository

/**
 * The repository ports on the ambient `SqlClient`, after bringing the schema
 * up to date (migration failures fail the layer; a schema a newer version
 * migrated fails it with `StoreSchemaTooNew`).
 */
export const layerPorts: Layer.Layer<SqlPorts, PersistenceError | StoreSchemaTooNew, SqlClient | Tables> = Layer.suspend(() =>
  portsLayer(false, {}) as Layer.Layer<SqlPorts, PersistenceError | StoreSchemaTooNew, SqlClient | Tables>
)

/**
 * The repository ports on the ambient `SqlClient` of a store opened
 * read-only: the schema is checked, with reads only, instead of migrated
 * (`StoreSchemaNotReady` says what is missing), and nothing is created.
 */
export const layerPortsReadOnly: Layer.Layer<SqlPorts, PersistenceError | StoreSchemaNotReady, SqlClient | Tables> = Layer
  .suspend(() => portsLayer(true, {}) as Layer.Layer<SqlPorts, PersistenceError | StoreSchemaNotReady, SqlClient | Tables>)

/** What the ports layer keeps its server history with (see `ServerHistoryOptions`). */
interface HistorySettings {
  readonly failoverDoubtMs?: number | undefined
  readonly requireSynchronousReplication?: boolean | undefined
  /** The SQLite generation's file, resolved; undefined where the store does not know its file (the app's own client). */
  readonly generationFile?: string | false | undefined
  readonly serverCheckMs?: number | undefined
  readonly now?: (() => number) | undefined
}

/**
 * A transaction whose COMMIT or ROLLBACK failed (its connection died: a failover, a restart) ends as a `SqlError`
 * defect; at open it fails as a classified `PersistenceError`, as the Transactor types it for every call.
 */
const typedTransactionEnd = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | PersistenceError, R> =>
  Effect.catchSomeDefect(effect, (defect) =>
    defect instanceof SqlError ? Option.some(Effect.fail(classified(new PersistenceError({ operation, cause: defect })))) : Option.none())

const portsLayer = (
  readOnly: boolean,
  history: HistorySettings
): Layer.Layer<SqlPorts, PersistenceError | StoreSchemaNotReady | StoreSchemaTooNew | ReplicationNotSynchronous, SqlClient | Tables> =>
  Layer.scopedContext(Effect.gen(function*() {
    const sql = yield* SqlClient
    const tables = yield* Tables
    const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
    if (history.requireSynchronousReplication === true) yield* requireSynchronousReplication(sql, dialect)
    if (readOnly) {
      yield* checkSchema(sql, tables).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(classified(new PersistenceError({ operation: "checkSchema", cause: error })))),
        typedTransactionEnd("checkSchema")
      )
    } else {
      yield* migrate(sql, tables).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(classified(new PersistenceError({ operation: "migrate", cause: error })))),
        typedTransactionEnd("migrate")
      )
    }
    const names = {
      sync_state: tables.syncState,
      pending_auth: tables.pendingAuth,
      operation: tables.operation,
      projection_watch: tables.projectionWatch,
      relist_run: tables.relistRun,
      relist_receipt: tables.relistReceipt,
      relist_candidate: tables.relistCandidate,
      relist_baseline: tables.relistBaseline,
      provider_limits: tables.providerLimits,
      operator_action: tables.operatorAction
    }
    const pgParts = PgConnection.laneParts(sql)
    const serverHistory = yield* makeSqlServerHistory(sql, tables, dialect, {
      failoverDoubtMs: history.failoverDoubtMs,
      checkEveryMs: history.serverCheckMs,
      generationFile: history.generationFile ?? false,
      readOnly,
      now: history.now ?? Date.now,
      connectTimeoutMs: pgParts?.pool.options.connectionTimeoutMillis
    }, pgParts?.pool as IdentityCheckedPool | undefined).pipe(Effect.mapError(classified))
    const watches = classifiedPort(makeSqlWatchRepository(sql, tables))
    const operations = classifiedPort(makeSqlOperationRepository(sql, tables))
    const ports = Context.make(Transactor, classifiedPort(makeSqlTransactor(sql, tables.migrations))).pipe(
      Context.add(WatchRepository, watches),
      Context.add(OperationRepository, operations),
      Context.add(SyncStateRepository, classifiedPort(makeSqlSyncStateRepository(sql, tables))),
      Context.add(PendingAuthRepository, classifiedPort(makeSqlPendingAuthRepository(sql, tables))),
      Context.add(RelistRepository, classifiedPort(makeSqlRelistRepository(sql, tables))),
      Context.add(OperatorRepository, classifiedPort(makeSqlOperatorRepository(sql, tables))),
      Context.add(ProviderLimitRepository, classifiedPort(makeSqlProviderLimitRepository(sql, tables))),
      Context.add(ServerHistory, serverHistory),
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
    // On the project's SQLite client, hot transitions also run synchronously
    // on the connection (see SqliteDirect); on its Postgres client, the
    // Promise API's run straight on the pool (see PgLane). Both services are
    // optional, read by the store with serviceOption, so they are not in the
    // layer's type.
    // Commits are notices of work (see WorkSignal): on SQLite the connection's own and, polled
    // while a wait is pending, other connections' to the file; the tables' notifications on Postgres.
    const connection = SqliteConnection.connectionOf(sql)
    if (connection !== undefined) {
      return Context.add(ports, DirectDatabase, makeSqliteDirect(sql, connection, tables, { watches, operations })).pipe(
        Context.add(WorkSignal, connection.work)
      ) as Context.Context<SqlPorts>
    }
    const pg = pgParts
    if (pg === undefined) return ports
    // Open: from now on no client stays checked out past the call bound.
    pg.holds.enforce()
    const work = makePgWorkSignal({
      url: pg.pool.options.connectionString ?? "",
      applicationName: pg.pool.options.application_name ?? "connector-store",
      connectTimeoutMs: pg.pool.options.connectionTimeoutMillis ?? PgConnection.CONNECT_TIMEOUT_MS
    }, workChannelOf(tables))
    yield* Effect.addFinalizer(() => work.close)
    return Context.add(ports, LaneDatabase, makePgLane(sql, pg, tables, { watches, operations })).pipe(
      Context.add(WorkSignal, work.signal)
    ) as Context.Context<SqlPorts>
  }))

/** True when `url` names a Postgres server rather than a SQLite file. */
export const isPostgresUrl = (url: string): boolean => /^postgres(ql)?:\/\//.test(url)

/** True when a store on `connection` opens read-only: `readOnly`, or a `file:` URI with `mode=ro`. */
export const isReadOnlyConnection = (connection: Pick<SqlConnection, "url" | "readOnly">): boolean => {
  if (connection.readOnly === true) return true
  const target = parseDatabaseUrl(connection.url)
  return typeof target !== "string" && target.kind === "sqlite" && target.mode === "ro"
}

/**
 * The `SqlClient` for `connection`. SQLite gets the project's own client
 * (see `SqliteConnection`): WAL, a busy timeout for other processes on the
 * file, and one connection shared by every store of this process on it.
 * The stock `@effect/sql-sqlite-node` client still works, provided to
 * `layerPorts` by the caller (see `layerStockSqliteClient`).
 */
export const layerClient = (connection: SqlConnection): Layer.Layer<SqlClient, PersistenceError> => {
  // The Effect layer's error channel is PersistenceError; the bad option travels as its cause.
  const problem = unknownConnectionOption("layerClient", connection) ?? connectionOptionsProblem("layerClient", connection)
  if (problem !== undefined) return Layer.fail(new PersistenceError({ operation: "connect", cause: problem }))
  const target = parseDatabaseUrl(connection.url)
  if (typeof target === "string") {
    return Layer.fail(new PersistenceError({
      operation: "connect",
      cause: new InvalidInput({ method: "layerClient", field: "url", reason: target })
    }))
  }
  const readOnly = isReadOnlyConnection(connection)
  if (readOnly && target.kind === "sqlite" && (target.mode === "memory" || !fs.existsSync(target.filename))) {
    return Layer.fail(new PersistenceError({
      operation: "connect",
      reason: "database-missing",
      cause: new Error(target.mode === "memory" ? "an in-memory database cannot be opened read-only" : `no such database: ${target.filename}`)
    }))
  }
  const client: Layer.Layer<SqlClient, unknown> = target.kind === "postgres"
    ? PgConnection.layer({
      url: target.url,
      maxConnections: connection.maxConnections ?? 10,
      applicationName: connection.applicationName ?? DEFAULT_APPLICATION_NAME,
      readOnly,
      connectTimeoutMs: connection.connectTimeoutMs,
      statementTimeoutMs: connection.statementTimeoutMs,
      lockTimeoutMs: connection.lockTimeoutMs,
      callTimeoutMs: connection.callTimeoutMs,
      prepareStatements: connection.prepareStatements
    })
    : SqliteConnection.layer({
      filename: target.filename,
      busyTimeoutMs: connection.busyTimeoutMs,
      readOnly,
      fileMustExist: target.mode === "rw",
      checkIntegrity: connection.checkIntegrityOnOpen
    })
  // The SQLite driver throws (a defect) when the file cannot be opened.
  return Layer.catchAllCause(client, (cause) =>
    Layer.fail(classified(new PersistenceError({ operation: "connect", cause: Cause.squash(cause) }))))
}

/**
 * The stock `@effect/sql-sqlite-node` client on `filename`, with the busy
 * timeout the store expects (WAL is its default): what a user who brings
 * that client provides to `layerPorts`. Its transactions begin deferred, so
 * the store takes the write lock as their first statement (`takeWriteLock`).
 */
export const layerStockSqliteClient = (
  filename: string,
  busyTimeoutMs = 10_000
): Layer.Layer<SqlClient | SqliteClient.SqliteClient, PersistenceError> =>
  Layer.effectDiscard(Effect.flatMap(SqlClient, (sql) => sql.unsafe(`PRAGMA busy_timeout = ${Math.trunc(busyTimeoutMs)}`)))
    .pipe(
      Layer.provideMerge(SqliteClient.layer({ filename })),
      Layer.catchAllCause((cause) =>
        Layer.fail(classified(new PersistenceError({ operation: "connect", cause: Cause.squash(cause) })))
      )
    )

/** The checks of the SQL connection options (the shared ones are in `openOptionsProblem`). */
const connectionChecks = (options: unknown) => [
  ["options.url", fieldOf(options, "url"), Rules.id] as const,
  ["options.url", fieldOf(options, "url"), databaseUrlProblem] as const,
  ["options.readOnly", fieldOf(options, "readOnly"), optional((v) => typeof v === "boolean" ? undefined : "must be true or false")] as const,
  ["options.tablePrefix", fieldOf(options, "tablePrefix"), optional(tablePrefixProblem)] as const,
  ["options.maxConnections", fieldOf(options, "maxConnections"), optional(Rules.positiveInt)] as const,
  ["options.busyTimeoutMs", fieldOf(options, "busyTimeoutMs"), optional(Rules.nonNegativeInt)] as const,
  ["options.callTimeoutMs", fieldOf(options, "callTimeoutMs"), optional(Rules.positiveInt)] as const,
  ["options.connectTimeoutMs", fieldOf(options, "connectTimeoutMs"), optional(Rules.positiveInt)] as const,
  ["options.statementTimeoutMs", fieldOf(options, "statementTimeoutMs"), optional(Rules.positiveInt)] as const,
  ["options.lockTimeoutMs", fieldOf(options, "lockTimeoutMs"), optional(Rules.positiveInt)] as const,
  ["options.closeTimeoutMs", fieldOf(options, "closeTimeoutMs"), optional(Rules.nonNegativeInt)] as const,
  ["options.checkIntegrityOnOpen", fieldOf(options, "checkIntegrityOnOpen"),
    optional((v) => typeof v === "boolean" ? undefined : "must be true or false")] as const,
  ["options.prepareStatements", fieldOf(options, "prepareStatements"),
    optional((v) => typeof v === "boolean" ? undefined : "must be true or false")] as const,
  ["options.failoverDoubtMs", fieldOf(options, "failoverDoubtMs"), optional(Rules.nonNegativeInt)] as const,
  ["options.requireSynchronousReplication", fieldOf(options, "requireSynchronousReplication"),
    optional((v) => typeof v === "boolean" ? undefined : "must be true or false")] as const,
  ["options.serverCheckMs", fieldOf(options, "serverCheckMs"), optional(Rules.nonNegativeInt)] as const,
  ["options.generationFile", fieldOf(options, "generationFile"),
    optional((v) => v === false || (typeof v === "string" && v !== "") ? undefined : "must be a file path or false")] as const
]

/**
 * The whole store on SQL, for the Effect API: `ConnectorStore`, its ports
 * and the `SqlClient`, with winners read by `readers`. A connection option
 * out of range fails the layer with `InvalidInput` naming it (method
 * `layer`) before anything opens. Opened read-only (see
 * `SqlConnection.readOnly`), a schema not ready fails it with
 * `StoreSchemaNotReady`; opened for writing, a schema a newer version
 * migrated fails it with `StoreSchemaTooNew`.
 */
export const layer = (
  connection: SqlConnection,
  readers: WinnerReaders = {}
): Layer.Layer<
  ConnectorStore | SqlPorts | WinnerReader | SqlClient,
  PersistenceError | InvalidInput | StoreSchemaNotReady | StoreSchemaTooNew | ReplicationNotSynchronous
> => layerAt(connection, readers, Date.now)

/** The SQLite generation file of `connection`: its option, else beside a file database (none for `:memory:`). */
const generationFileOf = (connection: SqlConnection): string | false => {
  if (connection.generationFile !== undefined) return connection.generationFile
  const target = parseDatabaseUrl(connection.url)
  return typeof target === "string" || target.kind !== "sqlite" || target.mode === "memory" ? false : defaultGenerationFile(target.filename)
}

/** `layer`, its server history timed by `now` (the Promise store's clock). */
const layerAt = (
  connection: SqlConnection,
  readers: WinnerReaders,
  now: () => number
): Layer.Layer<
  ConnectorStore | SqlPorts | WinnerReader | SqlClient,
  PersistenceError | InvalidInput | StoreSchemaNotReady | StoreSchemaTooNew | ReplicationNotSynchronous
> =>
  Layer.unwrapEffect(Effect.suspend(() => {
    const problem = openOptionsProblem("layer", connection, connectionChecks(connection), CONNECTION_OPTIONS) ??
      winnerReadersProblem("layer", readers)
    return problem !== undefined ? Effect.fail(problem) : Effect.succeed(
      ConnectorStore.layer.pipe(
        Layer.provideMerge(portsLayer(isReadOnlyConnection(connection), {
          failoverDoubtMs: connection.failoverDoubtMs,
          requireSynchronousReplication: connection.requireSynchronousReplication,
          generationFile: generationFileOf(connection),
          serverCheckMs: connection.serverCheckMs,
          now
        })),
        Layer.provideMerge(Layer.succeed(WinnerReader, readers)),
        Layer.provideMerge(Tables.layer(connection.tablePrefix)),
        Layer.provideMerge(layerClient(connection)),
        Layer.provideMerge(CallBounds.layer({ callTimeoutMs: connection.callTimeoutMs, closeTimeoutMs: connection.closeTimeoutMs }))
      )
    )
  }))

/** The dialect a `SqlTransaction` on `sql` reports. */
const dialectOf = (sql: SqlClient): SqlTransaction["dialect"] => sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })

/**
 * The transaction handle of the calling fiber. Its queries run on the
 * fiber's runtime (so on its transaction's connection); the runtime is
 * captured when the handle is made, and only used if the reader queries.
 */
const currentTransaction = (sql: SqlClient): Effect.Effect<SqlTransaction> => {
  const dialect = dialectOf(sql)
  return Effect.map(Effect.runtime<never>(), (runtime) => ({
    dialect,
    query: <Row>(text: string, params: ReadonlyArray<unknown> = []) =>
      Runtime.runPromise(runtime)(sql.unsafe<Row & object>(text, params)) as Promise<ReadonlyArray<Row>>
  }))
}

/**
 * Opens a store on SQLite or Postgres with the Promise API, migrating the
 * schema first. Rejects with `InvalidInput` naming the option when an option
 * is unacceptable (before anything opens), and with a classified
 * `PersistenceError` when the database cannot be reached or migrated; both
 * name `openConnectorStore` as their `method`. With `readOnly`, the schema
 * is checked instead of migrated, and a schema not ready rejects with
 * `StoreSchemaNotReady` (also naming the method); without it, a schema a
 * newer version migrated rejects with `StoreSchemaTooNew`.
 */
export const openConnectorStore = async (options: OpenConnectorStoreOptions): Promise<SqlConnectorStore> => {
  const problem = openOptionsProblem("openConnectorStore", options, connectionChecks(options), OPEN_OPTIONS) ??
    connectionOptionsProblem("openConnectorStore", options)
  if (problem !== undefined) throw problem
  let handle: Effect.Effect<SqlTransaction> = Effect.dieMessage("store not open")
  const handleOf = Effect.suspend(() => handle)
  const local = options.now ?? Date.now
  let storeNow = local
  const followsDatabase = clockSourceOf(isPostgresUrl(options.url), options) === "database"
  const databaseClock = Layer.scopedDiscard(Effect.flatMap(SqlClient, (sql) =>
    Effect.map(makeDatabaseClock(sql, local), (clock) => {
      storeNow = clock.now
    })
  ))
  let directHandle: (transaction: DirectTransactionOf<boolean>) => SqlTransaction = () => {
    throw new Error("store not open")
  }
  // The policy stays in the runtime's context: the direct lane decides with it too.
  const store = layerAt(connectionOf(options), fromPromiseReaders(options, handleOf), () => storeNow()).pipe(
    Layer.provideMerge(OperationPolicy.layer(options.operationPolicy)),
    Layer.provideMerge(ProviderLimitEnforcement.layer(options.providerLimits === true)),
    Layer.tap((context) =>
      Effect.sync(() => {
        const sql = Context.get(context, SqlClient)
        handle = currentTransaction(sql)
        const dialect = dialectOf(sql)
        directHandle = (transaction) => ({
          dialect,
          query: <Row>(text: string, params: ReadonlyArray<unknown> = []) =>
            Effect.runPromise(transaction.joined(sql.unsafe<Row & object>(text, params))) as Promise<ReadonlyArray<Row>>
        })
      })
    )
  )
  const clocked = followsDatabase ? Layer.provideMerge(databaseClock, store) : store
  const runtime = ManagedRuntime.make(options.observability === undefined ? clocked : Layer.provideMerge(clocked, options.observability))
  const opened = await Effect.runPromiseExit(runtime.runtimeEffect)
  if (Exit.isFailure(opened)) {
    await runtime.dispose()
    throw nameMethod("openConnectorStore")(Cause.squash(opened.cause))
  }
  const now = () => storeNow()
  const promiseStore = makePromiseStore({
    runtime,
    handle: handleOf,
    now: followsDatabase || options.now !== undefined ? now : undefined,
    readers: { readWinner: options.readWinner, readWinners: options.readWinners },
    directHandle: (transaction) => directHandle(transaction)
  })
  return { ...promiseStore, now }
}
