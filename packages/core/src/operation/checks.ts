import { allOptionNames } from "../optionNames.js"
import type { Check, InputShape, Rule } from "../validation.js"
import { atMost, fieldOf, httpStatusOrNull, oneOf, openShapeOf, optional, orNull, partChecks, PLAIN_JSON, Rules, shapeOf } from "../validation.js"
import type { AttemptFailure } from "./attempt.js"
import type { ClaimOperationInput } from "./claim.js"
import type { OperationKey } from "./ConnectorOperation.js"
import type { FinalizeDeleteInput, FinalizeOperationInput } from "./finalize.js"
import { reissueFitProblem, type ReissueIntent, reissueIntentProblem } from "./reissue.js"
import type { CollectParams } from "./retention.js"

/** The largest page `listTrackedOperations` returns. */
export const MAX_TRACKED_PAGE = 500

/** The page size `listTrackedOperations` uses when none is asked for. */
export const DEFAULT_TRACKED_PAGE = 50

/** A string as `Rules.text`, or null. */
export const textOrNull: Rule = orNull(Rules.text)

/** True or false. */
export const boolean: Rule = (value) => typeof value === "boolean" ? undefined : "must be true or false"

/** The longest lease a runner may ask for: a day. */
export const MAX_LEASE_MS = 86_400_000

/** A page size from 1 to `MAX_TRACKED_PAGE` (the tracked and operator listings). */
export const pageSize: Rule = atMost(Rules.positiveInt, MAX_TRACKED_PAGE)

/** The checks of an idempotency key under `prefix`. */
export const keyChecks = partChecks(["callerDID", "operationID"])

const CLAIM_IDS = ["ownerDID", "connectorName", "model", "accountKey", "target", "deterministicEventID", "payloadHash"] as const
const CLAIM_ID_NAMES = CLAIM_IDS.map((field) => `input.${field}`)
const operationKind = oneOf("create", "update", "delete")
const optionalIdOrNull = optional(orNull(Rules.id))
const optionalTextOrNull = optional(textOrNull)
const optionalBoolean = optional(boolean)
/** An optional lease length: absent, or 1 ms to `MAX_LEASE_MS`. */
export const optionalLease = optional(atMost(Rules.positiveInt, MAX_LEASE_MS, " ms"))

/** The checks of a `ClaimOperationInput`. */
export const claimChecks = (input: unknown): ReadonlyArray<Check> => {
  const checks = keyChecks("input", input)
  for (let i = 0; i < CLAIM_IDS.length; i++) checks.push([CLAIM_ID_NAMES[i]!, fieldOf(input, CLAIM_IDS[i]!), Rules.id])
  checks.push(
    ["input.op", fieldOf(input, "op"), operationKind],
    ["input.sourceID", fieldOf(input, "sourceID"), optionalIdOrNull],
    ["input.documentID", fieldOf(input, "documentID"), optionalIdOrNull],
    ["input.providerEtag", fieldOf(input, "providerEtag"), optionalTextOrNull],
    ["input.reissueIntent", fieldOf(input, "reissueIntent"), reissueIntentProblem],
    ["input.reissueIntent", fieldOf(input, "reissueIntent"), (intent) => reissueFitProblem(String(fieldOf(input, "op")), intent as ReissueIntent)],
    ["input.leaseMs", fieldOf(input, "leaseMs"), optionalLease],
    ["input.markSent", fieldOf(input, "markSent"), optionalBoolean]
  )
  return checks
}

/** The checks of a runner write's options: the lease token, then `extra`. */
export const runnerChecks = (options: unknown, extra: ReadonlyArray<Check> = []): ReadonlyArray<Check> => {
  const checks: Array<Check> = [
    ["options", options, Rules.record],
    ["options.leaseToken", fieldOf(options, "leaseToken"), Rules.id]
  ]
  checks.push(...extra)
  return checks
}

/** The extra checks of a lease renewal. */
export const renewChecks = (options: unknown): ReadonlyArray<Check> => [
  ["options.leaseMs", fieldOf(options, "leaseMs"), optionalLease]
]

const failureKind = oneOf("retryable", "permanent", "unknown", "offline", "auth")
const optionalHttpStatus = optional(httpStatusOrNull)
const optionalMillis = optional(Rules.millis)

/** The extra checks of an `AttemptFailure`. */
export const failureChecks = (options: unknown): ReadonlyArray<Check> => [
  ["options.kind", fieldOf(options, "kind"), failureKind],
  ["options.httpStatus", fieldOf(options, "httpStatus"), optionalHttpStatus],
  ["options.notApplied", fieldOf(options, "notApplied"), optionalBoolean],
  ["options.retryAt", fieldOf(options, "retryAt"), optionalMillis]
]

/** The extra checks of a `FinalizeDeleteInput`. */
export const finalizeDeleteChecks = (options: unknown): ReadonlyArray<Check> => [
  ["options.sourceID", fieldOf(options, "sourceID"), Rules.id],
  ["options.documentID", fieldOf(options, "documentID"), Rules.id]
]

/** The extra checks of a `FinalizeOperationInput`. */
export const finalizeChecks = (options: unknown): ReadonlyArray<Check> => [
  ["options.sourceID", fieldOf(options, "sourceID"), Rules.id],
  ["options.documentID", fieldOf(options, "documentID"), Rules.id],
  ["options.providerEtag", fieldOf(options, "providerEtag"), optionalTextOrNull],
  ["options.watchDueAt", fieldOf(options, "watchDueAt"), Rules.millis]
]

const states: Rule = (value) =>
  Array.isArray(value) && value.every((state) => oneOf("attempted", "committed", "dead", "reconcile_only")(state) === undefined)
    ? undefined
    : "must be an array of operation states"

/** The checks of a `TrackedOperationFilter`. */
export const trackedChecks = (filter: unknown): ReadonlyArray<Check> => [
  ["filter", filter, Rules.record],
  ["filter.visibleTo", fieldOf(filter, "visibleTo"), Rules.id],
  ["filter.documentIDs", fieldOf(filter, "documentIDs"), optional(Rules.ids)],
  ["filter.states", fieldOf(filter, "states"), optional(states)],
  ["filter.connectorName", fieldOf(filter, "connectorName"), optional(Rules.id)],
  ["filter.limit", fieldOf(filter, "limit"), optional(pageSize)],
  ["filter.cursor", fieldOf(filter, "cursor"), optional(Rules.id)]
]

/** A result entity as every adapter stores it: absent becomes null (the value is a plain copy already). */
export const asStoredJson = (value: unknown): unknown => value === undefined ? null : value

/** An idempotency key: both parts are required, so a whole operation row will do (other keys are not read). */
export const KEY_SHAPE: InputShape = openShapeOf(allOptionNames<OperationKey>()(["callerDID", "operationID"]))

/** The fields of a `ClaimOperationInput`; its reissue intent is a JSON value read once. */
export const CLAIM_SHAPE: InputShape = shapeOf(
  allOptionNames<ClaimOperationInput>()([
    "callerDID",
    "operationID",
    "ownerDID",
    "connectorName",
    "model",
    "op",
    "accountKey",
    "target",
    "sourceID",
    "deterministicEventID",
    "payloadHash",
    "reissueIntent",
    "providerEtag",
    "documentID",
    "leaseMs",
    "markSent"
  ]),
  { reissueIntent: PLAIN_JSON }
)


/** The options of `markOperationSent`. */
export const MARK_SENT_SHAPE: InputShape = shapeOf(allOptionNames<{ readonly leaseToken: string }>()(["leaseToken"]))


/** The fields of an `AttemptFailure`. */
export const FAILURE_SHAPE: InputShape = shapeOf(
  allOptionNames<AttemptFailure>()(["leaseToken", "kind", "httpStatus", "notApplied", "retryAt"])
)

/** The fields of a `FinalizeOperationInput`; the result entity is a JSON value read once. */
export const FINALIZE_SHAPE: InputShape = shapeOf(
  allOptionNames<FinalizeOperationInput>()(["leaseToken", "sourceID", "documentID", "providerEtag", "resultEntity", "watchDueAt"]),
  { resultEntity: PLAIN_JSON }
)

/** The fields of a `FinalizeDeleteInput`. */
export const FINALIZE_DELETE_SHAPE: InputShape = shapeOf(
  allOptionNames<FinalizeDeleteInput>()(["leaseToken", "sourceID", "documentID"])
)

/** The fields of `CollectParams`. */
export const COLLECT_SHAPE: InputShape = shapeOf(allOptionNames<CollectParams>()(["before", "limit"]))
