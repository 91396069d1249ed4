import type { Digest, Millis, ProjectionWatch } from "../watch/ProjectionWatch.js"
import type { SweepCandidateCounts } from "./lifecycle.js"
import { type RelistReceipt, type RelistRun, sameRelistScope } from "./RelistRun.js"
import type { SweepCandidate, SweepCandidateKind } from "./SweepCandidate.js"
import { bump } from "../versioned.js"

/**
 * The part of a watch the derivation reads: what is tracked, its verified digest, and its `version` and `createdAt` (written
 * since a run began?).
 */
export type TrackedDocument = Pick<
  ProjectionWatch,
  "ownerDID" | "connectorName" | "model" | "accountKey" | "sourceID" | "documentID" | "verifiedStateDigest" | "version" | "createdAt"
>

/** One tracked watch as a run found it at its start: the run's baseline is its scope's watches then. */
export interface RelistBaselineEntry {
  /** The watched entity's source id. */
  readonly sourceID: string
  /** The local document the watch projects into. */
  readonly documentID: string
  /** The watch row's version when the run started. */
  readonly watchVersion: number
  /** When the watch row was created (ms since the epoch), telling a re-created watch from the old one. */
  readonly watchCreatedAt: Millis
}

/** A watch as a baseline records it. */
export const baselineEntryOf = (watch: TrackedDocument): RelistBaselineEntry => ({
  sourceID: watch.sourceID,
  documentID: watch.documentID,
  watchVersion: watch.version,
  watchCreatedAt: watch.createdAt
})

/** True when `watch` is the very row the baseline recorded (same document, version and creation): any write since makes it another. */
export const isUnchangedSince = (entry: RelistBaselineEntry | undefined, watch: TrackedDocument): boolean =>
  entry !== undefined && entry.sourceID === watch.sourceID && entry.documentID === watch.documentID &&
  entry.watchVersion === watch.version && entry.watchCreatedAt === watch.createdAt

/** What a complete run says about one tracked document, when it says anything. */
export interface DerivedSweepCandidate {
  /** `deleted` when the run did not see the entity, `diverged` when it saw another digest. */
  readonly kind: SweepCandidateKind
  /** The digest the run saw at the provider; `null` for a deletion. */
  readonly providerDigest: Digest | null
  /** The watch's verified digest; `null` when none was verified. */
  readonly localDigest: Digest | null
}

/** True when the run may judge the watch: it is in the run's scope and unchanged since the run started (no clock involved). */
export const isJudgedBy = (run: RelistRun, watch: TrackedDocument, entry: RelistBaselineEntry | undefined): boolean =>
  sameRelistScope(run, watch) && isUnchangedSince(entry, watch)

/**
 * The candidate rule for one judged document: no receipt is `deleted`; a receipt whose digest differs from the watch's verified
 * one (not its winner: a local edit on its way moves that) is `diverged`; an unknown digest says nothing.
 */
export const deriveCandidate = (
  run: RelistRun,
  watch: TrackedDocument,
  entry: RelistBaselineEntry | undefined,
  receipt: Pick<RelistReceipt, "digest"> | undefined
): DerivedSweepCandidate | undefined => {
  if (!isJudgedBy(run, watch, entry)) return undefined
  if (receipt === undefined) return { kind: "deleted", providerDigest: null, localDigest: watch.verifiedStateDigest }
  return receipt.digest !== null && watch.verifiedStateDigest !== null && receipt.digest !== watch.verifiedStateDigest
    ? { kind: "diverged", providerDigest: receipt.digest, localDigest: watch.verifiedStateDigest }
    : undefined
}

/** A scope's candidate rows after a run completed, and what it counted. */
export interface SweepDerivation {
  /** Every candidate row the scope keeps, replacing all its previous rows. */
  readonly candidates: ReadonlyArray<SweepCandidate>
  /** What the derivation counted, stored on the completed run. */
  readonly counts: SweepCandidateCounts
}

/**
 * Replaces a scope's candidates with what the completed `run` derives from its watches, baseline and receipts: given-up rows
 * stay (following the new run when derived again), every other derived case starts open.
 */
export const deriveSweepCandidates = (
  run: RelistRun,
  watches: ReadonlyArray<TrackedDocument>,
  baseline: ReadonlyMap<string, RelistBaselineEntry>,
  receipts: ReadonlyMap<string, Pick<RelistReceipt, "digest">>,
  previous: ReadonlyArray<SweepCandidate>,
  now: Millis
): SweepDerivation => {
  const tracked = watches.filter((watch) => sameRelistScope(run, watch))
  const givenUp = new Map(
    previous.filter((row) => sameRelistScope(run, row) && row.status === "given_up").map((row) => [row.sourceID, row])
  )
  const derived = new Map<string, SweepCandidate>()
  let deletions = 0
  let divergences = 0
  for (const watch of tracked) {
    const found = deriveCandidate(run, watch, baseline.get(watch.sourceID), receipts.get(watch.sourceID))
    if (found === undefined) continue
    if (found.kind === "deleted") deletions++
    else divergences++
    const kept = givenUp.get(watch.sourceID)
    derived.set(
      watch.sourceID,
      kept === undefined
        ? {
          ownerDID: run.ownerDID,
          connectorName: run.connectorName,
          model: run.model,
          accountKey: run.accountKey,
          sourceID: watch.sourceID,
          runID: run.runID,
          documentID: watch.documentID,
          ...found,
          status: "open",
          outcome: null,
          applyAttempts: 0,
          lastErrorKind: null,
          lastErrorMessage: null,
          version: 0,
          createdAt: now,
          updatedAt: now
        }
        : bump(kept, now, { ...found, runID: run.runID, documentID: watch.documentID })
    )
  }
  const stillGivenUp = Array.from(givenUp.values()).filter((row) => !derived.has(row.sourceID))
  return {
    candidates: [...stillGivenUp, ...derived.values()],
    counts: { receipts: receipts.size, tracked: tracked.length, deletions, divergences }
  }
}

/** The most deletions a run may yield under `maxDeletionFraction` of its tracked set (rounded down). */
export const deletionAllowance = (tracked: number, maxDeletionFraction: number): number =>
  Math.floor(maxDeletionFraction * tracked + 1e-9)

/** The deletion limit when the caller names none: half the tracked set (an empty listing that reads complete deletes nothing). */
export const DEFAULT_MAX_DELETION_FRACTION = 0.5

/** The default limit holds runs that tracked at least this many documents (one deletion of one is no mass deletion). */
export const DEFAULT_DELETION_LIMIT_MIN_TRACKED = 2

/** The fraction a listing of `run` is held to: the caller's, or the default once it tracked enough documents; `undefined` for none. */
export const deletionLimitFor = (run: RelistRun, maxDeletionFraction: number | undefined): number | undefined =>
  maxDeletionFraction ??
    ((run.trackedCount ?? 0) >= DEFAULT_DELETION_LIMIT_MIN_TRACKED ? DEFAULT_MAX_DELETION_FRACTION : undefined)

/** True when a complete run derived more deletions than the limit allows. */
export const exceedsDeletionLimit = (run: RelistRun, maxDeletionFraction: number): boolean =>
  (run.deletionCount ?? 0) > deletionAllowance(run.trackedCount ?? 0, maxDeletionFraction)
