/**
 * A connector simulation: concurrent runners, a flaky fake provider and injected crashes against a real store, ending with an invariant check.
 *
 * @module @connector-store/simulation
 */
export * from "./simulation.js"
export * from "./clock.js"
export * from "./report.js"
export * from "./format.js"
export * from "./explain.js"
export * from "./plan.js"
export * from "./provider.js"
export * from "./random.js"
export * from "./world.js"
export type { RelistSummary } from "./relistSweep.js"
export type { ProgressMode, ProgressStatus } from "./progress.js"
export * from "./invariants.js"
export * from "./command.js"
