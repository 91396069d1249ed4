import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import { Cause, Context, Duration, Effect, Exit, Layer, type Scope, Stream } from "effect"
import Pg from "pg"
import type { PgLaneParts } from "./PgLane.js"
import { destroySocket, type HeldClient, type Holds, makeHolds } from "./internal/pgHolds.js"
import { withConnectionThen } from "./internal/transactionContext.js"
import { traced, transactionSpan } from "./internal/tracing.js"
import { OWN_CONNECTION } from "./internal/ownConnections.js"

/** What `layer` needs to reach a Postgres server, and the bounds its sessions keep. */
export interface PgConnectionOptions {
  readonly url: string
  readonly maxConnections: number
  readonly applicationName: string
  /** Every session a read-only transaction (`default_transaction_read_only`): no statement can write. */
  readonly readOnly?: boolean | undefined
  /** How long a new connection may take, and a call may wait for a free one (default `CONNECT_TIMEOUT_MS`). */
  readonly connectTimeoutMs?: number | undefined
  /** The sessions' `statement_timeout` (default `STATEMENT_TIMEOUT_MS`). */
  readonly statementTimeoutMs?: number | undefined
  /** The sessions' `lock_timeout` (default `LOCK_TIMEOUT_MS`). */
  readonly lockTimeoutMs?: number | undefined
  /** The longest a connection stays checked out before it is destroyed (the store's `callTimeoutMs`, default 30 s). */
  readonly callTimeoutMs?: number | undefined
  /** Whether the lane's hot statements are named prepared statements (default true; see `SqlConnection.prepareStatements`). */
  readonly prepareStatements?: boolean | undefined
}

/** What `pg` fails a connect with when its `connectionTimeoutMillis` runs out. */
const POOL_CONNECT_TIMEOUT = /timeout exceeded when trying to connect|due to connection timeout/i

/** How long after `pg`'s own connect timeout the open's backstop timer gives up, so that one cause is reported, not a race of two. */
const BACKSTOP_MARGIN_MS = 250

/** How long the layer waits for a new connection, and for the server to answer its first `SELECT 1` (10 s). */
export const CONNECT_TIMEOUT_MS = 10_000

/** The default `statement_timeout` of the store's sessions (15 s). */
export const STATEMENT_TIMEOUT_MS = 15_000

/** The default `lock_timeout` of the store's sessions (10 s). */
export const LOCK_TIMEOUT_MS = 10_000

/** The default longest time a connection stays checked out (the default `callTimeoutMs`, 30 s). */
export const HOLD_LIMIT_MS = 30_000

/**
 * How long past the call bound a session may sit idle inside a transaction
 * before the server ends it (`idle_in_transaction_session_timeout`, unless
 * the server, database or role sets a shorter one). The store gives such a
 * connection up at the bound, but when the network has gone the server
 * never hears it close, and would keep the transaction's locks until its
 * own keepalive gives up (hours, by default).
 */
const IDLE_IN_TRANSACTION_MARGIN_MS = 1_000

/**
 * How often a session's backend checks, while it runs a statement, that its
 * client is still connected (`client_connection_check_interval`, Postgres
 * 14 and later): a statement whose call was given up stops within this
 * once its socket is closed, even waiting on a lock, even when the cancel
 * sent for it is lost.
 */
export const CLIENT_CHECK_MS = 100

/**
 * The first statement of the pool: it sets the session's client check where the server has one, and its idle transaction
 * bound (`idleMs`) where none as strict is set already; each column is not null when it set its setting.
 */
const firstCheck = (idleMs: number) => `SELECT CASE WHEN current_setting('server_version_num')::int >= 140000
    THEN set_config('client_connection_check_interval', '${CLIENT_CHECK_MS}', false) END AS client_check,
  CASE WHEN (SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout') NOT BETWEEN 1 AND ${idleMs}
    THEN set_config('idle_in_transaction_session_timeout', '${idleMs}', false) END AS idle_check`

/** How long a connection is idle before TCP keepalive probes start (5 s), so a dead peer is found. */
export const KEEPALIVE_DELAY_MS = 5_000

const LANE: unique symbol = Symbol.for("@connector-store/sql-adapter/PgConnection/lane")

/** What `PgLane` runs on under this module's client `sql` (its pool); undefined for any other client. */
export const laneParts = (sql: Client.SqlClient): PgLaneParts | undefined =>
  (sql as unknown as { readonly [LANE]?: PgLaneParts })[LANE]

/**
 * Runs `text` on `client` with no canceller: for `BEGIN`, `COMMIT` and
 * `ROLLBACK`, which run with interruption off and so are never cancelled
 * (`@effect/sql-pg` registers a canceller, and the region around it, for
 * every statement). Fails as its statements do. A `COMMIT` the server
 * answers with `ROLLBACK` (the transaction had failed and was rolled back
 * instead, an error inside it having been caught) fails too: nothing of
 * the transaction was kept, and the caller must not be told otherwise.
 */
const control = (client: Pg.PoolClient, text: "BEGIN" | "COMMIT" | "ROLLBACK"): Effect.Effect<void, SqlError> =>
  Effect.async<void, SqlError>((resume) => {
    client.query(text, (cause: Error | null, result: Pg.QueryResult | undefined) => {
      if (cause !== null && cause !== undefined) {
        resume(Effect.fail(new SqlError({ cause, message: "Failed to execute statement" })))
      } else if (text === "COMMIT" && result?.command === "ROLLBACK") {
        resume(Effect.fail(new SqlError({
          cause: new Error("COMMIT rolled the transaction back: a statement in it had failed"),
          message: "Failed to commit transaction"
        })))
      } else {
        resume(Effect.void)
      }
    })
  })

/**
 * A `pg` client as `@effect/sql`'s `Connection`: each statement one round
 * trip through `query` (a callback, no Promise), answered as
 * `@effect/sql-pg` answers it (rows, one array per statement of a
 * multi-statement text; the raw result; rows as arrays for values). A
 * stream is the statement's rows read whole, then streamed: the store
 * never streams, and a cursor would hold a client across an await of the
 * caller's.
 */
abstract class PgQueryConnection implements Connection {
  /** The client's span attributes: a connection of the store's own (see `ownTransactionOf`). */
  readonly [OWN_CONNECTION]: ReadonlyArray<readonly [string, unknown]>
  constructor(spanAttributes: ReadonlyArray<readonly [string, unknown]>) {
    this[OWN_CONNECTION] = spanAttributes
  }
  protected abstract query<A>(query: Pg.QueryConfig, answer: (result: PgResult) => A): Effect.Effect<A, SqlError>

  execute(text: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    const rows = this.query({ text, values: params as Array<unknown> }, rowsOf)
    return transformRows === undefined ? rows : Effect.map(rows, transformRows as (rows: ReadonlyArray<object>) => ReadonlyArray<object>)
  }

  executeRaw(text: string, params: ReadonlyArray<unknown>) {
    return this.query({ text, values: params as Array<unknown> }, (result) => result as unknown)
  }

  executeValues(text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError> {
    const query: Pg.QueryArrayConfig = { text, values: params as Array<unknown>, rowMode: "array" }
    return this.query(query as unknown as Pg.QueryConfig, (result) =>
      (Array.isArray(result) ? [] : (result as Pg.QueryResult).rows ?? []) as ReadonlyArray<ReadonlyArray<unknown>>)
  }

  executeUnprepared(text: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    return this.execute(text, params, transformRows)
  }

  executeStream(text: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    return Stream.flatMap(Stream.fromEffect(this.execute(text, params, transformRows)), Stream.fromIterable)
  }
}

/**
 * A transaction's connection, on the checked-out `client`: statements are
 * sent without a canceller each. `inFlight` counts the statements not yet
 * answered, so that a transaction that fails with some still running (it
 * was interrupted) gives its client up once, which ends them on the server
 * (see `leanTransactions`).
 */
export class PgTransactionConnection extends PgQueryConnection {
  inFlight = 0
  constructor(readonly client: Pg.PoolClient, spanAttributes: ReadonlyArray<readonly [string, unknown]>) {
    super(spanAttributes)
  }

  protected query<A>(query: Pg.QueryConfig, answer: (result: PgResult) => A): Effect.Effect<A, SqlError> {
    return Effect.async<A, SqlError>((resume) => {
      this.inFlight++
      this.client.query(query, (cause: Error | null, result: PgResult) => {
        this.inFlight--
        resume(cause === null || cause === undefined ? Effect.succeed(answer(result)) : Effect.fail(new SqlError({ cause, message: "Failed to execute statement" })))
      })
    })
  }
}

type PgResult = Pg.QueryResult | ReadonlyArray<Pg.QueryResult>

/** The rows of a result; several statements in one text answer one array each (as `@effect/sql-pg` answers them). */
const rowsOf = (result: PgResult): ReadonlyArray<object> =>
  Array.isArray(result) ? result.map((each: Pg.QueryResult) => each.rows ?? []) : (result as Pg.QueryResult).rows ?? []

/**
 * Statements outside a transaction, each on a client checked out of the
 * pool for it and handed back after (as `@effect/sql-pg` runs them), as
 * rows or raw results. A statement interrupted while it runs (its call ran
 * out, its caller was interrupted) gives its client up (`HeldClient.giveUp`):
 * cancelled on the server, its socket destroyed and its slot freed within a
 * moment, even when the server no longer answers; `@effect/sql-pg` would
 * instead wait up to 5 s for a cancel request and hand the client back with
 * its statement possibly still running.
 */
class PgPooledConnection extends PgQueryConnection {
  constructor(readonly holds: Holds, spanAttributes: ReadonlyArray<readonly [string, unknown]>) {
    super(spanAttributes)
  }

  protected query<A>(query: Pg.QueryConfig, answer: (result: PgResult) => A): Effect.Effect<A, SqlError> {
    return Effect.async<A, SqlError>((resume) => {
      let held: HeldClient | undefined
      let interrupted = false
      this.holds.checkout((cause, got) => {
        if (cause !== undefined || got === undefined) {
          resume(Effect.fail(new SqlError({ cause, message: "Failed to acquire connection" })))
          return
        }
        if (interrupted) return got.release()
        held = got
        got.client.query(query, (failure: Error | null, result: PgResult) => {
          held = undefined
          got.release(failure ?? undefined)
          resume(failure === null || failure === undefined ? Effect.succeed(answer(result)) : Effect.fail(new SqlError({ cause: failure, message: "Failed to execute statement" })))
        })
      })
      return Effect.suspend(() => {
        interrupted = true
        const running = held
        return running === undefined ? Effect.void : Effect.promise(() => running.giveUp("its statement was interrupted"))
      })
    })
  }
}

/**
 * `@effect/sql`'s `withTransaction` for a top-level transaction, lean: a
 * client checked out of `holds`, `BEGIN`, the effect with that client's
 * connection (`PgTransactionConnection`) as its `TransactionConnection`,
 * `COMMIT` (or `ROLLBACK`), the client handed back.
 * Everything but the effect runs with interruption off. Failures are
 * `@effect/sql`'s: a client that cannot be had fails with a `SqlError`, a failed
 * commit or rollback is a defect, and so is a `COMMIT` the server answers
 * with `ROLLBACK` (see `control`). A client whose commit or rollback failed,
 * or that reported an error, is discarded instead of going back to the pool,
 * where it could still hold an open transaction. A transaction that fails
 * with statements still running (interrupted) gives its client up (see
 * `HeldClient.giveUp`) instead of waiting for them; one held past the call
 * bound is given up by `holds`. With a tracer installed
 * the same runs, in a `sql.transaction` span as `@effect/sql` opens one. A
 * nested transaction (savepoints) runs `nested`, `@effect/sql`'s own.
 */
export const leanTransactions = (
  nested: Client.SqlClient["withTransaction"],
  holds: Holds,
  spanAttributes: ReadonlyArray<readonly [string, unknown]>
): Client.SqlClient["withTransaction"] => {
  // Taken with interruption off (the caller's region): a client that arrives is always handed back.
  const checkout = Effect.async<HeldClient, SqlError>((resume) => {
    holds.checkout((cause, held) => {
      if (cause !== undefined || held === undefined) {
        resume(Effect.fail(new SqlError({ cause, message: "Failed to acquire connection for transaction" })))
        return
      }
      resume(Effect.succeed(held))
    })
  })
  // `context` is the fiber's as the transaction begins (inside its span, when there is one).
  const topLevel = <R, E, A>(context: Context.Context<never>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(checkout, ({ client, giveUp, release }) => {
        const connection = new PgTransactionConnection(client, spanAttributes)
        return withConnectionThen(context, connection, 0, Effect.zipRight(control(client, "BEGIN"), restore(effect)), (exit) => {
          // Statements still running when a transaction fails (it was interrupted: its call ran out, say) end
          // with its connection: destroyed, so the server rolls the transaction back and the slot is free now.
          if (Exit.isFailure(exit) && connection.inFlight > 0) {
            return Effect.flatMap(Effect.promise(() => giveUp("its transaction was interrupted with statements running")), () => exit)
          }
          return Effect.flatMap(Effect.exit(control(client, Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK")), (ended): Effect.Effect<A, E | SqlError> => {
            if (Exit.isSuccess(ended)) {
              release()
              return exit
            }
            const failure = Cause.squash(ended.cause)
            release(failure)
            return Effect.die(failure)
          })
        })
      })
    )
  return <R, E, A>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.withFiberRuntime((fiber) => {
      const context = fiber.currentContext
      if (Context.getOption(context, Client.TransactionConnection)._tag === "Some") return nested(effect)
      if (!traced(fiber)) return topLevel(context, effect)
      return transactionSpan(Effect.withFiberRuntime((inSpan) => topLevel(inSpan.currentContext, effect)), spanAttributes)
    })
}

/**
 * What every session of the store's pool starts with (as startup options,
 * so no statement is spent on them): its `statement_timeout` and
 * `lock_timeout`, and read-only transactions when the store is.
 */
export const sessionOptions = (options: PgConnectionOptions): string =>
  [
    `-c statement_timeout=${Math.trunc(options.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS)}`,
    `-c lock_timeout=${Math.trunc(options.lockTimeoutMs ?? LOCK_TIMEOUT_MS)}`,
    ...(options.readOnly === true ? ["-c default_transaction_read_only=on"] : [])
  ].join(" ")

/** A pool and its holds (see `Holds`). */
interface OwnPool {
  readonly pool: Pg.Pool
  readonly holds: Holds
}

/**
 * The pool the client runs on, owned by the layer: connections established
 * within `connectTimeoutMs` (a call waits no longer for a free one either),
 * TCP keepalive on (a dead peer is noticed), each session's timeouts set
 * (see `sessionOptions`), none held past the call bound (see `Holds`);
 * checked with one statement (as `@effect/sql-pg` checks its own with
 * `SELECT 1`) that also turns the client check on where the server has it
 * (see `CLIENT_CHECK_MS`) and bounds idle transactions (see
 * `IDLE_IN_TRANSACTION_MARGIN_MS`). Ended
 * with the layer: the clients still held are given up first, and any
 * socket still open a moment after the pool ended is destroyed, so closing
 * never waits on a dead network.
 */
const ownPool = (options: PgConnectionOptions): Effect.Effect<OwnPool, SqlError, Scope.Scope> => {
  const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS
  return Effect.acquireRelease(
    Effect.sync((): OwnPool => {
      const pool = new Pg.Pool({
        connectionString: options.url,
        max: options.maxConnections,
        idleTimeoutMillis: Duration.toMillis(Duration.seconds(30)),
        connectionTimeoutMillis: connectTimeoutMs,
        keepAlive: true,
        keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
        application_name: options.applicationName,
        options: sessionOptions(options)
      })
      // A pooled client's error also reaches whoever holds it; an idle one is replaced by the pool.
      pool.on("error", () => undefined)
      return { pool, holds: makeHolds(pool, options.callTimeoutMs ?? HOLD_LIMIT_MS) }
    }),
    ({ holds, pool }) =>
      Effect.suspend(() => {
        holds.giveUpAll("the store closed")
        const clients = Array.from((pool as unknown as { readonly _clients?: ReadonlyArray<Pg.ClientBase> })._clients ?? [])
        const leftovers = setTimeout(() => clients.forEach(destroySocket), 200)
        leftovers.unref?.()
        return Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
      })
  ).pipe(
    Effect.tap(({ pool }) => {
      // The pool's connect timeout fires first and is reported as this one; this one is the backstop should it not.
      const unanswered = () =>
        new SqlError({
          cause: Object.assign(new Error(`the server did not answer within ${connectTimeoutMs % 1000 === 0 ? `${connectTimeoutMs / 1000}s` : `${connectTimeoutMs} ms`}`), { code: "ETIMEDOUT" }),
          message: "PgClient: Connection timed out"
        })
      return Effect.tryPromise({
        try: async () => {
          const idleMs = Math.trunc(options.callTimeoutMs ?? HOLD_LIMIT_MS) + IDLE_IN_TRANSACTION_MARGIN_MS
          const checked = await pool.query<{ readonly client_check: string | null; readonly idle_check: string | null }>(firstCheck(idleMs))
          // Every later session sets them at startup; the one just checked set them itself.
          const settings = pool as unknown as { readonly options: { options?: string } }
          const later = [
            ...(checked.rows[0]?.client_check != null ? [`-c client_connection_check_interval=${CLIENT_CHECK_MS}`] : []),
            ...(checked.rows[0]?.idle_check != null ? [`-c idle_in_transaction_session_timeout=${idleMs}`] : [])
          ]
          if (later.length > 0) settings.options.options = [settings.options.options ?? "", ...later].join(" ").trim()
        },
        catch: (cause) => POOL_CONNECT_TIMEOUT.test(String((cause as Error)?.message)) ? unanswered() : new SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(Effect.timeoutFail({ duration: Duration.millis(connectTimeoutMs + BACKSTOP_MARGIN_MS), onTimeout: unanswered }))
    })
  )
}

/**
 * The span attributes of the store's statements and transactions, as
 * `@effect/sql-pg` names them: the system, and the database, host and port
 * of `url` (the defaults `pg` connects to where it names none).
 */
const spanAttributesOf = (url: string): ReadonlyArray<readonly [string, unknown]> => {
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
  } catch {
    parsed = undefined
  }
  const database = parsed === undefined ? "" : decodeURIComponent(parsed.pathname.replace(/^\//, ""))
  return [
    ["db.system.name", "postgresql"],
    ["db.namespace", database !== "" ? database : decodeURIComponent(parsed?.username ?? "") || "postgres"],
    ["server.address", parsed?.hostname || "localhost"],
    ["server.port", parsed?.port ? Number(parsed.port) : 5432]
  ]
}

/**
 * A checked-out client's transaction connection, as a scoped acquisition:
 * handed back when the scope closes, or discarded when it closes with a
 * failure (the client may still hold an open transaction).
 */
const reserveOn = (holds: Holds, spanAttributes: ReadonlyArray<readonly [string, unknown]>): Effect.Effect<Connection, SqlError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<HeldClient, SqlError>((resume) => {
      holds.checkout((cause, held) => {
        resume(cause !== undefined || held === undefined
          ? Effect.fail(new SqlError({ cause, message: "Failed to acquire connection" }))
          : Effect.succeed(held))
      })
    }),
    (held, exit) => Effect.sync(() => held.release(Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined))
  ).pipe(Effect.map((held) => new PgTransactionConnection(held.client, spanAttributes)))

/**
 * The store's Postgres client: `@effect/sql`'s `Client.make` over a pool the
 * layer owns, with `@effect/sql-pg`'s compiler. Outside a transaction each
 * statement runs on a client checked out for it (see `PgPooledConnection`),
 * which an interruption gives up rather than hands back mid-statement; a
 * top-level transaction is lean (see `leanTransactions`); a nested one runs
 * on savepoints, as `@effect/sql` runs them.
 */
export const layer = (options: PgConnectionOptions): Layer.Layer<Client.SqlClient, unknown> =>
  Layer.scoped(
    Client.SqlClient,
    Effect.gen(function*() {
      const { pool, holds } = yield* ownPool(options)
      const spanAttributes = spanAttributesOf(options.url)
      const client = yield* Client.make({
        acquirer: Effect.succeed(new PgPooledConnection(holds, spanAttributes)),
        transactionAcquirer: reserveOn(holds, spanAttributes),
        compiler: PgClient.makeCompiler(),
        spanAttributes
      })
      const lane: PgLaneParts = {
        pool,
        holds,
        connectionOf: (pooled) => new PgTransactionConnection(pooled, spanAttributes),
        prepare: options.prepareStatements ?? true
      }
      return Object.assign(client, { withTransaction: leanTransactions(client.withTransaction, holds, spanAttributes), [LANE]: lane })
    })
  ).pipe(Layer.provide(Reactivity.layer))
