import { allOptionNames } from "../optionNames.js"
import {
  type Check,
  fieldOf,
  fieldsOf,
  identityChecks,
  type InputShape,
  oneOf,
  openShapeOf,
  optional,
  orNull,
  Rules,
  shapeOf
} from "../validation.js"
import type { WatchIdentity } from "./ProjectionWatch.js"
import type { DeferInput, VerificationInput } from "./transitions.js"

/** A watch identity: every part is required, so a whole watch row will do (other keys are not read). */
export const IDENTITY_SHAPE: InputShape = openShapeOf(
  allOptionNames<WatchIdentity>()(["ownerDID", "connectorName", "model", "accountKey", "sourceID"])
)

/** The options of `deferWatch`. */
export const DEFER_SHAPE: InputShape = shapeOf(
  allOptionNames<DeferInput>()(["generation", "claimedUntil", "nextAttemptAt", "reason"])
)

const generation = Rules.nonNegativeInt
const VERIFICATION = fieldsOf<VerificationInput>("input", {
  generation,
  claimedUntil: optional(orNull(Rules.millis)),
  fetchedDigest: Rules.digestOrNull,
  maxAttempts: Rules.positiveInt,
  dueAt: Rules.millis
})

/** The input of `recordVerification`. */
export const VERIFICATION_SHAPE: InputShape = VERIFICATION.shape
const armReason = oneOf("ingress", "manual")
const optionalDigest = optional(Rules.digestOrNull)
const optionalDeferReason = optional(oneOf("offline", "auth", null))

/** The checks of `armWatch`'s arguments. */
export const armWatchChecks = (identity: unknown, reason: unknown, options: unknown): ReadonlyArray<Check> => {
  const checks = identityChecks(
    "identity",
    identity,
    ["options", options, Rules.record],
    ["options.dueAt", fieldOf(options, "dueAt"), Rules.millis],
    ["options.triggeringWinner", fieldOf(options, "triggeringWinner"), optionalDigest]
  )
  checks.unshift(["reason", reason, armReason])
  return checks
}

/** The checks of `claimWatchAttempt`'s arguments. */
export const claimWatchChecks = (identity: unknown, options: unknown): ReadonlyArray<Check> =>
  identityChecks(
    "identity",
    identity,
    ["options", options, Rules.record],
    ["options.until", fieldOf(options, "until"), Rules.millis],
    ["options.generation", fieldOf(options, "generation"), generation],
    ["options.now", fieldOf(options, "now"), Rules.millis]
  )

/** The checks of `deferWatch`'s arguments. */
export const deferWatchChecks = (identity: unknown, options: unknown): ReadonlyArray<Check> =>
  identityChecks(
    "identity",
    identity,
    ["options", options, Rules.record],
    ["options.nextAttemptAt", fieldOf(options, "nextAttemptAt"), Rules.millis],
    ["options.reason", fieldOf(options, "reason"), optionalDeferReason],
    ["options.generation", fieldOf(options, "generation"), generation],
    ["options.claimedUntil", fieldOf(options, "claimedUntil"), Rules.millis]
  )

/** The checks of `recordVerification`'s arguments. */
export const verificationChecks = (identity: unknown, input: unknown): ReadonlyArray<Check> =>
  VERIFICATION.checks(input, identityChecks("identity", identity))

/** The checks of `resumeAuthDeferred`'s parameters. */
export const resumeAuthChecks = (params: unknown): ReadonlyArray<Check> => [
  ["params", params, Rules.record],
  ["params.ownerDID", fieldOf(params, "ownerDID"), Rules.id],
  ["params.connectorNames", fieldOf(params, "connectorNames"), Rules.ids],
  ["params.now", fieldOf(params, "now"), Rules.millis]
]
