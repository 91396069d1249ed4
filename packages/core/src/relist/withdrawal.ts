import type { OperationState } from "../operation/ConnectorOperation.js"
import type { WatchIdentity } from "../watch/ProjectionWatch.js"
import { isUnchangedSince, type RelistBaselineEntry, type TrackedDocument } from "./derivation.js"
import { sameRelistScope } from "./RelistRun.js"
import type { SweepCandidate } from "./SweepCandidate.js"

/**
 * Why a derived candidate no longer stands (deletions and divergences alike):
 *
 * - `watch-gone`: no watch tracks its source any more;
 * - `watch-changed`: the watch was written since the run started (armed, verified, re-armed, moved), so the run says nothing about it;
 * - `document-reused`: another watch now tracks its document;
 * - `write-in-flight`: an operation on the document is attempted or reconcile-only.
 */
export type SweepCandidateWithdrawal = "watch-gone" | "watch-changed" | "document-reused" | "write-in-flight"

/** The operation states in which a write to a document may still land at the provider. */
export const WRITE_IN_FLIGHT_STATES: ReadonlyArray<OperationState> = ["attempted", "reconcile_only"]

/** What a candidate's standing is re-derived from, read at the moment it is acted on. */
export interface SweepCandidateBasis {
  /** The watch at the candidate's identity now, if any. */
  readonly watch: TrackedDocument | undefined
  /** The run's baseline entry for the candidate's source, if any. */
  readonly baseline: RelistBaselineEntry | undefined
  /** Every watch of the candidate's document now (its own included). */
  readonly documentWatches: ReadonlyArray<WatchIdentity>
  /** The states of every operation naming the candidate's document now. */
  readonly documentOperations: ReadonlyArray<OperationState>
}

const sameIdentity = (a: WatchIdentity, b: WatchIdentity): boolean => sameRelistScope(a, b) && a.sourceID === b.sourceID

/** Re-derives a candidate against the current watch and operations: why it is withdrawn, or `undefined` while it stands. */
export const withdrawalOf = (
  candidate: SweepCandidate,
  basis: SweepCandidateBasis
): SweepCandidateWithdrawal | undefined => {
  const watch = basis.watch
  if (watch === undefined || !sameIdentity(watch, candidate)) return "watch-gone"
  if (watch.documentID !== candidate.documentID || !isUnchangedSince(basis.baseline, watch)) return "watch-changed"
  if (basis.documentWatches.some((other) => !sameIdentity(other, candidate))) return "document-reused"
  if (basis.documentOperations.some((state) => WRITE_IN_FLIGHT_STATES.includes(state))) return "write-in-flight"
  return undefined
}
