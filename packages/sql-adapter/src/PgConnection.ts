import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import { Cause, Context, Duration, Effect, Exit, type Fiber, Layer, type Scope } from "effect"
import Pg from "pg"
import { routeStatements } from "./internal/statementRoutes.js"
import type { PgLaneParts } from "./PgLane.js"
import { withConnectionThen } from "./internal/transactionContext.js"
import { traced, transactionSpan } from "./internal/tracing.js"

/** What `layer` needs to reach a Postgres server. */
export interface PgConnectionOptions {
  readonly url: string
  readonly maxConnections: number
  readonly applicationName: string
  /** Every session a read-only transaction (`default_transaction_read_only`): no statement can write. */
  readonly readOnly?: boolean | undefined
}

/** How long the layer waits for the server to answer its first `SELECT 1` (what `docs` promise: 10 s). */
export const CONNECT_TIMEOUT_MS = 10_000

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

/** A client of the pool, checked out for one transaction; `release` hands it back (or, given an error, discards it). */
interface Checkout {
  readonly client: Pg.PoolClient
  readonly connection: Connection
  readonly release: (error?: unknown) => void
}

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
 * A transaction's connection: `@effect/sql-pg`'s (`stock`, on `client`),
 * except that rows and raw results are taken without a canceller per
 * statement; what they answer and how they fail is the same. `inFlight`
 * counts the statements not yet answered, so that a transaction that fails
 * with some still running (it was interrupted) cancels them on the server
 * once (see `leanTransactions`). Streams, values and unprepared statements
 * are `stock`'s own.
 */
class PgTransactionConnection implements Connection {
  inFlight = 0
  constructor(readonly stock: Connection, readonly client: Pg.PoolClient) {}

  private query<A>(text: string, params: ReadonlyArray<unknown>, answer: (result: PgResult) => A): Effect.Effect<A, SqlError> {
    return Effect.async<A, SqlError>((resume) => {
      this.inFlight++
      this.client.query(text, params as Array<unknown>, (cause: Error | null, result: PgResult) => {
        this.inFlight--
        resume(cause === null || cause === undefined ? Effect.succeed(answer(result)) : Effect.fail(new SqlError({ cause, message: "Failed to execute statement" })))
      })
    })
  }

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

type PgResult = Pg.QueryResult | ReadonlyArray<Pg.QueryResult>

/** The rows of a result; several statements in one text answer one array each (as `@effect/sql-pg` answers them). */
const rowsOf = (result: PgResult): ReadonlyArray<object> =>
  Array.isArray(result) ? result.map((each: Pg.QueryResult) => each.rows ?? []) : (result as Pg.QueryResult).rows ?? []

/**
 * Cancels what `client`'s backend is running (best effort, as
 * `@effect/sql-pg` cancels an interrupted statement: through another
 * pooled client, for at most 5 seconds).
 */
const cancelRunning = (pool: Pg.Pool, client: Pg.PoolClient): Effect.Effect<void> => {
  const backend = (client as unknown as { readonly processID?: unknown }).processID
  if (typeof backend !== "number" || pool.ending) return Effect.void
  return Effect.async<void>((resume) => {
    pool.query("SELECT pg_cancel_backend($1)", [backend], () => resume(Effect.void))
  }).pipe(Effect.interruptible, Effect.timeoutOption(Duration.seconds(5)), Effect.asVoid)
}

/**
 * `@effect/sql`'s `withTransaction` for a top-level transaction, lean: a
 * client of `pool` checked out, `BEGIN`, the effect with that client's
 * connection (`PgTransactionConnection`) as its `TransactionConnection`,
 * `COMMIT` (or `ROLLBACK`), the client handed back.
 * Everything but the effect runs with interruption off. Failures are
 * `base`'s: a client that cannot be had fails with a `SqlError`, a failed
 * commit or rollback is a defect, and so is a `COMMIT` the server answers
 * with `ROLLBACK` (see `control`). A client whose commit or rollback failed,
 * or that reported an error, is discarded instead of going back to the pool,
 * where it could still hold an open transaction. With a tracer installed
 * the same runs, in a `sql.transaction` span as `base` opens one. A nested
 * transaction (savepoints) runs `base`'s own.
 */
export const leanTransactions = (
  base: Client.SqlClient,
  pool: Pg.Pool,
  connectionOf: (client: Pg.PoolClient) => Connection
): Client.SqlClient["withTransaction"] => {
  // Taken with interruption off (the caller's region): a client that arrives is always handed back.
  const checkout = Effect.async<Checkout, SqlError>((resume) => {
    pool.connect((cause, client, release) => {
      if (cause !== undefined && cause !== null || client === undefined) {
        resume(Effect.fail(new SqlError({ cause: cause ?? new Error("No client returned"), message: "Failed to acquire connection for transaction" })))
        return
      }
      let reported: unknown
      const onError = (error: unknown) => {
        reported = error
      }
      client.on("error", onError)
      resume(Effect.succeed({
        client,
        connection: connectionOf(client),
        release: (error?: unknown) => {
          client.off("error", onError)
          const discard = error ?? reported
          release(discard === undefined ? undefined : discard instanceof Error ? discard : new Error(String(discard)))
        }
      }))
    })
  })
  const spanAttributes = (base.unsafe("SELECT 1") as unknown as { readonly spanAttributes?: ReadonlyArray<readonly [string, unknown]> })
    .spanAttributes ?? []
  // `context` is the fiber's as the transaction begins (inside its span, when there is one).
  const topLevel = <R, E, A>(context: Context.Context<never>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(checkout, ({ client, connection: stock, release }) => {
        const connection = new PgTransactionConnection(stock, client)
        const ending = (exit: Exit.Exit<A, E | SqlError>) => {
          const end = control(client, Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK")
          // Statements still running when a transaction fails (it was interrupted) are cancelled on the server first.
          return Exit.isSuccess(exit) || connection.inFlight === 0 ? end : Effect.zipRight(cancelRunning(pool, client), end)
        }
        return withConnectionThen(context, connection, 0, Effect.zipRight(control(client, "BEGIN"), restore(effect)), (exit) =>
          Effect.flatMap(Effect.exit(ending(exit)), (ended): Effect.Effect<A, E | SqlError> => {
            if (Exit.isSuccess(ended)) {
              release()
              return exit
            }
            const failure = Cause.squash(ended.cause)
            release(failure)
            return Effect.die(failure)
          }))
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
 * The pool the client runs on, owned by the layer: checked with one
 * `SELECT 1` (as `@effect/sql-pg` checks its own) and ended with the layer.
 */
const ownPool = (options: PgConnectionOptions): Effect.Effect<Pg.Pool, SqlError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const pool = new Pg.Pool({
        connectionString: options.url,
        max: options.maxConnections,
        idleTimeoutMillis: Duration.toMillis(Duration.seconds(30)),
        application_name: options.applicationName,
        ...(options.readOnly === true ? { options: "-c default_transaction_read_only=on" } : {})
      })
      // A pooled client's error also reaches whoever holds it; an idle one is replaced by the pool.
      pool.on("error", () => undefined)
      return pool
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
  ).pipe(
    Effect.tap((pool) =>
      Effect.tryPromise({
        try: () => pool.query("SELECT 1"),
        catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(Effect.timeoutFail({
        duration: Duration.millis(CONNECT_TIMEOUT_MS),
        onTimeout: () =>
          new SqlError({
            cause: Object.assign(new Error(`the server did not answer within ${CONNECT_TIMEOUT_MS / 1000}s`), { code: "ETIMEDOUT" }),
            message: "PgClient: Connection timed out"
          })
      }))
    )
  )

/**
 * The store's Postgres client: `@effect/sql-pg`'s, over a pool the layer
 * owns, with its statements run straight on a connection (see
 * `withDirectStatements`) and its top-level transactions lean (see
 * `leanTransactions`). Outside a transaction statements run on the
 * client's own handle: `@effect/sql-pg` answers every such acquisition
 * with one handle that takes a pooled client per statement and releases it
 * after, so the handle is taken once.
 */
export const layer = (options: PgConnectionOptions): Layer.Layer<Client.SqlClient, unknown> =>
  Layer.scoped(
    Client.SqlClient,
    Effect.gen(function*() {
      const pool = yield* ownPool(options)
      const base: Client.SqlClient = yield* PgClient.fromPool({ acquire: Effect.succeed(pool), applicationName: options.applicationName })
      const { acquirer } = base.unsafe("SELECT 1") as unknown as { readonly acquirer?: unknown }
      // A client that does not hand out its connection this way keeps the stock path outside transactions.
      const outside = Effect.isEffect(acquirer)
        ? yield* (acquirer as Effect.Effect<Connection, SqlError, Scope.Scope>)
        : undefined
      const client = withDirectStatements(base, outside)
      const connectionOf = yield* connectionMaker(base)
      if (client === base || connectionOf === undefined) return client
      const lane: PgLaneParts = { pool, connectionOf: (pooled) => new PgTransactionConnection(connectionOf(pooled), pooled) }
      return Object.assign(client, { withTransaction: leanTransactions(base, pool, connectionOf), [LANE]: lane })
    })
  ).pipe(Layer.provide(Reactivity.layer))
