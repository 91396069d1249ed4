import type { DeferReason, Digest, Millis, ProjectionWatch } from "./ProjectionWatch.js"
import { bump, changed, type Decided, unchanged } from "../versioned.js"

/** What a watch transition decided: an outcome, and the row to write at the version read. */
export type Decision<O extends string> = Decided<ProjectionWatch, O>

/** Why a caller arms a watch (`finalize` is the store's own: `armWatch` refuses it with `ReservedArmReason`). */
export type ArmReason = "ingress" | "manual"

/** What `armWatch` did. */
export type ArmOutcome = "noop" | "opened" | "coalesced"

/** The inputs of an arm. */
export interface ArmInput {
  /** `ingress` (a sync pulled a change of the entity) or `manual` (an operator or the app asks for a check). */
  readonly reason: "ingress" | "manual"
  /** When the (re)opened or coalesced attempt falls due. */
  readonly dueAt: Millis
  /** For `ingress`: the winner digest the triggering event produced. */
  readonly triggeringWinner?: Digest | null | undefined
}

/** Opens a new repair generation against `winner`: attempts reset, pending, due at `dueAt`, no claim or deferral. */
export const openGeneration = (row: ProjectionWatch, winner: Digest | null, dueAt: Millis, now: Millis): ProjectionWatch =>
  bump(row, now, {
    repairGeneration: row.repairGeneration + 1,
    verificationAttempts: 0,
    verificationStatus: "pending_verification",
    observedWinnerDigest: winner,
    nextAttemptAt: dueAt,
    claimedUntil: null,
    deferReason: null
  })

/** The ingress gate: an event re-arms a watch only when it produced the current winner and that winner is news to both watermarks. */
export const passesIngressGate = (row: ProjectionWatch, triggering: Digest | null | undefined, winner: Digest | null): boolean =>
  triggering != null &&
  triggering === winner &&
  triggering !== row.verifiedStateDigest &&
  triggering !== row.observedWinnerDigest

/**
 * Decides an arm: no row is `noop`; `manual` opens a new generation; `ingress` past its gate opens a settled watch and
 * coalesces into a pending one.
 */
export const decideArm = (
  row: ProjectionWatch | undefined,
  input: ArmInput,
  winner: Digest | null,
  now: Millis
): Decision<ArmOutcome> => {
  if (row === undefined) return unchanged("noop")
  if (input.reason === "manual") return changed("opened", openGeneration(row, winner, input.dueAt, now))
  if (!passesIngressGate(row, input.triggeringWinner, winner)) return unchanged("noop")
  if (row.verificationStatus !== "pending_verification") {
    return changed("opened", openGeneration(row, winner, input.dueAt, now))
  }
  const next = row.nextAttemptAt === null ? input.dueAt : Math.min(row.nextAttemptAt, input.dueAt)
  return changed("coalesced", bump(row, now, { nextAttemptAt: next }))
}

/** What `claimWatchAttempt` did. */
export type ClaimOutcome = "claimed" | "not-claimable"

/** The inputs of a claim. */
export interface ClaimInput {
  /** The watch's `repairGeneration` as the due sweep listed it: a claim of an older generation is refused. */
  readonly generation: number
  /** The claim's expiry. */
  readonly until: Millis
}

/** True when a verifier still holds the row's current attempt at `now`. */
export const hasLiveClaim = (row: ProjectionWatch, now: Millis): boolean =>
  row.claimedUntil !== null && row.claimedUntil > now

/** Decides a claim: a pending row of that generation, due and under no live claim, is claimed until `until`. */
export const decideClaim = (
  row: ProjectionWatch | undefined,
  input: ClaimInput,
  now: Millis,
  writtenAt: Millis = now
): Decision<ClaimOutcome> =>
  row !== undefined &&
    row.verificationStatus === "pending_verification" &&
    row.repairGeneration === input.generation &&
    row.nextAttemptAt !== null &&
    row.nextAttemptAt <= now &&
    !hasLiveClaim(row, now)
    ? changed("claimed", bump(row, writtenAt, { claimedUntil: input.until }))
    : unchanged("not-claimable")

/** What `deferWatch` did. */
export type DeferOutcome = "deferred" | "not-holder"

/** The inputs of a deferral. */
export interface DeferInput {
  /** The watch's `repairGeneration` the claim was made for. */
  readonly generation: number
  /** The claim the caller holds (the `until` it claimed with). */
  readonly claimedUntil: Millis
  /** When the attempt falls due again, on the store's clock. */
  readonly nextAttemptAt: Millis
  /** Why (`offline`, `auth`): a reason that lapses on its own (a resume brings the attempt back). */
  readonly reason?: DeferReason | null | undefined
}

/** Decides a deferral: only the current claim's holder pushes the attempt out, releasing the claim. */
export const decideDefer = (
  row: ProjectionWatch | undefined,
  input: DeferInput,
  now: Millis
): Decision<DeferOutcome> =>
  row !== undefined &&
    row.verificationStatus === "pending_verification" &&
    row.repairGeneration === input.generation &&
    row.claimedUntil === input.claimedUntil
    ? changed(
      "deferred",
      bump(row, now, { nextAttemptAt: input.nextAttemptAt, deferReason: input.reason ?? null, claimedUntil: null })
    )
    : unchanged("not-holder")

/** What `recordVerification` did. */
export type VerificationOutcome = "verified" | "pending" | "repair_failed" | "stale-generation" | "stale-claim"

/** The inputs of a verification result. */
export interface VerificationInput {
  /** The watch's `repairGeneration` the verifier claimed: a result for another generation is `stale-generation`. */
  readonly generation: number
  /** The claim the verifier held, if it claimed. */
  readonly claimedUntil?: Millis | null | undefined
  /** The digest the verifier fetched from the provider and projected. */
  readonly fetchedDigest: Digest | null
  /** Attempts after which a still-mismatching generation is given up. */
  readonly maxAttempts: number
  /** When the next attempt falls due if this one did not settle it. */
  readonly dueAt: Millis
}

/** Why a verification result is stale (another generation, or a claim no longer held), before the winner is read. */
export const staleVerification = (
  row: ProjectionWatch | undefined,
  input: Pick<VerificationInput, "generation" | "claimedUntil">
): "stale-generation" | "stale-claim" | undefined =>
  row === undefined || row.repairGeneration !== input.generation
    ? "stale-generation"
    : input.claimedUntil != null && row.claimedUntil !== input.claimedUntil
    ? "stale-claim"
    : undefined

/**
 * Decides a verification result against the current winner: a match verifies; a mismatch spends an attempt and
 * reschedules or gives up (`repair_failed`). Neither moves `observedWinnerDigest`, so a winner that moved during the
 * generation is still news to the ingress gate and the audit.
 */
export const decideVerification = (
  row: ProjectionWatch | undefined,
  input: VerificationInput,
  winner: Digest | null,
  now: Millis
): Decision<VerificationOutcome> => {
  const stale = staleVerification(row, input)
  if (stale !== undefined || row === undefined) return unchanged(stale ?? "stale-generation")
  const settled = { nextAttemptAt: null, claimedUntil: null, deferReason: null } as const
  if (input.fetchedDigest !== null && input.fetchedDigest === winner) {
    return changed("verified", bump(row, now, {
      ...settled,
      verificationStatus: "verified",
      verifiedStateDigest: winner,
      observedWinnerDigest: winner
    }))
  }
  const attempts = row.verificationAttempts + 1
  if (attempts >= input.maxAttempts) {
    return changed("repair_failed", bump(row, now, {
      ...settled,
      verificationStatus: "repair_failed",
      verificationAttempts: attempts
    }))
  }
  return changed("pending", bump(row, now, {
    verificationAttempts: attempts,
    nextAttemptAt: input.dueAt,
    claimedUntil: null,
    deferReason: null
  }))
}

/** Which deferred rows a resume reaches. */
export type ResumeScope =
  | { readonly reason: "offline" }
  | { readonly reason: "auth"; readonly ownerDID: string; readonly connectorNames: ReadonlyArray<string> }

/** True when `scope` resumes a row deferred for `deferReason` under that owner and connector. */
export const resumeReaches = (
  scope: ResumeScope,
  row: { readonly deferReason: DeferReason | null; readonly ownerDID: string; readonly connectorName: string }
): boolean =>
  row.deferReason === scope.reason &&
  (scope.reason === "offline" || (row.ownerDID === scope.ownerDID && scope.connectorNames.includes(row.connectorName)))

/** Makes a pending watch deferred within `scope` due now, reason cleared; any other row is left alone (`undefined`). */
export const resumeDeferredWatch = (row: ProjectionWatch, scope: ResumeScope, now: Millis): ProjectionWatch | undefined =>
  row.verificationStatus === "pending_verification" && resumeReaches(scope, row)
    ? bump(row, now, { nextAttemptAt: now, deferReason: null })
    : undefined

/** The schedule branch of the due sweep: an unsettled watch whose attempt has fallen due. */
export const isScheduleDue = (row: ProjectionWatch, now: Millis): boolean =>
  row.verificationStatus !== "verified" && row.nextAttemptAt !== null && row.nextAttemptAt <= now

/** True for the statuses the audit branch looks at: settled rows with no schedule of their own. */
export const isAuditCandidate = (row: ProjectionWatch): boolean =>
  row.verificationStatus === "verified" || row.verificationStatus === "repair_failed"

/** The audit branch of the due sweep: a settled watch whose winner is news to both watermarks (an ingress re-arm a crash may have lost). */
export const isAuditDiverged = (row: ProjectionWatch, winner: Digest): boolean =>
  isAuditCandidate(row) && winner !== row.verifiedStateDigest && winner !== row.observedWinnerDigest
