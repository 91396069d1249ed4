import type { Millis } from "../watch/ProjectionWatch.js"
import type { ClaimOperationInput, FreshClaimValues } from "./claim.js"
import { newOperation } from "./claim.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import { type OperationDecision, released, unchanged } from "./decision.js"
import { type FailoverDoubt, failoverSuspects } from "./failover.js"

/** What an app hands over with `enqueueOperation`: a claim's input without the lease, which a worker takes later. */
export type EnqueueOperationInput = Omit<ClaimOperationInput, "leaseMs" | "markSent">

/**
 * What `enqueueOperation` answers (a different payload for a known key fails with `IdempotencyConflict`):
 *
 * - `enqueued`: the key is new; its operation is stored attempted, due now, with no lease and no attempt spent.
 * - `known`: the key was recorded before (enqueued, claimed or finished); nothing was written, and `operation` is the row as
 *   stored.
 */
export type EnqueueResult =
  | { readonly outcome: "enqueued"; readonly operation: ConnectorOperation }
  | { readonly outcome: "known"; readonly operation: ConnectorOperation }

/** An enqueue's decision, or the conflict of a reused key with another payload. */
export type EnqueueDecision =
  | { readonly conflict: true }
  | ({ readonly conflict: false } & OperationDecision<EnqueueResult>)

/** The random values an enqueue of a new key uses, drawn outside the pure decision. */
export type FreshEnqueueValues = Omit<FreshClaimValues, "leaseToken">

/** The row a new key's enqueue inserts: attempted, no attempt spent, no lease, due at `now`. */
export const queuedOperation = (input: EnqueueOperationInput, fresh: FreshEnqueueValues, now: Millis): ConnectorOperation => ({
  ...newOperation(input, { ...fresh, leaseToken: fresh.nodeKey }, 0, now),
  ...released,
  nextAttemptAt: now
})

/**
 * Decides an enqueue of `input`'s key against the stored row (if any): a new key inserts its queued row; a known key with the
 * same payload changes nothing, whatever its state; another payload is a conflict. Under a failover's `doubt` a new key's
 * row is queued in doubt, so that whichever claim takes it, inside the window or after it, hands it out as in doubt.
 */
export const decideEnqueue = (
  row: ConnectorOperation | undefined,
  input: EnqueueOperationInput,
  fresh: FreshEnqueueValues,
  now: Millis,
  doubt?: FailoverDoubt | undefined
): EnqueueDecision => {
  if (row === undefined) {
    const queued = queuedOperation(input, fresh, now)
    const next = failoverSuspects(undefined, doubt, now) ? { ...queued, inDoubtSince: now } : queued
    return { conflict: false, next, result: { outcome: "enqueued", operation: next } }
  }
  if (row.payloadHash !== input.payloadHash) return { conflict: true }
  return { conflict: false, ...unchanged({ outcome: "known", operation: row }) }
}
