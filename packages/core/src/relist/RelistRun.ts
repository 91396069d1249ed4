import type { Digest, Millis, WatchIdentity } from "../watch/ProjectionWatch.js"

/** What one relist lists in full: every provider entity of one account's model, for one owner and connector. */
export interface RelistScope extends Omit<WatchIdentity, "sourceID"> {}

/**
 * Where a relist run stands: `started` (no page yet), `listing` (resumable from its cursor), `complete` (its last page
 * committed: the only state that yields candidates), or the final `abandoned` and `superseded`. A scope has at most one run in
 * the current states (the first three).
 */
export type RelistRunState = "started" | "listing" | "complete" | "abandoned" | "superseded"

/** One relist run of a scope. Every write bumps `version`. */
export interface RelistRun extends RelistScope {
  /** The run's id, given by the runner that starts it. */
  readonly runID: string
  /** Where the run stands (see `RelistRunState`). */
  readonly state: RelistRunState
  /** The provider's cursor to list the next page from (`null`: from the beginning, or nothing left). */
  readonly cursor: string | null
  /** How many pages were committed; the next commit must be page `pagesCommitted + 1`. */
  readonly pagesCommitted: number
  /** Set when the run completed: distinct entities receipted. */
  readonly receiptCount: number | null
  /** Set when the run completed: watches of the scope at that moment. */
  readonly trackedCount: number | null
  /** Set when the run completed: deletion candidates it derived. */
  readonly deletionCount: number | null
  /** Set when the run completed: divergence candidates it derived. */
  readonly divergenceCount: number | null
  /** Bumped by every write (0 when started); a transition is written only if it is unchanged. */
  readonly version: number
  /** When the run was started (ms since the epoch), from the store's clock. */
  readonly startedAt: Millis
  /** When the run was last written (ms since the epoch). */
  readonly updatedAt: Millis
  /** When its runner committed the last page (ms since the epoch); `null` until the run completes. */
  readonly completedAt: Millis | null
  /** When it was abandoned or superseded. */
  readonly endedAt: Millis | null
}

/** One provider entity a run saw, with the provider's digest (or etag) of it. */
export interface RelistReceipt {
  /** The run that saw the entity. */
  readonly runID: string
  /** The provider entity's source id, as watches name it. */
  readonly sourceID: string
  /** `null` when the provider gave none: such an entity never counts as diverged. */
  readonly digest: Digest | null
  /** When it was (last) recorded. */
  readonly seenAt: Millis
}

/** A receipt as a runner hands it in. */
export interface RelistReceiptInput {
  /** The provider entity's source id, as watches name it. */
  readonly sourceID: string
  /** The provider's digest (or etag) of the entity; `null` when the provider gave none (never counts as diverged). */
  readonly digest: Digest | null
}

/** The run states in which a scope's run is its current one. */
export const CURRENT_RELIST_RUN_STATES: ReadonlyArray<RelistRunState> = ["started", "listing", "complete"]

/** True while the run is its scope's current one. */
export const isCurrentRelistRun = (run: RelistRun): boolean => CURRENT_RELIST_RUN_STATES.includes(run.state)

/** True while a runner may still add receipts and pages to the run. */
export const isRelistRunListing = (run: RelistRun): boolean => run.state === "started" || run.state === "listing"

/** The scope part of a run, candidate or watch. */
export const relistScopeOf = (row: RelistScope): RelistScope => ({
  ownerDID: row.ownerDID,
  connectorName: row.connectorName,
  model: row.model,
  accountKey: row.accountKey
})

/** True when both name the same scope. */
export const sameRelistScope = (a: RelistScope, b: RelistScope): boolean =>
  a.ownerDID === b.ownerDID && a.connectorName === b.connectorName && a.model === b.model &&
  a.accountKey === b.accountKey

/** A readable, unambiguous label of a scope, for errors and logs. */
export const formatRelistScope = (scope: RelistScope): string =>
  [scope.ownerDID, scope.connectorName, scope.model, scope.accountKey].join("/")

/** An unambiguous map key for a scope. */
export const relistScopeKey = (scope: RelistScope): string =>
  JSON.stringify([scope.ownerDID, scope.connectorName, scope.model, scope.accountKey])

/** The receipts of one page as stored: one per source id, the last listed winning. */
export const distinctReceipts = (receipts: ReadonlyArray<RelistReceiptInput>): ReadonlyArray<RelistReceiptInput> => {
  const bySource = new Map<string, RelistReceiptInput>()
  for (const receipt of receipts) {
    bySource.delete(receipt.sourceID)
    bySource.set(receipt.sourceID, { sourceID: receipt.sourceID, digest: receipt.digest })
  }
  return Array.from(bySource.values())
}
