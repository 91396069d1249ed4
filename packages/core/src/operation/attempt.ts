import type { DeferReason, Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import { changed, type OperationDecision, released, unchanged } from "./decision.js"
import { foldedDoubt, isInDoubt, provesNotApplied } from "./doubt.js"
import { isLeaseHolder, leaseLost, type LeaseLost } from "./lease.js"
import { backoffDelay, type OperationPolicySettings } from "./policy.js"
import { bump } from "../versioned.js"
import { safeReissue } from "./reissue.js"

/** What `markOperationSent` answers: `sent`, `already-sent` (by this lease), or `exhausted` (now `dead`: do not send). */
export type MarkSentResult =
  | { readonly outcome: "sent" | "already-sent" | "exhausted"; readonly operation: ConnectorOperation }
  | LeaseLost

/** The attempts after counting one more, never past the limit. */
export const countAttempt = (attempts: number, policy: OperationPolicySettings): number =>
  Math.max(attempts, Math.min(attempts + 1, policy.maxAttempts))

/** True when this lease already counted its attempt (its token is the send marker). */
const countedBy = (row: ConnectorOperation, token: string): boolean => row.sendMarker === token

/**
 * Decides a send marker: the holder records its token and counts the attempt before the request leaves; out of attempts
 * the operation goes `dead` (`reconcile_only` in doubt).
 */
export const decideMarkSent = (
  row: ConnectorOperation | undefined,
  token: string,
  policy: OperationPolicySettings,
  now: Millis
): OperationDecision<MarkSentResult> => {
  if (row === undefined || !isLeaseHolder(row, token)) return unchanged(leaseLost(row))
  if (countedBy(row, token)) return unchanged({ outcome: "already-sent", operation: row })
  if (row.attempts >= policy.maxAttempts) {
    const state = isInDoubt(row) ? "reconcile_only" : "dead"
    const inDoubtSince = foldedDoubt(row, now)
    return changed(
      bump(row, now, { state, ...released, nextAttemptAt: null, lastKind: "exhausted", inDoubtSince }),
      (next) => ({ outcome: "exhausted", operation: next })
    )
  }
  return changed(
    bump(row, now, { sendMarker: token, attempts: row.attempts + 1, inDoubtSince: foldedDoubt(row, now) }),
    (next) => ({ outcome: "sent", operation: next })
  )
}

/** How an attempt failed: `retryable`, `permanent`, `unknown` (it may have applied), or `offline` / `auth` (it did not leave). */
export type FailureKind = "retryable" | "permanent" | "unknown" | DeferReason

/** A failed attempt, reported by its lease holder. */
export interface AttemptFailure {
  /** The token of the claim's lease (`claim.lease.token`). */
  readonly leaseToken: string
  /** What the provider call ran into (see `FailureKind`); `unknown` when it cannot be told. */
  readonly kind: FailureKind
  /** The provider's HTTP status, if it answered. */
  readonly httpStatus?: number | null | undefined
  /** Whether the answer proves the provider did not apply the request; absent, a 4xx `httpStatus` proves it, anything else does not. */
  readonly notApplied?: boolean | undefined
  /** `retryable`: the earliest next attempt (a Retry-After); `offline` / `auth`: when to try again (the policy's `deferMs` when absent). */
  readonly retryAt?: Millis | undefined
}

/** What `recordAttemptFailure` answers: the state the operation went to, or the lost lease. */
export type AttemptFailureResult =
  | { readonly outcome: "retrying" | "dead" | "reconcile_only" | "deferred"; readonly operation: ConnectorOperation }
  | LeaseLost

/** True when this failure's own request may have landed (see `AttemptFailure.notApplied`). */
export const failureAddsDoubt = (failure: AttemptFailure): boolean => {
  switch (failure.kind) {
    case "offline":
    case "auth":
      return false
    case "unknown":
      return true
    case "retryable":
    case "permanent":
      return !(failure.notApplied ?? provesNotApplied(failure.httpStatus))
  }
}

/**
 * Decides a failed attempt of the lease holder; the lease is released. `offline` / `auth` defer without spending an
 * attempt; `retryable` backs off, or ends `dead` (`reconcile_only` in doubt) when out of attempts; `permanent` is
 * `dead`; `unknown` leaves the operation in doubt as a crash past the mark would: with a safe reissue intent and an
 * attempt left it backs off and its re-drive gets the `reissue`, otherwise it is `reconcile_only` (the run's marker
 * kept, so it may still finalize). No earlier doubt is cleared.
 */
export const decideAttemptFailure = (
  row: ConnectorOperation | undefined,
  failure: AttemptFailure,
  policy: OperationPolicySettings,
  random: number,
  now: Millis
): OperationDecision<AttemptFailureResult> => {
  if (row === undefined || !isLeaseHolder(row, failure.leaseToken)) return unchanged(leaseLost(row))
  const counted = countedBy(row, failure.leaseToken)
  const spent = counted ? row.attempts : countAttempt(row.attempts, policy)
  // A marker of another run (a row no claim of this store folded) is never this failure's to clear.
  const before = counted ? row.inDoubtSince : foldedDoubt(row, now)
  const inDoubtSince = failureAddsDoubt(failure) ? before ?? now : before
  const lastHTTPStatus = failure.httpStatus ?? null
  const common = { ...released, lastKind: failure.kind, lastHTTPStatus, deferReason: null, inDoubtSince }
  const to = (outcome: "retrying" | "dead" | "reconcile_only" | "deferred", patch: Partial<ConnectorOperation>) =>
    changed(bump(row, now, { ...common, ...patch }), (next) => ({ outcome, operation: next }))
  const reconcile = () =>
    to("reconcile_only", { state: "reconcile_only", attempts: spent, sendMarker: failure.leaseToken, nextAttemptAt: null })
  const retrying = () =>
    to("retrying", {
      attempts: spent,
      sendMarker: null,
      nextAttemptAt: Math.max(now + backoffDelay(spent, policy.backoff, random), failure.retryAt ?? 0)
    })
  switch (failure.kind) {
    case "offline":
    case "auth":
      return to("deferred", {
        attempts: counted ? row.attempts - 1 : row.attempts,
        sendMarker: null,
        deferReason: failure.kind,
        nextAttemptAt: failure.retryAt ?? now + policy.deferMs
      })
    case "unknown":
      if (spent >= policy.maxAttempts || safeReissue(row.reissueIntent) === undefined) return reconcile()
      return retrying()
    case "permanent":
      return to("dead", { state: "dead", attempts: spent, sendMarker: null, nextAttemptAt: null })
    case "retryable":
      if (spent >= policy.maxAttempts) {
        return inDoubtSince !== null
          ? reconcile()
          : to("dead", { state: "dead", attempts: spent, sendMarker: null, nextAttemptAt: null })
      }
      return retrying()
  }
}
