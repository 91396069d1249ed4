import { allOptionNames } from "../optionNames.js"
import {
  atMost,
  type Check,
  EXACT_JSON,
  fieldOf,
  fieldsOf,
  type InputShape,
  oneOf,
  openShapeOf,
  optional,
  orNull,
  partChecks,
  type Rule,
  Rules,
  shapeOf
} from "../validation.js"
import { jsonProblem } from "./json.js"
import type { SyncLeaseHolder, SyncLeaseTerms } from "./lease.js"
import type { SyncProgressCASResult } from "./progress.js"
import type { SyncStateInput } from "./setState.js"
import { blankSyncState, SYNC_STATUSES, type SyncStateEntry, type SyncStateKey, type SyncStateRow } from "./SyncState.js"

/** The largest `entityCount` the store keeps: 2^31 - 1 on every adapter. */
export const MAX_ENTITY_COUNT = 2_147_483_647

/** An entity count: a non-negative integer of at most `MAX_ENTITY_COUNT`. */
export const entityCountRule: Rule = atMost(Rules.nonNegativeInt, MAX_ENTITY_COUNT)

const errorRule = orNull(Rules.text)

/** A JSON value the store keeps exactly (see `jsonProblem`); the reason names a path, never a value. */
export const jsonRule: Rule = (value) => {
  const problem = jsonProblem(value)
  return problem === undefined ? undefined : `must be a JSON value: ${problem}`
}

/** A JSON value `EXACT_JSON` took (checked as it was copied): only its absence is left to refuse. */
const takenJson: Rule = (value) => value === undefined ? "must be a JSON value: $ is a undefined, not a JSON value" : undefined

/** A `SyncStateInput`'s fields (checkpoint and recovery checked as they are taken); a state's other fields read back are ignored. */
const STATE = fieldsOf<SyncStateInput>("state", {
  status: oneOf(...SYNC_STATUSES),
  lastSyncedAt: Rules.text,
  entityCount: entityCountRule,
  error: optional(errorRule),
  checkpoint: undefined,
  recovery: undefined
}, {
  nested: { checkpoint: EXACT_JSON, recovery: EXACT_JSON },
  ignored: allOptionNames<Omit<SyncStateEntry, keyof SyncStateInput>>()(["connectorName", "ownerDID", "leaseExpiresAt", "version", "incarnation"])
})

/** The fields of a `SyncStateInput`; a state's other fields read back are allowed and ignored, any other key is refused. */
export const SYNC_STATE_SHAPE: InputShape = STATE.shape

/** A sync lease handed back: every part is required, so a whole `SyncLease` will do (other keys are not read). */
export const LEASE_HOLDER_SHAPE: InputShape = openShapeOf(
  allOptionNames<SyncLeaseHolder>()(["connectorName", "ownerDID", "token"])
)

/** What a recompute returns must be an object, given synchronously (checked before its fields are taken). */
export const recomputeResultRule: Rule = (value) =>
  typeof fieldOf(value, "then") === "function" ? "must return its result synchronously, not a Promise" : Rules.record(value)

/** Fields of a row a progress write never changes: a result may carry them only as copies of what is stored. */
const UNWRITTEN_BY_PROGRESS = ["connectorName", "ownerDID", "version", "incarnation", "status", "leaseExpiresAt", "leaseToken"] as const

/** What a recompute may return: its progress fields, and copies of the fields a progress write never changes. */
export const PROGRESS_RESULT_SHAPE: InputShape = shapeOf(
  [
    ...allOptionNames<SyncProgressCASResult>()(["checkpoint", "recovery", "lastSyncedAt", "entityCount", "error"]),
    ...UNWRITTEN_BY_PROGRESS
  ],
  { checkpoint: EXACT_JSON, recovery: EXACT_JSON }
)

/** The checks of a connector name and owner DID given as arguments. */
export const syncStateKeyChecks = (connectorName: unknown, ownerDID: unknown): ReadonlyArray<Check> => [
  ["connectorName", connectorName, Rules.id],
  ["ownerDID", ownerDID, Rules.id]
]

/** The checks of a `setSyncState` input. */
export const syncStateInputChecks = (input: unknown): ReadonlyArray<Check> => STATE.checks(input)

/**
 * The checks of what a recompute returned against `row` (or the blank row of `key`): JSON checkpoint and recovery, report
 * fields as `setSyncState` takes them, and any field a progress write never changes absent or equal to the stored one.
 */
export const progressResultChecks = (result: unknown, row: SyncStateRow | undefined, key: SyncStateKey): ReadonlyArray<Check> => {
  const stored: SyncStateRow = row ?? { ...blankSyncState(key, ""), incarnation: null }
  return [
    ["recompute()", result, recomputeResultRule],
    ["recompute().checkpoint", fieldOf(result, "checkpoint"), takenJson],
    ["recompute().recovery", fieldOf(result, "recovery"), takenJson],
    ["recompute().lastSyncedAt", fieldOf(result, "lastSyncedAt"), optional(Rules.text)],
    ["recompute().entityCount", fieldOf(result, "entityCount"), optional(entityCountRule)],
    ["recompute().error", fieldOf(result, "error"), optional(errorRule)],
    ...UNWRITTEN_BY_PROGRESS.map((field): Check => [`recompute().${field}`, fieldOf(result, field), (v) =>
      v === undefined || v === stored[field] || (field === "incarnation" && v === null && row === undefined)
        ? undefined
        : row === undefined && (field === "version" || field === "incarnation")
        ? "must be absent: there is no row yet (the recompute was given null)"
        : `must be absent or the stored value: a progress write never changes ${field}`])
  ]
}

/** The longest lease a claim or renewal may ask for: one day. */
export const MAX_SYNC_LEASE_MS = 24 * 60 * 60 * 1000

const TERMS = fieldsOf<SyncLeaseTerms>("options", { now: Rules.millis, leaseMs: atMost(Rules.positiveInt, MAX_SYNC_LEASE_MS) })

/** The terms of a sync-lease claim or renewal. */
export const LEASE_TERMS_SHAPE: InputShape = TERMS.shape

/** The checks of the `{ now, leaseMs }` terms of a claim or renewal. */
export const leaseTermsChecks = (terms: unknown): ReadonlyArray<Check> =>
  TERMS.checks(terms).concat([["options.leaseMs", fieldOf(terms, "leaseMs"), (v) =>
    Number.isSafeInteger((fieldOf(terms, "now") as number) + (v as number)) ? undefined : "puts the expiry past the largest safe integer"]])

const holderChecks = partChecks(["connectorName", "ownerDID", "token"])

/** The checks of a lease handed back by its holder. */
export const leaseChecks = (lease: unknown): ReadonlyArray<Check> => holderChecks("lease", lease)

/** The checks of the fence (`options.leaseToken`) of a sync-state write. */
export const fenceChecks = (options: unknown): ReadonlyArray<Check> => [
  ["options", options, optional(Rules.record)],
  ["options.leaseToken", fieldOf(options, "leaseToken"), optional(Rules.id)]
]
