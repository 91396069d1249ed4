import { type Check, fieldOf, oneOf, optional, type Rule, Rules } from "../validation.js"
import { jsonProblem } from "./json.js"
import { SYNC_STATUSES } from "./SyncState.js"

/** A JSON value the store keeps exactly (see `jsonProblem`); the reason names a path, never a value. */
export const jsonRule: Rule = (value) => {
  const problem = jsonProblem(value)
  return problem === undefined ? undefined : `must be a JSON value: ${problem}`
}

/** The checks of a connector name and owner DID given as arguments. */
export const syncStateKeyChecks = (connectorName: unknown, ownerDID: unknown): ReadonlyArray<Check> => [
  ["connectorName", connectorName, Rules.id],
  ["ownerDID", ownerDID, Rules.id]
]

/** The checks of a `setSyncState` input. */
export const syncStateInputChecks = (input: unknown): ReadonlyArray<Check> => [
  ["state", input, Rules.record],
  ["state.status", fieldOf(input, "status"), oneOf(...SYNC_STATUSES)],
  ["state.lastSyncedAt", fieldOf(input, "lastSyncedAt"), Rules.text],
  ["state.entityCount", fieldOf(input, "entityCount"), Rules.nonNegativeInt],
  ["state.error", fieldOf(input, "error"), optional((v) => v === null ? undefined : Rules.text(v))],
  ["state.checkpoint", fieldOf(input, "checkpoint"), optional(jsonRule)],
  ["state.recovery", fieldOf(input, "recovery"), optional(jsonRule)]
]

/** The checks of what a recompute returned. */
export const progressResultChecks = (result: unknown): ReadonlyArray<Check> => [
  ["recompute()", result, (v) =>
    typeof fieldOf(v, "then") === "function"
      ? "must return its result synchronously, not a Promise"
      : Rules.record(v)],
  ["recompute().checkpoint", fieldOf(result, "checkpoint"), jsonRule],
  ["recompute().recovery", fieldOf(result, "recovery"), jsonRule]
]

/** The longest lease a claim or renewal may ask for: one day. */
export const MAX_SYNC_LEASE_MS = 24 * 60 * 60 * 1000

/** The checks of the `{ now, leaseMs }` terms of a claim or renewal. */
export const leaseTermsChecks = (terms: unknown): ReadonlyArray<Check> => [
  ["options", terms, Rules.record],
  ["options.now", fieldOf(terms, "now"), Rules.millis],
  ["options.leaseMs", fieldOf(terms, "leaseMs"), (v) =>
    Rules.positiveInt(v) ?? ((v as number) > MAX_SYNC_LEASE_MS ? `must be at most ${MAX_SYNC_LEASE_MS}` : undefined)],
  ["options.leaseMs", fieldOf(terms, "leaseMs"), (v) =>
    Number.isSafeInteger((fieldOf(terms, "now") as number) + (v as number)) ? undefined : "puts the expiry past the largest safe integer"]
]

/** The checks of a lease handed back by its holder. */
export const leaseChecks = (lease: unknown): ReadonlyArray<Check> => [
  ["lease", lease, Rules.record],
  ["lease.connectorName", fieldOf(lease, "connectorName"), Rules.id],
  ["lease.ownerDID", fieldOf(lease, "ownerDID"), Rules.id],
  ["lease.token", fieldOf(lease, "token"), Rules.id]
]
