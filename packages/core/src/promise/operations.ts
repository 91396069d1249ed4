import { Effect, Option } from "effect"
import type { AttemptFailure, AttemptFailureResult, MarkSentResult } from "../operation/attempt.js"
import type { ClaimOperationInput, ClaimResult } from "../operation/claim.js"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import type { FinalizeDeleteInput, FinalizeDeleteResult, FinalizeOperationInput, FinalizeResult } from "../operation/finalize.js"
import type { RenewResult } from "../operation/lease.js"
import type { DocumentWriteState } from "../operation/reads.js"
import type { DueClaimParams, DueClaims, DueWatchClaimParams, DueWatchClaims } from "../service/dueClaims.js"
import type { RenewLeaseOptions, TrackedOperationFilter, TrackedOperationsPage } from "../service/operations.js"
import type { PromiseCall } from "./call.js"

/**
 * The write-back operation methods of the Promise API: the Effect API's
 * methods with the same arguments and answers, absent rows as `null`.
 * Rejections are the store's tagged errors (`IdempotencyConflict`,
 * `InvalidInput`, …).
 */
export interface PromiseOperationMethods {
  /**
   * Claims the write-back of one idempotency key before its provider call: `claimed` (a new operation, or a
   * lease on one whose earlier try ended or lapsed), else why not now (`busy`, `scheduled`, `finished`).
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow, IdempotencyConflict (the
   *   key was claimed with another payload)
   */
  claimOperation(input: ClaimOperationInput): Promise<ClaimResult>
  /**
   * Leases up to `limit` due operations to this worker in one transaction, disjoint from what other workers'
   * batches lease at the same time; each comes back as a `claimed` answer to drive, or `finished` when the
   * claim ended it.
   *
   * @throws InvalidInput, PersistenceError
   */
  claimDueOperations(params: DueClaimParams): Promise<DueClaims>
  /**
   * Claims up to `limit` watches due for verification until `until` in one transaction, disjoint from what
   * other workers' batches claim at the same time; verify each and record it with `recordVerification`.
   *
   * @throws InvalidInput, PersistenceError
   */
  claimDueWatches(params: DueWatchClaimParams): Promise<DueWatchClaims>
  /**
   * Extends the lease of a claimed operation while its provider call runs; `lease-lost` once another runner
   * took it over.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  renewOperationLease(key: OperationKey, options: RenewLeaseOptions): Promise<RenewResult>
  /**
   * Records, just before the provider call, that the request is about to leave: from then on a crash makes
   * the operation in doubt instead of re-sending it blindly.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  markOperationSent(key: OperationKey, options: { readonly leaseToken: string }): Promise<MarkSentResult>
  /**
   * Records a failed provider call: retried after a backoff, deferred without spending an attempt (offline,
   * expired grant), or given up (`dead`).
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  recordAttemptFailure(key: OperationKey, options: AttemptFailure): Promise<AttemptFailureResult>
  /**
   * Commits a create or update the provider applied and arms its entity's watch, with the document's winner
   * read (by the store's reader) in the same transaction.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow, WinnerReaderMissing,
   *   WinnerReadFailed
   */
  finalizeOperationAndArmWatch(key: OperationKey, options: FinalizeOperationInput): Promise<FinalizeResult>
  /**
   * Commits a delete the provider applied and retires its entity's watch in the same transaction.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  finalizeDeleteOperation(key: OperationKey, options: FinalizeDeleteInput): Promise<FinalizeDeleteResult>
  /**
   * The operation of one idempotency key, or `null`.
   *
   * @throws InvalidInput, PersistenceError, CorruptRow
   */
  getOperation(key: OperationKey): Promise<ConnectorOperation | null>
  /**
   * The operation that wrote the entity of `nodeKey`, when `viewerDID` may see it; else `null`.
   *
   * @throws InvalidInput, PersistenceError, CorruptRow
   */
  getOperationByNodeKey(nodeKey: string, viewerDID: string): Promise<ConnectorOperation | null>
  /**
   * One page of the operations `filter.visibleTo` may see; pass `nextCursor` back for the next.
   *
   * @throws InvalidInput (a filter field, or a cursor this store did not return), PersistenceError
   */
  listTrackedOperations(filter: TrackedOperationFilter): Promise<TrackedOperationsPage>
  /**
   * Per document, whether a write-back of it is still pending: a sync skips those, so it does not ingest its
   * own write half-way.
   *
   * @throws InvalidInput, PersistenceError
   */
  getDocumentWriteStates(documentIDs: ReadonlyArray<string>): Promise<ReadonlyMap<string, DocumentWriteState>>
}

/** The write-back operation methods over `call`. */
export const promiseOperationMethods = (call: PromiseCall): PromiseOperationMethods => ({
  claimOperation: (input) => call((s) => s.claimOperation(input)),
  claimDueOperations: (params) => call((s) => s.claimDueOperations(params)),
  claimDueWatches: (params) => call((s) => s.claimDueWatches(params)),
  renewOperationLease: (key, options) => call((s) => s.renewOperationLease(key, options)),
  markOperationSent: (key, options) => call((s) => s.markOperationSent(key, options)),
  recordAttemptFailure: (key, options) => call((s) => s.recordAttemptFailure(key, options)),
  finalizeOperationAndArmWatch: (key, options) => call((s) => s.finalizeOperationAndArmWatch(key, options)),
  finalizeDeleteOperation: (key, options) => call((s) => s.finalizeDeleteOperation(key, options)),
  getOperation: (key) => call((s) => Effect.map(s.getOperation(key), Option.getOrNull)),
  getOperationByNodeKey: (nodeKey, viewerDID) =>
    call((s) => Effect.map(s.getOperationByNodeKey(nodeKey, viewerDID), Option.getOrNull)),
  listTrackedOperations: (filter) => call((s) => s.listTrackedOperations(filter)),
  getDocumentWriteStates: (documentIDs) => call((s) => s.getDocumentWriteStates(documentIDs))
})
