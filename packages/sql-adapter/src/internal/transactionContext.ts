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
export const withConnectionThen = <A, E, R, B, E2, R2>(
  context: Context.Context<never>,
  connection: Connection,
  depth: number,
  effect: Effect.Effect<A, E, R>,
  then: (exit: Exit.Exit<A, E>) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E2, R | R2> => {
  const putBack = FiberRef.set(FiberRef.currentContext, context)
  return Effect.zipRight(
    FiberRef.set(FiberRef.currentContext, Context.add(context, Client.TransactionConnection, [connection, depth] as const)),
    Effect.matchCauseEffect(effect, {
      onFailure: (cause) => Effect.flatMap(putBack, () => then(Exit.failCause(cause))),
      onSuccess: (value) => Effect.flatMap(putBack, () => then(Exit.succeed(value)))
    })
  )
}
