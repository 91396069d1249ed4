// What each runner kept for speed gains, measured in the same run as the
// project it belongs to: the project's store without that runner, its
// calls taking the path every other call takes.
//
// - "without the lane": the Promise API's hot calls each through
//   `runEffect` (the Effect API run by the store's runtime), which is what
//   the Promise API runs for every method the lane does not take.
import { ConnectorStore } from "@connector-store/core"
import { Effect } from "effect"

/** The Promise API's hot methods of `store` taken through `runEffect` instead of its lane. */
export const withoutLane = (store) => {
  const viaRuntime = (method) => (...args) => store.runEffect(Effect.flatMap(ConnectorStore, (service) => service[method](...args)))
  return Object.fromEntries(
    ["claimWatchAttempt", "recordVerification", "armWatch", "deferWatch", "claimOperation", "markOperationSent", "finalizeOperationAndArmWatch"]
      .map((method) => [method, viaRuntime(method)])
  )
}

/** The labels the benches print these baselines under. */
export const WITHOUT_LANE = "project, Promise API without the lane (runEffect)"
