import { isInDoubt } from "../operation/doubt.js"
import { isDueOperation } from "../operation/due.js"
import type { ConnectorOperation, OperationKey, OperationState } from "../operation/ConnectorOperation.js"
import { holdsLiveLease } from "../operation/lease.js"
import type { RelistRun, RelistRunState } from "../relist/RelistRun.js"
import type { SweepCandidate } from "../relist/SweepCandidate.js"
import type { Millis, ProjectionWatch, VerificationStatus, WatchIdentity } from "../watch/ProjectionWatch.js"
import { watchIdentityOf } from "../watch/ProjectionWatch.js"
import { isScheduleDue } from "../watch/transitions.js"
import { compareCodePoints } from "../operation/retention.js"
import { compareWatchIdentities } from "./queries.js"
import { type PendingAuthCounts, pendingAuthCountsOf, type SyncStateCounts, syncStateCountsOf } from "./syncStates.js"
import type { SyncStateRow } from "../syncstate/SyncState.js"
import type { StoreDurability } from "./durability.js"

/** The due operation that has waited longest (an unset next attempt counts as due since its creation). */
export interface OldestDueOperation extends OperationKey {
  /** Since when it has been due (ms since the epoch): its next attempt, or its creation when that is unset. */
  readonly dueAt: Millis
}

/** The due watch that has waited longest. */
export interface OldestDueWatch {
  /** Which watch it is. */
  readonly identity: WatchIdentity
  /** Since when it has been due (ms since the epoch): its scheduled next attempt. */
  readonly dueAt: Millis
}

/** A store's rows at one moment: how many in each state, what waited longest, and what needs a person. */
export interface StoreCounts {
  /** The moment the status describes (ms since the epoch), from the store's clock. */
  readonly at: Millis
  /** How many operations are in each state (every state present, 0 when none). */
  readonly operations: Readonly<Record<OperationState, number>>
  /** How many watches are in each verification status (every status present, 0 when none). */
  readonly watches: Readonly<Record<VerificationStatus, number>>
  /** How many relist runs are in each state (every state present, 0 when none). */
  readonly relistRuns: Readonly<Record<RelistRunState, number>>
  /** Attempted operations under a live drive lease now. */
  readonly leasesHeld: number
  /** Operations a request of which may have landed with no outcome known (see `isInDoubt`). */
  readonly inDoubt: number
  /** Sweep candidates given up after too many failed applies: they wait for a person. */
  readonly givenUpCandidates: number
  /** The due operation that has waited longest; `null` when none is due. */
  readonly oldestDueOperation: OldestDueOperation | null
  /** The due watch that has waited longest; `null` when none is due. */
  readonly oldestDueWatch: OldestDueWatch | null
  /** Sync states: how many, leases live now, and stale leases (expired, never released: see `SyncLeaseState`). */
  readonly syncStates: SyncStateCounts
  /** Pending authorizations by expiry alone: still usable, and expired (until `deleteExpiredPendingAuth`). */
  readonly pendingAuthorizations: PendingAuthCounts
}

/** A store's health at one moment: its rows (see `StoreCounts`) and what its deployment guarantees (see `StoreDurability`). */
export interface StoreStatus extends StoreCounts {
  /** Whether an acknowledged write can be lost on a failover or restore, and the last one the store noticed. */
  readonly durability: StoreDurability
}

const counted = <K extends string>(keys: ReadonlyArray<K>, values: ReadonlyArray<K>): Record<K, number> => {
  const out = Object.fromEntries(keys.map((key) => [key, 0])) as Record<K, number>
  for (const value of values) if (value in out) out[value] += 1
  return out
}

/** Every operation state, in lifecycle order. */
export const OPERATION_STATES: ReadonlyArray<OperationState> = ["attempted", "committed", "dead", "reconcile_only"]
/** Every watch status. */
export const WATCH_STATUSES: ReadonlyArray<VerificationStatus> = ["pending_verification", "verified", "repair_failed"]
/** Every relist run state. */
export const RELIST_RUN_STATES: ReadonlyArray<RelistRunState> = ["started", "listing", "complete", "abandoned", "superseded"]

/** When a due operation fell due. */
const operationDueAt = (row: ConnectorOperation): Millis => row.nextAttemptAt ?? row.createdAt

/** The reference status over whole tables (ties on the oldest due item go to the smaller key). */
export const storeStatusOf = (
  tables: {
    readonly operations: ReadonlyArray<ConnectorOperation>
    readonly watches: ReadonlyArray<ProjectionWatch>
    readonly runs: ReadonlyArray<RelistRun>
    readonly candidates: ReadonlyArray<SweepCandidate>
    readonly syncStates: ReadonlyArray<SyncStateRow>
    /** The `expiresAt` of every pending authorization (nothing else of theirs is read). */
    readonly pendingAuthExpiries: ReadonlyArray<Millis>
  },
  now: Millis
): StoreCounts => {
  const dueOperations = tables.operations
    .filter((row) => isDueOperation(row, now))
    .sort((a, b) =>
      operationDueAt(a) - operationDueAt(b) || compareCodePoints(a.callerDID, b.callerDID) ||
      compareCodePoints(a.operationID, b.operationID)
    )
  const dueWatches = tables.watches
    .filter((row) => isScheduleDue(row, now))
    .sort((a, b) => a.nextAttemptAt! - b.nextAttemptAt! || compareWatchIdentities(a, b))
  const firstOperation = dueOperations[0]
  const firstWatch = dueWatches[0]
  return {
    at: now,
    operations: counted(OPERATION_STATES, tables.operations.map((row) => row.state)),
    watches: counted(WATCH_STATUSES, tables.watches.map((row) => row.verificationStatus)),
    relistRuns: counted(RELIST_RUN_STATES, tables.runs.map((row) => row.state)),
    leasesHeld: tables.operations.filter((row) => holdsLiveLease(row, now)).length,
    inDoubt: tables.operations.filter(isInDoubt).length,
    givenUpCandidates: tables.candidates.filter((row) => row.status === "given_up").length,
    oldestDueOperation: firstOperation === undefined ? null : {
      callerDID: firstOperation.callerDID,
      operationID: firstOperation.operationID,
      dueAt: operationDueAt(firstOperation)
    },
    oldestDueWatch: firstWatch === undefined
      ? null
      : { identity: watchIdentityOf(firstWatch), dueAt: firstWatch.nextAttemptAt! },
    syncStates: syncStateCountsOf(tables.syncStates, now),
    pendingAuthorizations: pendingAuthCountsOf(tables.pendingAuthExpiries, now)
  }
}
