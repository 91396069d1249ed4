import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, type Fiber, Layer, Redacted, type Scope } from "effect"
import { nativeTracer } from "./internal/tracer.js"

/** What `layer` needs to reach a Postgres server. */
export interface PgConnectionOptions {
  readonly url: string
  readonly maxConnections: number
  readonly applicationName: string
}

type RowTransform = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

type CompiledStatement = Statement.Statement<object> & { readonly transformRows: RowTransform }

/**
 * The connection a statement may run straight on, on `fiber`: the open
 * transaction's, else `outside`; undefined (the stock statement path runs)
 * with a tracer installed (the statement gets its `sql.execute` span) or
 * under a `Statement` transformer.
 */
const connectionOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>, outside: Connection | undefined): Connection | undefined => {
  if (fiber.currentTracer !== nativeTracer || fiber.getFiberRef(Statement.currentTransformer)._tag === "Some") {
    return undefined
  }
  const transaction = Context.getOption(fiber.currentContext, Client.TransactionConnection)
  return transaction._tag === "Some" ? transaction.value[0] : outside
}

/**
 * `base` with the statements it makes run straight on a connection. The
 * stock path (Statement's `withConnection`) opens a span and a scope and
 * acquires a connection for every statement; here a statement run as rows
 * or `.raw` compiles and executes at once on the open transaction's
 * connection, or outside a transaction on `outside` (when given), with the
 * same compilation, row transform and errors. With a tracer installed,
 * under a `Statement` transformer, or outside a transaction without
 * `outside`, the stock path runs.
 */
export const withDirectStatements = (base: Client.SqlClient, outside?: Connection): Client.SqlClient => {
  const sample = base.unsafe("SELECT 1")
  const stock = Object.getPrototypeOf(sample) as object
  const stockCommit = (stock as { commit: (this: unknown) => Effect.Effect<unknown, SqlError> }).commit
  const stockRaw = Object.getOwnPropertyDescriptor(stock, "raw")?.get
  if (typeof stockCommit !== "function" || stockRaw === undefined) return base
  const fast = Object.create(stock, {
    commit: {
      value: function commit(this: CompiledStatement) {
        return Effect.withFiberRuntime<ReadonlyArray<object>, SqlError>((fiber) => {
          const connection = connectionOf(fiber, outside)
          if (connection === undefined) return stockCommit.call(this) as Effect.Effect<ReadonlyArray<object>, SqlError>
          const [text, params] = this.compile()
          return connection.execute(text, params, this.transformRows)
        })
      }
    },
    raw: {
      get(this: CompiledStatement) {
        return Effect.withFiberRuntime<unknown, SqlError>((fiber) => {
          const connection = connectionOf(fiber, outside)
          if (connection === undefined) return stockRaw.call(this) as Effect.Effect<unknown, SqlError>
          const [text, params] = this.compile(true)
          return connection.executeRaw(text, params)
        })
      }
    }
  }) as object
  const faster = <S>(statement: S): S => {
    if (Object.getPrototypeOf(statement) === stock) Object.setPrototypeOf(statement, fast)
    return statement
  }
  const client: Client.SqlClient = Object.assign(
    function sql(strings: unknown, ...args: Array<unknown>) {
      return faster((base as unknown as (...a: Array<unknown>) => unknown)(strings, ...args))
    } as unknown as Client.SqlClient,
    base,
    {
      unsafe: (text: string, params?: ReadonlyArray<unknown>) => faster(base.unsafe(text, params))
    }
  )
  ;(client as unknown as { safe: unknown }).safe = client
  return client
}

/**
 * The store's Postgres client: `@effect/sql-pg`'s, its statements run
 * straight on a connection (see `withDirectStatements`). Outside a
 * transaction that is the client's own: `@effect/sql-pg` answers every
 * such acquisition with one handle that takes a pooled client per
 * statement and releases it after, so the handle is taken once.
 */
export const layer = (options: PgConnectionOptions): Layer.Layer<Client.SqlClient, unknown> =>
  Layer.scoped(
    Client.SqlClient,
    Effect.gen(function*() {
      const base = yield* Client.SqlClient
      const { acquirer } = base.unsafe("SELECT 1") as unknown as { readonly acquirer?: unknown }
      // A client that does not hand out its connection this way keeps the stock path outside transactions.
      const outside = Effect.isEffect(acquirer)
        ? yield* (acquirer as Effect.Effect<Connection, SqlError, Scope.Scope>)
        : undefined
      return withDirectStatements(base, outside)
    })
  ).pipe(
    Layer.provide(
      PgClient.layer({
        url: Redacted.make(options.url),
        maxConnections: options.maxConnections,
        applicationName: options.applicationName,
        idleTimeout: Duration.seconds(30)
      })
    )
  )
