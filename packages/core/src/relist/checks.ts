import { allOptionNames } from "../optionNames.js"
import type { RelistReceiptInput, RelistScope } from "./RelistRun.js"
import type { SweepApplyFailure } from "./candidates.js"
import type { SweepCandidateIdentity } from "./SweepCandidate.js"
import {
  fieldOf,
  fieldsOf,
  type InputShape,
  type ListTaking,
  oneOf,
  openShapeOf,
  optional,
  partChecks,
  type Rule,
  Rules,
  shapeOf
} from "../validation.js"

/** A relist scope: every part is required, so a whole run or candidate will do (other keys are not read). */
export const SCOPE_SHAPE: InputShape = openShapeOf(
  allOptionNames<RelistScope>()(["ownerDID", "connectorName", "model", "accountKey"])
)

/** A candidate identity: every part is required, so a whole candidate will do (other keys are not read). */
export const CANDIDATE_IDENTITY_SHAPE: InputShape = openShapeOf(
  allOptionNames<SweepCandidateIdentity>()(["ownerDID", "connectorName", "model", "accountKey", "sourceID"])
)

/** A list of receipts, each with only the fields of a `RelistReceiptInput`. */
export const RECEIPTS_TAKING: ListTaking = {
  list: shapeOf(allOptionNames<RelistReceiptInput>()(["sourceID", "digest"]))
}

/** A keyset page (`{ after?, limit }`). */
export const PAGE = fieldsOf<{ readonly after?: string; readonly limit: number }>("page", {
  after: optional(Rules.id),
  limit: Rules.positiveInt
})

/** The fields of a `SweepApplyFailure`. */
export const APPLY_FAILURE = fieldsOf<SweepApplyFailure>("failure", { kind: Rules.id, message: Rules.text })

/** The checks for a relist scope under `prefix`. */
export const scopeChecks = partChecks(["ownerDID", "connectorName", "model", "accountKey"])

/** The checks for a candidate reference (`{ runID, sourceID }`) under `prefix`. */
export const candidateRefChecks = partChecks(["runID", "sourceID"])

/** An array of receipts: objects with a non-empty `sourceID` and a `digest` string or null. */
export const receiptList: Rule = (value) => {
  if (!Array.isArray(value)) return "must be an array of receipts"
  for (let i = 0; i < value.length; i++) {
    const item: unknown = value[i]
    if (Rules.record(item) !== undefined) return `[${i}] must be an object`
    const sourceReason = Rules.id(fieldOf(item, "sourceID"))
    if (sourceReason !== undefined) return `[${i}].sourceID ${sourceReason}`
    const digestReason = Rules.digestOrNull(fieldOf(item, "digest"))
    if (digestReason !== undefined) return `[${i}].digest ${digestReason}`
  }
  return undefined
}

/** A fraction of a whole: a finite number from 0 to 1. */
export const fraction: Rule = (value) =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 && value <= 1
    ? undefined
    : "must be a number from 0 to 1"

/** A boolean. */
export const flag: Rule = (value) => typeof value === "boolean" ? undefined : "must be a boolean"


/** A candidate kind filter. */
export const candidateKind: Rule = oneOf("deleted", "diverged")

/** A sweep outcome. */
export const sweepOutcome: Rule = oneOf("delete_local", "reingest", "keep")
