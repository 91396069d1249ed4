import { Effect, Option } from "effect"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import type { SettleOperationInput, SettleResult } from "../operation/settle.js"
import type { StoreStatus } from "../operator/status.js"
import type { OperatorSyncState } from "../operator/syncStates.js"
import type { RelistRun } from "../relist/RelistRun.js"
import type {
  OperatorOperationFilter,
  OperatorPage,
  OperatorRelistFilter,
  OperatorSyncLeaseReleaseResult,
  OperatorSyncStateFilter,
  OperatorWatchFilter
} from "../service/operator.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { PromiseCall } from "./call.js"

/**
 * The operator methods of the Promise API: the Effect API's with the same
 * arguments and answers, absent rows as `null`. Rejections are the store's
 * tagged errors (`OperatorActionRefused`, `OperatorTargetNotFound`,
 * `InvalidInput`, …).
 */
export interface PromiseOperatorMethods {
  listOperations(filter?: OperatorOperationFilter): Promise<OperatorPage<ConnectorOperation>>
  listWatches(filter?: OperatorWatchFilter): Promise<OperatorPage<ProjectionWatch>>
  listRelistRuns(filter?: OperatorRelistFilter): Promise<OperatorPage<RelistRun>>
  listSyncStates(filter?: OperatorSyncStateFilter): Promise<OperatorPage<OperatorSyncState>>
  releaseSyncLeaseByOperator(
    connectorName: string,
    ownerDID: string,
    options?: { readonly force?: boolean | undefined }
  ): Promise<OperatorSyncLeaseReleaseResult>
  getStoreStatus(): Promise<StoreStatus>
  findOperationByNodeKey(nodeKey: string): Promise<ConnectorOperation | null>
  settleOperation(key: OperationKey, input: SettleOperationInput): Promise<SettleResult>
  retryOperation(key: OperationKey): Promise<ConnectorOperation>
  rearmWatch(identity: WatchIdentity, options: { readonly dueAt: Millis }): Promise<ProjectionWatch>
}

/** The operator methods over `call`. */
export const promiseOperatorMethods = (call: PromiseCall): PromiseOperatorMethods => ({
  listOperations: (filter) => call((s) => s.listOperations(filter)),
  listWatches: (filter) => call((s) => s.listWatches(filter)),
  listRelistRuns: (filter) => call((s) => s.listRelistRuns(filter)),
  listSyncStates: (filter) => call((s) => s.listSyncStates(filter)),
  releaseSyncLeaseByOperator: (connectorName, ownerDID, options) =>
    call((s) => s.releaseSyncLeaseByOperator(connectorName, ownerDID, options)),
  getStoreStatus: () => call((s) => s.getStoreStatus()),
  findOperationByNodeKey: (nodeKey) => call((s) => Effect.map(s.findOperationByNodeKey(nodeKey), Option.getOrNull)),
  settleOperation: (key, input) => call((s) => s.settleOperation(key, input)),
  retryOperation: (key) => call((s) => s.retryOperation(key)),
  rearmWatch: (identity, options) => call((s) => s.rearmWatch(identity, options))
})
