import type { AttemptFailure, AttemptFailureResult } from "../operation/attempt.js"
import { type ClaimDecision, decideClaimLease, type ClaimOperationInput, type FreshClaimValues, markedAtClaim } from "../operation/claim.js"
import type { ConnectorOperation } from "../operation/ConnectorOperation.js"
import type { FailoverDoubt } from "../operation/failover.js"
import { released } from "../operation/decision.js"
import type { OperationPolicySettings } from "../operation/policy.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import type { ClaimLimit, PauseRequest } from "./decisions.js"

/**
 * A claim under provider limits: `decideOperationClaim`, except that one that would lease while `limit` holds is `scheduled` at
 * its end instead (a new key's row inserted unleased).
 */
export const decideLimitedClaim = (
  row: ConnectorOperation | undefined,
  input: ClaimOperationInput,
  fresh: FreshClaimValues,
  policy: OperationPolicySettings,
  limit: ClaimLimit | undefined,
  now: Millis,
  doubt?: FailoverDoubt | undefined
): ClaimDecision => {
  const decision = decideClaimLease(row, input, fresh, policy, now, doubt)
  if (limit === undefined || decision.conflict || decision.result.outcome !== "claimed") return markedAtClaim(decision, input, policy, now)
  const limitedBy = { scope: limit.scope, reason: limit.reason }
  if (row === undefined) {
    const next: ConnectorOperation = { ...decision.next!, ...released, nextAttemptAt: limit.until }
    return { conflict: false, next, result: { outcome: "scheduled", operation: next, nextAttemptAt: limit.until, limitedBy } }
  }
  return { conflict: false, next: undefined, result: { outcome: "scheduled", operation: row, nextAttemptAt: limit.until, limitedBy } }
}

/** The HTTP status that pauses a provider account for every runner. */
export const TOO_MANY_REQUESTS = 429

/** The pause a retryable 429 puts on its operation's account: until `retryAt`, else the operation's next attempt; nothing otherwise. */
export const pauseAfterFailure = (failure: AttemptFailure, result: AttemptFailureResult, now: Millis): PauseRequest | undefined => {
  if (failure.kind !== "retryable" || failure.httpStatus !== TOO_MANY_REQUESTS || result.outcome === "lease-lost") return undefined
  const until = failure.retryAt ?? result.operation?.nextAttemptAt ?? undefined
  return until === undefined || until <= now ? undefined : { until, status: TOO_MANY_REQUESTS }
}
