import type { OperationState } from "../operation/ConnectorOperation.js"
import type { WatchIdentity } from "../watch/ProjectionWatch.js"
import { isUnchangedSince, type RelistBaselineEntry, type TrackedDocument } from "./derivation.js"
import { sameRelistScope } from "./RelistRun.js"
import type { SweepCandidate } from "./SweepCandidate.js"

/**
 * Why a candidate a complete run derived no longer stands:
 *
 * - `watch-gone`: no watch tracks the candidate's source any more (a finalize
 *   for another source on the same document superseded it, or it was removed);
 * - `watch-changed`: the watch was written after the run started (a committed
 *   write-back armed it, a verification settled it, a person re-armed it, it
 *   moved to another document), so what the run saw says nothing about it;
 * - `document-reused`: another watch now tracks the candidate's document (a
 *   new source): acting on the old source would act on the new one's document;
 * - `write-in-flight`: an operation naming the document is still attempted or
 *   reconcile-only: a write to it may be landing at the provider.
 *
 * The same reasons withdraw deletion and divergence candidates alike: a
 * divergence is judged against the verified digest the run saw, and any write
 * to the watch (above all a verification) replaces that basis.
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

/**
 * Re-derives a candidate against the current watch and operations:
 * `undefined` while it still stands, else why it is withdrawn (see
 * `SweepCandidateWithdrawal`, checked in that order). A withdrawn candidate is
 * not listed, and deciding or applying it is refused.
 */
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
