import type { Effect } from "effect"
import { allOptionNames } from "../optionNames.js"
import type { ConnectorStoreApi } from "../service/ConnectorStore.js"
import type { DueClaimMethods } from "../service/dueClaims.js"
import type { LimitMethods } from "../service/limits.js"
import type { OperationMethods } from "../service/operations.js"
import type { OperatorMethods } from "../service/operator.js"
import type { PendingAuthMethods } from "../service/pendingAuth.js"
import type { RelistRunMethods } from "../service/relist.js"
import type { SweepCandidateMethods } from "../service/relistCandidates.js"
import type { SweepMethods } from "../service/sweep.js"
import type { SyncStateMethods } from "../service/syncState.js"
import type { WatchMethods } from "../service/watches.js"
import type { PromiseAdaptedMethods } from "./adapted.js"
import type { PromiseAnswer, PromiseCall } from "./call.js"

/** An Effect API as Promises: the same arguments, resolving with the answer (`PromiseAnswer`), rejecting with the failure. */
export type PromiseMethods<Api> = {
  readonly [Method in keyof Api]: Api[Method] extends (...args: infer Args) => Effect.Effect<infer A, infer _E, infer _R>
    ? (...args: Args) => Promise<PromiseAnswer<A>>
    : never
}

/** The projection-watch and due-sweep methods of the Promise API; `H` is the handle winner readers get. */
export interface PromiseWatchMethods<H>
  extends PromiseMethods<WatchMethods>, Omit<PromiseMethods<SweepMethods>, "listDueOperations" | "listDueWork">,
    Pick<PromiseAdaptedMethods<H>, "listDueOperations" | "listDueWork">
{}

/** The sync-state, sync-lease and pending-OAuth methods of the Promise API. */
export interface PromiseSyncStateMethods extends PromiseMethods<SyncStateMethods>,
  Omit<PromiseMethods<PendingAuthMethods>, "createPendingAuth" | "consumePendingAuth">,
  Pick<PromiseAdaptedMethods<unknown>, "createPendingAuth" | "consumePendingAuth">
{}

/** The relist sweep methods of the Promise API; `H` is the handle an `applySweepCandidate` callback gets. */
export interface PromiseRelistMethods<H = undefined>
  extends PromiseMethods<RelistRunMethods>, Omit<PromiseMethods<SweepCandidateMethods>, "applySweepCandidate">,
    Pick<PromiseAdaptedMethods<H>, "applySweepCandidate">
{}

/** The write-back operation methods of the Promise API. */
export interface PromiseOperationMethods extends PromiseMethods<OperationMethods & DueClaimMethods> {}

/** The operator methods of the Promise API. */
export interface PromiseOperatorMethods extends PromiseMethods<OperatorMethods> {}

/** The provider limits methods of the Promise API. */
export interface PromiseLimitMethods extends PromiseMethods<LimitMethods> {}

/** Every method of the Effect API, by name: a list that leaves one out does not compile. */
const EFFECT_METHODS = allOptionNames<ConnectorStoreApi>()([
  "getWatch", "getWatchByDocument", "listWatchesByDocuments", "armWatch", "claimWatchAttempt", "deferWatch",
  "recordVerification", "resumeOfflineDeferred", "resumeAuthDeferred", "listDueOperations", "listDueWork",
  "collectFinishedOperations", "awaitWork", "getSyncState", "setSyncState", "updateSyncProgress", "deleteSyncState",
  "listSyncStatesForConnector", "claimSyncLease", "renewSyncLease", "releaseSyncLease", "createPendingAuth",
  "consumePendingAuth", "deleteExpiredPendingAuth", "startRelistRun", "getSweepCheckpoint", "getRelistRun",
  "recordRelistReceipt", "commitSweepCheckpoint", "abandonRelistRun", "listSweepReceipts", "collectRelistRuns",
  "listSweepCandidates", "recordSweepOutcome", "markSweepCandidateApplied", "applySweepCandidate",
  "recordSweepApplyFailure", "rearmSweepCandidate", "getSweepCandidate", "listGivenUpSweepCandidates",
  "claimOperation", "renewOperationLease", "markOperationSent", "recordAttemptFailure", "finalizeOperationAndArmWatch",
  "finalizeDeleteOperation", "getOperation", "getOperationByNodeKey", "listTrackedOperations", "getDocumentWriteStates",
  "claimDueOperations", "claimDueWatches", "listOperations", "listWatches", "listRelistRuns", "listSyncStates",
  "releaseSyncLeaseByOperator", "getStoreStatus", "findOperationByNodeKey", "settleOperation", "retryOperation",
  "rearmWatch", "setProviderLimit", "pauseProvider", "resumeProvider", "getProviderLimit", "listProviderLimits",
  "recordOperatorAction", "listOperatorActions",
  "enqueueOperation",
  "endFailoverDoubt"
])

type EffectMethod = (...args: ReadonlyArray<never>) => Effect.Effect<unknown, unknown>

/** Every method of the Effect API as a Promise over `call` (see `PromiseMethods`). */
export const promiseMethods = (call: PromiseCall): PromiseMethods<ConnectorStoreApi> => {
  const methods: Record<string, (...args: ReadonlyArray<never>) => Promise<unknown>> = {}
  for (const method of EFFECT_METHODS) {
    methods[method] = (...args) => call((store) => (store as unknown as Record<string, EffectMethod>)[method]!(...args))
  }
  return methods as unknown as PromiseMethods<ConnectorStoreApi>
}
