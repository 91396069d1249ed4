import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import { Cause, Context, Duration, Effect, Exit, type Fiber, Layer, type Scope } from "effect"
import Pg from "pg"
import { routeStatements } from "./internal/statementRoutes.js"
import type { PgLaneParts } from "./PgLane.js"
import { destroySocket, type HeldClient, type Holds, makeHolds } from "./internal/pgHolds.js"
import { withConnectionThen } from "./internal/transactionContext.js"
import { traced, transactionSpan } from "./internal/tracing.js"

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

/** How long a connection is idle before TCP keepalive probes start (5 s), so a dead peer is found. */
export const KEEPALIVE_DELAY_MS = 5_000

/**
 * `base` with the statements it makes run straight on a connection (see
 * `routeStatements`), as rows or `.raw`: on the open transaction's
 * connection, or outside a transaction on `outside` when given (else the
 * stock path runs there).
 */
export const withDirectStatements = (base: Client.SqlClient, outside?: Connection): Client.SqlClient => {
  const connectionOn = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Connection | undefined => {
    const transaction = Context.getOption(fiber.currentContext, Client.TransactionConnection)
    return transaction._tag === "Some" ? transaction.value[0] : outside
  }
  return routeStatements(base, { execute: connectionOn, executeRaw: connectionOn }) ?? base
}

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
 * A connection whose statements and raw statements run through `query` (one
 * round trip on a `pg` client, with no Promise), with streams, values and
 * unprepared statements left to `stock`, the `@effect/sql-pg` connection.
 */
abstract class PgQueryConnection implements Connection {
  constructor(readonly stock: Connection) {}

  protected abstract query<A>(text: string, params: ReadonlyArray<unknown>, answer: (result: PgResult) => A): Effect.Effect<A, SqlError>

  execute(text: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    const rows = this.query(text, params, rowsOf)
    return transformRows === undefined ? rows : Effect.map(rows, transformRows as (rows: ReadonlyArray<object>) => ReadonlyArray<object>)
  }

  executeRaw(text: string, params: ReadonlyArray<unknown>) {
    return this.query(text, params, (result) => result as unknown)
  }

  executeStream(text: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    return this.stock.executeStream(text, params, transformRows)
  }

  executeValues(text: string, params: ReadonlyArray<unknown>) {
    return this.stock.executeValues(text, params)
  }

  executeUnprepared(text: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    return this.stock.executeUnprepared(text, params, transformRows)
  }
}

/**
 * A transaction's connection: `@effect/sql-pg`'s (`stock`, on `client`),
 * except that rows and raw results are taken without a canceller per
 * statement; what they answer and how they fail is the same. `inFlight`
 * counts the statements not yet answered, so that a transaction that fails
 * with some still running (it was interrupted) cancels them on the server
 * once (see `leanTransactions`). Streams, values and unprepared statements
 * are `stock`'s own.
 */
class PgTransactionConnection extends PgQueryConnection {
  inFlight = 0
  constructor(stock: Connection, readonly client: Pg.PoolClient) {
    super(stock)
  }

  protected query<A>(text: string, params: ReadonlyArray<unknown>, answer: (result: PgResult) => A): Effect.Effect<A, SqlError> {
    return Effect.async<A, SqlError>((resume) => {
      this.inFlight++
      this.client.query(text, params as Array<unknown>, (cause: Error | null, result: PgResult) => {
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
 * its statement possibly still running. Streams, values and unprepared
 * statements are `stock`'s own.
 */
class PgPooledConnection extends PgQueryConnection {
  constructor(stock: Connection, readonly holds: Holds) {
    super(stock)
  }

  protected query<A>(text: string, params: ReadonlyArray<unknown>, answer: (result: PgResult) => A): Effect.Effect<A, SqlError> {
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
        got.client.query(text, params as Array<unknown>, (failure: Error | null, result: PgResult) => {
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
 * `base`'s: a client that cannot be had fails with a `SqlError`, a failed
 * commit or rollback is a defect, and so is a `COMMIT` the server answers
 * with `ROLLBACK` (see `control`). A client whose commit or rollback failed,
 * or that reported an error, is discarded instead of going back to the pool,
 * where it could still hold an open transaction. A transaction that fails
 * with statements still running (interrupted) gives its client up (see
 * `HeldClient.giveUp`) instead of waiting for them; one held past the call
 * bound is given up by `holds`. With a tracer installed
 * the same runs, in a `sql.transaction` span as `base` opens one. A nested
 * transaction (savepoints) runs `base`'s own.
 */
export const leanTransactions = (
  base: Client.SqlClient,
  holds: Holds,
  connectionOf: (client: Pg.PoolClient) => Connection
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
  const spanAttributes = (base.unsafe("SELECT 1") as unknown as { readonly spanAttributes?: ReadonlyArray<readonly [string, unknown]> })
    .spanAttributes ?? []
  // `context` is the fiber's as the transaction begins (inside its span, when there is one).
  const topLevel = <R, E, A>(context: Context.Context<never>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(checkout, ({ client, giveUp, release }) => {
        const connection = new PgTransactionConnection(connectionOf(client), client)
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
      if (Context.getOption(context, Client.TransactionConnection)._tag === "Some") return base.withTransaction(effect)
      if (!traced(fiber)) return topLevel(context, effect)
      return transactionSpan(Effect.withFiberRuntime((inSpan) => topLevel(inSpan.currentContext, effect)), spanAttributes)
    })
}

/**
 * A pool client's connection as `@effect/sql-pg` makes one for a
 * transaction, from the class of one it reserved; undefined when what it
 * reserved is not of that shape (then transactions keep the stock path).
 */
const connectionMaker = (base: Client.SqlClient): Effect.Effect<((client: Pg.PoolClient) => Connection) | undefined, SqlError> =>
  Effect.scoped(Effect.map(base.reserve, (reserved) => {
    const held = (reserved as { readonly pg?: unknown }).pg
    const Made = (reserved as object).constructor as new(client: unknown) => Connection & { readonly pg?: unknown }
    if (held === undefined || typeof Made !== "function" || new Made(held).pg !== held) return undefined
    return (client: Pg.PoolClient) => new Made(client)
  }))

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
 * checked with one `SELECT 1` (as `@effect/sql-pg` checks its own). Ended
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
        try: () => pool.query("SELECT 1"),
        catch: (cause) => POOL_CONNECT_TIMEOUT.test(String((cause as Error)?.message)) ? unanswered() : new SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(Effect.timeoutFail({ duration: Duration.millis(connectTimeoutMs + BACKSTOP_MARGIN_MS), onTimeout: unanswered }))
    })
  )
}

/**
 * The store's Postgres client: `@effect/sql-pg`'s, over a pool the layer
 * owns, with its statements run straight on a connection (see
 * `withDirectStatements`) and its top-level transactions lean (see
 * `leanTransactions`). Outside a transaction statements run each on a
 * client of their own (see `PgPooledConnection`), which an interruption
 * gives up rather than hands back mid-statement.
 */
export const layer = (options: PgConnectionOptions): Layer.Layer<Client.SqlClient, unknown> =>
  Layer.scoped(
    Client.SqlClient,
    Effect.gen(function*() {
      const { pool, holds } = yield* ownPool(options)
      const base: Client.SqlClient = yield* PgClient.fromPool({ acquire: Effect.succeed(pool), applicationName: options.applicationName })
      const { acquirer } = base.unsafe("SELECT 1") as unknown as { readonly acquirer?: unknown }
      // A client that does not hand out its connection this way keeps the stock path outside transactions.
      const stock = Effect.isEffect(acquirer)
        ? yield* (acquirer as Effect.Effect<Connection, SqlError, Scope.Scope>)
        : undefined
      const client = withDirectStatements(base, stock === undefined ? undefined : new PgPooledConnection(stock, holds))
      const connectionOf = yield* connectionMaker(base)
      if (client === base || connectionOf === undefined) return client
      const lane: PgLaneParts = { pool, holds, connectionOf: (pooled) => new PgTransactionConnection(connectionOf(pooled), pooled) }
      return Object.assign(client, { withTransaction: leanTransactions(base, holds, connectionOf), [LANE]: lane })
    })
  ).pipe(Layer.provide(Reactivity.layer))
