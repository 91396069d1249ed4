import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { Context, Effect, Exit, FiberRef } from "effect"

/**
 * `effect` run with `connection` (at savepoint `depth`) as the fiber's
 * `TransactionConnection`, added to `context` (the fiber's context as the
 * transaction began); once it has ended, `context` is put back and `then`
 * goes on from its exit. Set and put back by hand rather than with
 * `Effect.locally` or `Effect.provideService` (an acquire-use-release,
 * about a dozen runtime steps): call it with interruption off, so the
 * putting back always runs. `effect` keeps its own interruptibility.
 */
const joinedContexts = new WeakMap<Context.Context<never>, WeakMap<Connection, Context.Context<never>>>()

/**
 * `context` with `connection` (at `depth`) as its `TransactionConnection`.
 * At depth 0 it is built once per context and connection and kept while
 * both live: a context is immutable, and adding a service copies every
 * service it holds (and the fiber compares it by hash when it is set),
 * which a transaction, or a winner read joined to one, would otherwise pay
 * every time on the same runtime and connection.
 */
export const transactionContext = (
  context: Context.Context<never>,
  connection: Connection,
  depth: number
): Context.Context<never> => {
  if (depth !== 0) return Context.add(context, Client.TransactionConnection, [connection, depth] as const)
  let byConnection = joinedContexts.get(context)
  if (byConnection === undefined) {
    byConnection = new WeakMap()
    joinedContexts.set(context, byConnection)
  }
  let joined = byConnection.get(connection)
  if (joined === undefined) {
    joined = Context.add(context, Client.TransactionConnection, [connection, depth] as const)
    byConnection.set(connection, joined)
  }
  return joined
}

export const withConnectionThen = <A, E, R, B, E2, R2>(
  context: Context.Context<never>,
  connection: Connection,
  depth: number,
  effect: Effect.Effect<A, E, R>,
  then: (exit: Exit.Exit<A, E>) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E2, R | R2> => {
  const putBack = FiberRef.set(FiberRef.currentContext, context)
  return Effect.zipRight(
    FiberRef.set(FiberRef.currentContext, transactionContext(context, connection, depth)),
    Effect.matchCauseEffect(effect, {
      onFailure: (cause) => Effect.flatMap(putBack, () => then(Exit.failCause(cause))),
      onSuccess: (value) => Effect.flatMap(putBack, () => then(Exit.succeed(value)))
    })
  )
}
