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
  /**
   * One page of operations across owners, filtered, for an operator.
   *
   * @throws InvalidInput, PersistenceError
   */
  listOperations(filter?: OperatorOperationFilter): Promise<OperatorPage<ConnectorOperation>>
  /**
   * One page of watches across owners, filtered, for an operator.
   *
   * @throws InvalidInput, PersistenceError
   */
  listWatches(filter?: OperatorWatchFilter): Promise<OperatorPage<ProjectionWatch>>
  /**
   * One page of relist runs, filtered, for an operator.
   *
   * @throws InvalidInput, PersistenceError
   */
  listRelistRuns(filter?: OperatorRelistFilter): Promise<OperatorPage<RelistRun>>
  /**
   * One page of sync states with their leases, filtered, for an operator.
   *
   * @throws InvalidInput, PersistenceError
   */
  listSyncStates(filter?: OperatorSyncStateFilter): Promise<OperatorPage<OperatorSyncState>>
  /**
   * Releases the sync lease of a connector and owner whoever holds it: a stale one is cleared, a live one
   * only with `force`; the holder's next renewal reports `lost`.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, OperatorTargetNotFound,
   *   OperatorActionRefused
   */
  releaseSyncLeaseByOperator(
    connectorName: string,
    ownerDID: string,
    options?: { readonly force?: boolean | undefined }
  ): Promise<OperatorSyncLeaseReleaseResult>
  /**
   * The store's counts and what waits longest, now.
   *
   * @throws PersistenceError
   */
  getStoreStatus(): Promise<StoreStatus>
  /**
   * The operation that wrote the entity of `nodeKey`, whoever may see it, or `null`.
   *
   * @throws InvalidInput, PersistenceError
   */
  findOperationByNodeKey(nodeKey: string): Promise<ConnectorOperation | null>
  /**
   * Settles an operation whose outcome was unknown, after a person looked it up at the provider: `committed`
   * arms its watch as a finalize does.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, OperatorTargetNotFound,
   *   OperatorActionRefused, WinnerReadFailed
   */
  settleOperation(key: OperationKey, input: SettleOperationInput): Promise<SettleResult>
  /**
   * Makes a `dead` operation due again when that is safe; refused (`OperatorActionRefused`) when it is not.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, OperatorTargetNotFound,
   *   OperatorActionRefused
   */
  retryOperation(key: OperationKey): Promise<ConnectorOperation>
  /**
   * Opens a new generation of a watch by hand (one given up as `repair_failed`, say), due at `dueAt`.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, OperatorTargetNotFound,
   *   WinnerReadFailed
   */
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
