/**
 * `@connector-store/testkit`: check your own connector's runner loop the
 * way connector-store checks itself. Arbitraries for every input of the
 * public API, a fake provider with an append-only ledger and per-request
 * fates, faults for the memory store (both APIs), the invariant judges
 * over a run's rows, watches and provider ledger, and `checkRunnerLoop`,
 * which runs your loop as several runners under fast-check's scheduler.
 * @module
 */
export * from "./arbitraries.js"
export * from "./check.js"
export * from "./faults.js"
export * from "./invariants.js"
export * from "./provider.js"
export * from "./scheduler.js"
