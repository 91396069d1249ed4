import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, type Fiber, Layer, Redacted, type Scope } from "effect"
import { routeStatements } from "./internal/statementRoutes.js"

/** What `layer` needs to reach a Postgres server. */
export interface PgConnectionOptions {
  readonly url: string
  readonly maxConnections: number
  readonly applicationName: string
}

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
