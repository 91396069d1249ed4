import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation, OperationKey } from "./ConnectorOperation.js"
import { changed, type OperationDecision, released, unchanged } from "./decision.js"
import { foldedDoubt } from "./doubt.js"
import { type FailoverDoubt, failoverSuspects } from "./failover.js"
import { holdsLiveLease, type Lease, leaseColumns, leaseOf } from "./lease.js"
import type { OperationPolicySettings } from "./policy.js"
import { type ReissueIntent, safeReissue, type SafeReissue } from "./reissue.js"
import { decideMarkSent } from "./attempt.js"
import { bump } from "../versioned.js"
import type { LimitedBy } from "../limits/ProviderLimit.js"

/** What a runner claims: the operation it is about to drive, keyed by the caller's idempotency key. */
export interface ClaimOperationInput extends Pick<
  ConnectorOperation,
  keyof OperationKey | "ownerDID" | "connectorName" | "model" | "op" | "accountKey" | "target" | "deterministicEventID" | "payloadHash"
> {
  /** The provider entity an update targets; a create learns its id on commit. */
  readonly sourceID?: string | null | undefined
  /** How the write may be re-sent once a request may have landed (see `ReissueIntent`); handed back as `claim.reissue`. */
  readonly reissueIntent: ReissueIntent
  /** The provider etag the edit is based on, if any. */
  readonly providerEtag?: string | null | undefined
  /** The local document the write comes from, if known before commit. */
  readonly documentID?: string | null | undefined
  /** How long the lease lasts; the policy's `leaseMs` when absent. */
  readonly leaseMs?: number | undefined
  /**
   * `true` when the request leaves right after the claim: a claim that leases also marks it sent (as
   * `markOperationSent`) in the same write, and the operation is in doubt from then on: if the runner dies before
   * its request leaves, the next claim gets a `reissue` (or `reconcile_only`), never a blind re-send. Leave it unset
   * when work that may fail comes between the claim and the send.
   */
  readonly markSent?: boolean | undefined
}

/** The random values a claim may use, drawn outside the pure decision. */
export interface FreshClaimValues {
  /** The public id a new key's row gets. */
  readonly nodeKey: string
  /** The new run's id. */
  readonly incarnation: string
  /** The new lease's token. */
  readonly leaseToken: string
}

/**
 * What `claimOperation` answers (a different payload for the key fails with `IdempotencyConflict`):
 *
 * - `claimed`: this runner holds the lease; `created` tells a new key from a replay; `reissue` is set whenever a request may have
 *   landed: re-send only as it says.
 * - `busy`: another runner's lease is live until `leaseExpiresAt`.
 * - `scheduled`: not due before `nextAttemptAt` (backoff, deferral), or a provider limit (`limitedBy`) kept it from leasing.
 * - `finished`: the operation is final (perhaps made so by this claim: out of attempts, or in doubt with no safe re-send).
 */
export type ClaimResult =
  | {
    readonly outcome: "claimed"
    readonly created: boolean
    readonly operation: ConnectorOperation
    readonly lease: Lease
    readonly reissue: SafeReissue | null
  }
  | { readonly outcome: "busy"; readonly operation: ConnectorOperation; readonly leaseExpiresAt: Millis }
  | {
    readonly outcome: "scheduled"
    readonly operation: ConnectorOperation
    readonly nextAttemptAt: Millis
    /** The provider limit that kept the claim from leasing; absent when the operation's own schedule did. */
    readonly limitedBy?: LimitedBy | undefined
  }
  | { readonly outcome: "finished"; readonly operation: ConnectorOperation }

/** A claim's decision, or the conflict of a reused key with another payload. */
export type ClaimDecision =
  | { readonly conflict: true }
  | ({ readonly conflict: false } & OperationDecision<ClaimResult>)

/** The row a new key inserts: attempted, no attempt spent, leased to the claimer. */
export const newOperation = (
  input: ClaimOperationInput,
  fresh: FreshClaimValues,
  leaseMs: number,
  now: Millis
): ConnectorOperation => ({
  callerDID: input.callerDID,
  operationID: input.operationID,
  nodeKey: fresh.nodeKey,
  ownerDID: input.ownerDID,
  connectorName: input.connectorName,
  model: input.model,
  op: input.op,
  accountKey: input.accountKey,
  target: input.target,
  sourceID: input.sourceID ?? null,
  deterministicEventID: input.deterministicEventID,
  payloadHash: input.payloadHash,
  reissueIntent: input.reissueIntent,
  providerEtag: input.providerEtag ?? null,
  documentID: input.documentID ?? null,
  resultEntity: null,
  state: "attempted",
  attempts: 0,
  lastKind: null,
  lastHTTPStatus: null,
  deferReason: null,
  sendMarker: null,
  inDoubtSince: null,
  version: 0,
  incarnation: fresh.incarnation,
  ...leaseColumns(fresh.leaseToken, now, leaseMs),
  createdAt: now,
  updatedAt: now
})

const decided = (decision: OperationDecision<ClaimResult>): ClaimDecision => ({ conflict: false, ...decision })

const finishes = (row: ConnectorOperation, state: "dead" | "reconcile_only", inDoubtSince: Millis | null, now: Millis): ClaimDecision =>
  decided(changed(
    bump(row, now, { state, ...released, nextAttemptAt: null, deferReason: null, inDoubtSince }),
    (next) => ({ outcome: "finished", operation: next })
  ))

/**
 * Decides a claim of `input`'s key against the stored row (if any), marking it sent in the same write when `input.markSent`
 * asks; under a failover's `doubt` (see `FailoverDoubt`) the claim is in doubt as after a crash past the mark.
 */
export const decideOperationClaim = (
  row: ConnectorOperation | undefined,
  input: ClaimOperationInput,
  fresh: FreshClaimValues,
  policy: OperationPolicySettings,
  now: Millis,
  doubt?: FailoverDoubt | undefined
): ClaimDecision => markedAtClaim(decideClaimLease(row, input, fresh, policy, now, doubt), input, policy, now)

/** `decision` with its leased attempt marked sent (`decideMarkSent` folded into the claim's one write) when `input.markSent` asks. */
export const markedAtClaim = (
  decision: ClaimDecision,
  input: ClaimOperationInput,
  policy: OperationPolicySettings,
  now: Millis
): ClaimDecision => {
  if (input.markSent !== true || decision.conflict || decision.result.outcome !== "claimed") return decision
  const claimed = decision.result
  const mark = decideMarkSent(claimed.operation, claimed.lease.token, policy, now)
  // A claim never leases an operation with no attempt left, so its mark is always `sent`.
  if (mark.next === undefined || mark.result.outcome !== "sent") throw new Error("a claim leased an attempt it could not mark sent")
  const next: ConnectorOperation = { ...mark.next, version: claimed.operation.version }
  return decided({ next, result: { ...claimed, operation: next } })
}

/**
 * Decides the lease of a claim (without its `markSent`): a new key inserts its row leased; a replay converges on the
 * stored row (`finished`, `busy`, `scheduled`, or a new lease). The previous run's marker is folded into
 * `inDoubtSince`; in doubt, a safe reissue intent is handed to the runner and anything else goes `reconcile_only`; out
 * of attempts it goes `dead` (or `reconcile_only` in doubt). Under a failover's `doubt`, a claim `failoverSuspects` is in
 * doubt from `now` even with no marker: a new key's row is inserted in doubt (leased with its reissue, or `reconcile_only`
 * unleased when its intent has no safe re-send), a known key's goes the in-doubt way above.
 */
export const decideClaimLease = (
  row: ConnectorOperation | undefined,
  input: ClaimOperationInput,
  fresh: FreshClaimValues,
  policy: OperationPolicySettings,
  now: Millis,
  doubt?: FailoverDoubt | undefined
): ClaimDecision => {
  const leaseMs = input.leaseMs ?? policy.leaseMs
  const suspect = failoverSuspects(row, doubt, now)
  if (row === undefined) {
    const next = newOperation(input, fresh, leaseMs, now)
    if (suspect) {
      const reissue = safeReissue(input.reissueIntent)
      if (reissue === undefined) {
        const parked: ConnectorOperation = { ...next, ...released, state: "reconcile_only", inDoubtSince: now }
        return decided({ result: { outcome: "finished", operation: parked }, next: parked })
      }
      const doubted: ConnectorOperation = { ...next, inDoubtSince: now }
      return decided({ result: { outcome: "claimed", created: true, operation: doubted, lease: leaseOf(doubted), reissue }, next: doubted })
    }
    return decided({ result: { outcome: "claimed", created: true, operation: next, lease: leaseOf(next), reissue: null }, next })
  }
  if (row.payloadHash !== input.payloadHash) return { conflict: true }
  if (row.state !== "attempted") return decided(unchanged({ outcome: "finished", operation: row }))
  if (holdsLiveLease(row, now)) {
    return decided(unchanged({ outcome: "busy", operation: row, leaseExpiresAt: row.leaseExpiresAt! }))
  }
  if (row.nextAttemptAt !== null && row.nextAttemptAt > now) {
    return decided(unchanged({ outcome: "scheduled", operation: row, nextAttemptAt: row.nextAttemptAt }))
  }
  const inDoubtSince = foldedDoubt(row, now) ?? (suspect ? now : null)
  const inDoubt = inDoubtSince !== null
  if (row.attempts >= policy.maxAttempts) return finishes(row, inDoubt ? "reconcile_only" : "dead", inDoubtSince, now)
  const reissue = inDoubt ? safeReissue(row.reissueIntent) : undefined
  if (inDoubt && reissue === undefined) return finishes(row, "reconcile_only", inDoubtSince, now)
  return decided(changed(
    bump(row, now, {
      ...leaseColumns(fresh.leaseToken, now, leaseMs),
      sendMarker: null,
      inDoubtSince,
      deferReason: null
    }),
    (next) => ({ outcome: "claimed", created: false, operation: next, lease: leaseOf(next), reissue: reissue ?? null })
  ))
}

/** Decides a worker's claim of a due operation as a replay of its own key would (`decideOperationClaim` with the stored payload). */
export const decideDueClaim = (
  row: ConnectorOperation,
  leaseToken: string,
  leaseMs: number,
  policy: OperationPolicySettings,
  now: Millis,
  doubt?: FailoverDoubt | undefined
): OperationDecision<ClaimResult> => {
  const decision = decideOperationClaim(
    row,
    { ...row, reissueIntent: row.reissueIntent as ReissueIntent, leaseMs },
    { nodeKey: row.nodeKey, incarnation: row.incarnation ?? leaseToken, leaseToken },
    policy,
    now,
    doubt
  )
  // The stored payload is the replay's own: a due claim never conflicts.
  if (decision.conflict) throw new Error("a due claim conflicted with its own row")
  return decision
}
