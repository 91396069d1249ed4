// What each runner kept for speed gains, measured in the same run as the
// project it belongs to: the project's store without that runner, its
// calls taking the path every other call takes.
//
// - "without the lane": the Promise API's hot calls each through
//   `runEffect` (the Effect API run by the store's runtime), which is what
//   the Promise API runs for every method the lane does not take.
// - "without the direct runner": the Effect API on a store whose direct
//   rows are not a view of its repositories (every hot call on the
//   repository ports, each try in `withTransaction`), which is what it runs
//   on any adapter without them.
import { ConnectorStore, OperationRepository, WatchRepository, WinnerReader } from "@connector-store/core"
import { layerClient, layerPorts, Tables } from "@connector-store/sql-adapter"
import { Context, Effect, Layer, ManagedRuntime } from "effect"

/** The Promise API's hot methods of `store` taken through `runEffect` instead of its lane. */
export const withoutLane = (store) => {
  const viaRuntime = (method) => (...args) => store.runEffect(Effect.flatMap(ConnectorStore, (service) => service[method](...args)))
  return Object.fromEntries(
    ["claimWatchAttempt", "recordVerification", "armWatch", "deferWatch", "claimOperation", "markOperationSent", "finalizeOperationAndArmWatch"]
      .map((method) => [method, viaRuntime(method)])
  )
}

/** The store's Effect API on `connection` with `readWinner`, on the repository ports only (its direct rows left unused). */
export const portsOnlyRuntime = (connection, readWinner) => {
  // The repositories copied: the store takes direct rows only when they are a view of its very repositories
  // (`directFor`); leaving DirectDatabase out of the context did not keep them from it.
  const withoutRunners = Layer.effectContext(Effect.map(Effect.context(), (context) =>
    context.pipe(
      Context.add(WatchRepository, { ...Context.get(context, WatchRepository) }),
      Context.add(OperationRepository, { ...Context.get(context, OperationRepository) })
    )))
  return ManagedRuntime.make(
    ConnectorStore.layer.pipe(
      Layer.provide(withoutRunners),
      Layer.provideMerge(layerPorts),
      Layer.provideMerge(Layer.succeed(WinnerReader, { readWinner })),
      Layer.provideMerge(Tables.layer(connection.tablePrefix)),
      Layer.provideMerge(layerClient(connection))
    )
  )
}

/** The labels the benches print these baselines under. */
export const WITHOUT_LANE = "project, Promise API without the lane (runEffect)"
export const WITHOUT_DIRECT = "project, Effect API without the direct runner (ports)"
