import { Effect, Option } from "effect"
import type { AttemptFailure, AttemptFailureResult, MarkSentResult } from "../operation/attempt.js"
import type { ClaimOperationInput, ClaimResult } from "../operation/claim.js"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import type { FinalizeDeleteInput, FinalizeDeleteResult, FinalizeOperationInput, FinalizeResult } from "../operation/finalize.js"
import type { RenewResult } from "../operation/lease.js"
import type { DocumentWriteState } from "../operation/reads.js"
import type { RenewLeaseOptions, TrackedOperationFilter, TrackedOperationsPage } from "../service/operations.js"
import type { PromiseCall } from "./call.js"

/**
 * The write-back operation methods of the Promise API: the Effect API's
 * methods with the same arguments and answers, absent rows as `null`.
 * Rejections are the store's tagged errors (`IdempotencyConflict`,
 * `InvalidInput`, …).
 */
export interface PromiseOperationMethods {
  claimOperation(input: ClaimOperationInput): Promise<ClaimResult>
  renewOperationLease(key: OperationKey, options: RenewLeaseOptions): Promise<RenewResult>
  markOperationSent(key: OperationKey, options: { readonly leaseToken: string }): Promise<MarkSentResult>
  recordAttemptFailure(key: OperationKey, options: AttemptFailure): Promise<AttemptFailureResult>
  finalizeOperationAndArmWatch(key: OperationKey, options: FinalizeOperationInput): Promise<FinalizeResult>
  finalizeDeleteOperation(key: OperationKey, options: FinalizeDeleteInput): Promise<FinalizeDeleteResult>
  getOperation(key: OperationKey): Promise<ConnectorOperation | null>
  getOperationByNodeKey(nodeKey: string, viewerDID: string): Promise<ConnectorOperation | null>
  listTrackedOperations(filter: TrackedOperationFilter): Promise<TrackedOperationsPage>
  getDocumentWriteStates(documentIDs: ReadonlyArray<string>): Promise<ReadonlyMap<string, DocumentWriteState>>
}

/** The write-back operation methods over `call`. */
export const promiseOperationMethods = (call: PromiseCall): PromiseOperationMethods => ({
  claimOperation: (input) => call((s) => s.claimOperation(input)),
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
