import { boolean, pageSize, textOrNull } from "../operation/checks.js"
import type { SettleOperationInput } from "../operation/settle.js"
import { allOptionNames } from "../optionNames.js"
import type { RelistRunState } from "../relist/RelistRun.js"
import type { OperatorOperationFields, OperatorWatchFields } from "./queries.js"
import type { OperatorSyncStateFields } from "./syncStates.js"
import type { Check, InputShape, Rule } from "../validation.js"
import { fieldOf, fieldsOf, LIST, oneOf, optional, PLAIN_JSON, Rules, shapeOf } from "../validation.js"

/** The paging fields every operator filter has (`OperatorPaging`). */
interface Paging {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

/** The fields of an `OperatorOperationFilter`. */
export const OPERATION_FILTER_SHAPE: InputShape = shapeOf(
  allOptionNames<Paging & OperatorOperationFields>()([
    "ownerDID",
    "connectorName",
    "callerDID",
    "states",
    "documentID",
    "dueBy",
    "inDoubt",
    "limit",
    "cursor"
  ]),
  { states: LIST }
)

/** The fields of an `OperatorWatchFilter`. */
export const WATCH_FILTER_SHAPE: InputShape = shapeOf(
  allOptionNames<Paging & OperatorWatchFields>()(["ownerDID", "connectorName", "statuses", "documentID", "dueBy", "limit", "cursor"]),
  { statuses: LIST }
)

/** The fields of an `OperatorRelistFilter`. */
export const RELIST_FILTER_SHAPE: InputShape = shapeOf(
  allOptionNames<Paging & { readonly states?: ReadonlyArray<RelistRunState> | undefined }>()(["states", "limit", "cursor"]),
  { states: LIST }
)

/** The fields of an `OperatorSyncStateFilter`. */
export const SYNC_STATE_FILTER_SHAPE: InputShape = shapeOf(
  allOptionNames<Paging & OperatorSyncStateFields>()(["connectorName", "ownerDID", "lease", "limit", "cursor"])
)

/** The options of `releaseSyncLeaseByOperator`. */
export const OPERATOR_RELEASE = fieldsOf<{ readonly force?: boolean }>("options", { force: optional(boolean) }, {
  record: optional(Rules.record)
})

type CommittedSettle = Extract<SettleOperationInput, { readonly outcome: "committed" }>

/** The fields of a `SettleOperationInput` (of either outcome); the result entity is a JSON value read once. */
export const SETTLE_SHAPE: InputShape = shapeOf(
  allOptionNames<CommittedSettle>()(["outcome", "sourceID", "documentID", "providerEtag", "resultEntity", "watchDueAt"]),
  { resultEntity: PLAIN_JSON }
)

/** The options of `rearmWatch`. */
export const REARM = fieldsOf<{ readonly dueAt: number }>("options", { dueAt: Rules.millis })

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
    // resultEntity: checked as it was taken (SETTLE_SHAPE).
    ["input.watchDueAt", fieldOf(input, "watchDueAt"), Rules.millis]
  ]
}
