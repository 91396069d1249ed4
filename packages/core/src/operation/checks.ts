import { allOptionNames } from "../optionNames.js"
import type { Check, InputShape, Rule } from "../validation.js"
import {
  atMost,
  fieldOf,
  fieldsOf,
  httpStatusOrNull,
  LIST,
  oneOf,
  openShapeOf,
  optional,
  orNull,
  partChecks,
  PLAIN_JSON,
  Rules,
  shapeOf
} from "../validation.js"
import type { AttemptFailure } from "./attempt.js"
import type { ClaimOperationInput } from "./claim.js"
import type { EnqueueOperationInput } from "./enqueue.js"
import type { OperationKey } from "./ConnectorOperation.js"
import type { FinalizeDeleteInput, FinalizeOperationInput } from "./finalize.js"
import type { TrackedQuery } from "./reads.js"
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

const failureKind = oneOf("retryable", "permanent", "unknown", "offline", "auth")
const states: Rule = (value) =>
  Array.isArray(value) && value.every((state) => oneOf("attempted", "committed", "dead", "reconcile_only")(state) === undefined)
    ? undefined
    : "must be an array of operation states"

/** The options of `markOperationSent`. */
export const MARK_SENT = fieldsOf<{ readonly leaseToken: string }>("options", { leaseToken: Rules.id })

/** The options of `renewOperationLease`. */
export const RENEW = fieldsOf<{ readonly leaseToken: string; readonly leaseMs?: number }>("options", {
  leaseToken: Rules.id,
  leaseMs: optionalLease
})

/** The fields of an `AttemptFailure`. */
export const FAILURE = fieldsOf<AttemptFailure>("options", {
  leaseToken: Rules.id,
  kind: failureKind,
  httpStatus: optional(httpStatusOrNull),
  notApplied: optionalBoolean,
  retryAt: optional(Rules.millis)
})

/** The fields of a `FinalizeOperationInput`; the result entity is a JSON value read once. */
export const FINALIZE = fieldsOf<FinalizeOperationInput>("options", {
  leaseToken: Rules.id,
  sourceID: Rules.id,
  documentID: Rules.id,
  providerEtag: optionalTextOrNull,
  resultEntity: undefined,
  watchDueAt: Rules.millis
}, { nested: { resultEntity: PLAIN_JSON } })

/** The fields of a `FinalizeDeleteInput`. */
export const FINALIZE_DELETE = fieldsOf<FinalizeDeleteInput>("options", { leaseToken: Rules.id, sourceID: Rules.id, documentID: Rules.id })

/** The fields of a `TrackedOperationFilter`; its lists are read once. */
export const TRACKED = fieldsOf<Omit<TrackedQuery, "after"> & { readonly cursor?: string }>("filter", {
  visibleTo: Rules.id,
  documentIDs: optional(Rules.ids),
  states: optional(states),
  connectorName: optional(Rules.id),
  limit: optional(pageSize),
  cursor: optional(Rules.id)
}, { nested: { documentIDs: LIST, states: LIST } })

/** The fields of `CollectParams`. */
export const COLLECT = fieldsOf<CollectParams>("params", { before: Rules.finite, limit: Rules.positiveInt })

/** A result entity as every adapter stores it: absent becomes null (the value is a plain copy already). */
export const asStoredJson = (value: unknown): unknown => value === undefined ? null : value

/** An idempotency key: both parts are required, so a whole operation row will do (other keys are not read). */
export const KEY_SHAPE: InputShape = openShapeOf(allOptionNames<OperationKey>()(["callerDID", "operationID"]))

/** The fields an edit names (`EnqueueOperationInput`: a claim's without the lease's). */
const EDIT_FIELDS = allOptionNames<EnqueueOperationInput>()([
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
  "documentID"
])

/** The fields of a `ClaimOperationInput`: an edit's and its lease's; its reissue intent is a JSON value read once. */
export const CLAIM_SHAPE: InputShape = shapeOf(
  [...EDIT_FIELDS, ...allOptionNames<Pick<ClaimOperationInput, "leaseMs" | "markSent">>()(["leaseMs", "markSent"])],
  { reissueIntent: PLAIN_JSON }
)

/** The fields of an `EnqueueOperationInput`; its reissue intent is a JSON value read once. */
export const ENQUEUE_SHAPE: InputShape = shapeOf(EDIT_FIELDS, { reissueIntent: PLAIN_JSON })

const LEASE_FIELDS = new Set(["input.leaseMs", "input.markSent"])

/** The checks of an `EnqueueOperationInput`: a claim's, without the lease's. */
export const enqueueChecks = (input: unknown): ReadonlyArray<Check> =>
  claimChecks(input).filter(([field]) => !LEASE_FIELDS.has(field))
