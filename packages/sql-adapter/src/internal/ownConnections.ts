import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import * as Statement from "@effect/sql/Statement"
import { Context, type Fiber } from "effect"

/** Marks the connections of the store's own clients, with their clients' span attributes (see `ownTransactionOf`). */
export const OWN_CONNECTION: unique symbol = Symbol.for("@connector-store/sql-adapter/ownConnection")

/** A connection of the store's own clients. */
export type OwnConnection = Connection & { readonly [OWN_CONNECTION]: ReadonlyArray<readonly [string, unknown]> }

/**
 * The connection of the transaction `fiber` runs in, when it is one of the
 * store's own clients' (no row transform, statements run as compiled) and
 * no `Statement` transformer must see the statement. A store statement
 * inside such a transaction then runs on it at once, compiled as
 * `@effect/sql` compiles it (in the same span when a tracer is installed);
 * anywhere else it takes `@effect/sql`'s own path.
 */
export const ownTransactionOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>): OwnConnection | undefined => {
  const transaction = Context.getOption(fiber.currentContext, Client.TransactionConnection)
  if (transaction._tag === "None") return undefined
  const connection = transaction.value[0] as Partial<OwnConnection>
  if (connection[OWN_CONNECTION] === undefined) return undefined
  if (fiber.getFiberRef(Statement.currentTransformer)._tag === "Some") return undefined
  return connection as OwnConnection
}
