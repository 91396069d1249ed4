import { boolean, pageSize, textOrNull } from "../operation/checks.js"
import type { Check, Rule } from "../validation.js"
import { fieldOf, identityChecks, oneOf, optional, Rules } from "../validation.js"

const listOf = (what: string, ...allowed: ReadonlyArray<string>): Rule => (value) =>
  Array.isArray(value) && value.every((item) => oneOf(...allowed)(item) === undefined)
    ? undefined
    : `must be an array of ${what} (${allowed.join(", ")})`

/** The checks every operator page filter shares: the object, its page size and cursor. */
const pageChecks = (filter: unknown): ReadonlyArray<Check> => [
  ["filter", filter, optional(Rules.record)],
  ["filter.limit", fieldOf(filter, "limit"), optional(pageSize)],
  ["filter.cursor", fieldOf(filter, "cursor"), optional(Rules.id)]
]

/** The checks of an `OperatorOperationFilter`. */
export const operationFilterChecks = (filter: unknown): ReadonlyArray<Check> => [
  ...pageChecks(filter),
  ...(["ownerDID", "connectorName", "callerDID", "documentID"] as const)
    .map((field): Check => [`filter.${field}`, fieldOf(filter, field), optional(Rules.id)]),
  ["filter.states", fieldOf(filter, "states"), optional(listOf("operation states", "attempted", "committed", "dead", "reconcile_only"))],
  ["filter.dueBy", fieldOf(filter, "dueBy"), optional(Rules.millis)],
  ["filter.inDoubt", fieldOf(filter, "inDoubt"), optional(boolean)]
]

/** The checks of an `OperatorWatchFilter`. */
export const watchFilterChecks = (filter: unknown): ReadonlyArray<Check> => [
  ...pageChecks(filter),
  ...(["ownerDID", "connectorName", "documentID"] as const)
    .map((field): Check => [`filter.${field}`, fieldOf(filter, field), optional(Rules.id)]),
  ["filter.statuses", fieldOf(filter, "statuses"), optional(listOf("watch statuses", "pending_verification", "verified", "repair_failed"))],
  ["filter.dueBy", fieldOf(filter, "dueBy"), optional(Rules.millis)]
]

/** The checks of an `OperatorRelistFilter`. */
export const relistFilterChecks = (filter: unknown): ReadonlyArray<Check> => [
  ...pageChecks(filter),
  ["filter.states", fieldOf(filter, "states"), optional(listOf("relist run states", "started", "listing", "complete", "abandoned", "superseded"))]
]

/** The checks of an `OperatorSyncStateFilter`. */
export const syncStateFilterChecks = (filter: unknown): ReadonlyArray<Check> => [
  ...pageChecks(filter),
  ...(["connectorName", "ownerDID"] as const)
    .map((field): Check => [`filter.${field}`, fieldOf(filter, field), optional(Rules.id)]),
  ["filter.lease", fieldOf(filter, "lease"), optional(oneOf("none", "held", "stale"))]
]

/** The checks of an operator's sync-lease release: the key and its options. */
export const operatorReleaseChecks = (connectorName: unknown, ownerDID: unknown, options: unknown): ReadonlyArray<Check> => [
  ["connectorName", connectorName, Rules.id],
  ["ownerDID", ownerDID, Rules.id],
  ["options", options, optional(Rules.record)],
  ["options.force", fieldOf(options, "force"), optional(boolean)]
]

const jsonValue: Rule = (value) => {
  if (value === undefined) return undefined
  try {
    return typeof JSON.stringify(value) === "string" ? undefined : "must be a JSON value"
  } catch {
    return "must be a JSON value"
  }
}

/** The checks of a `SettleOperationInput`. */
export const settleChecks = (input: unknown): ReadonlyArray<Check> => {
  const outcome = fieldOf(input, "outcome")
  const head: ReadonlyArray<Check> = [
    ["input", input, Rules.record],
    ["input.outcome", outcome, oneOf("committed", "dead")]
  ]
  if (outcome !== "committed") return head
  return [
    ...head,
    ["input.sourceID", fieldOf(input, "sourceID"), Rules.id],
    ["input.documentID", fieldOf(input, "documentID"), Rules.id],
    ["input.providerEtag", fieldOf(input, "providerEtag"), optional(textOrNull)],
    ["input.resultEntity", fieldOf(input, "resultEntity"), jsonValue],
    ["input.watchDueAt", fieldOf(input, "watchDueAt"), Rules.millis]
  ]
}

/** The checks of `rearmWatch`'s arguments. */
export const rearmChecks = (identity: unknown, options: unknown): ReadonlyArray<Check> => [
  ...identityChecks("identity", identity),
  ["options", options, Rules.record],
  ["options.dueAt", fieldOf(options, "dueAt"), Rules.millis]
]
