import type { Digest, Millis, ProjectionWatch } from "../watch/ProjectionWatch.js"
import type { SweepCandidateCounts } from "./lifecycle.js"
import { type RelistReceipt, type RelistRun, sameRelistScope } from "./RelistRun.js"
import type { SweepCandidate, SweepCandidateKind } from "./SweepCandidate.js"
import { bump } from "../versioned.js"

/**
 * The part of a watch the derivation reads: what is tracked, what was last
 * agreed with the provider, and the row's own write counter (`version`, bumped
 * by every write) with its creation time, which together say whether the row
 * was written since a run began.
 */
export type TrackedDocument = Pick<
  ProjectionWatch,
  "ownerDID" | "connectorName" | "model" | "accountKey" | "sourceID" | "documentID" | "verifiedStateDigest" | "version" | "createdAt"
>

/**
 * One tracked watch as a run found it when it started: its source, document
 * and the row's version and creation time at that moment. A run's baseline is
 * the scope's watches at its start, recorded in the starting transaction.
 */
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

/**
 * True when `watch` is, row for row, the one the run's baseline recorded:
 * same document, same version, same creation. Versions only grow and every
 * write bumps one, so no clock is involved: a watch created, re-created or
 * written in any way after the run started is never unchanged.
 */
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

/**
 * True when the run may judge the watch at all: the watch belongs to the
 * run's scope and is unchanged since the run started (`isUnchangedSince` its
 * baseline entry). A watch created or changed while the run was listing (a
 * write-back landed, a verifier settled it) may concern an entity the listing
 * had already passed, or moved within the listing's order, so this run says
 * nothing about it; the next run will. Wall-clock times play no part.
 */
export const isJudgedBy = (run: RelistRun, watch: TrackedDocument, entry: RelistBaselineEntry | undefined): boolean =>
  sameRelistScope(run, watch) && isUnchangedSince(entry, watch)

/**
 * The candidate rule for one tracked document of a complete run, given the
 * run's baseline entry and receipt for its source id (if any):
 *
 * - no receipt → `deleted`: the full listing did not see the entity;
 * - a receipt whose digest differs from the watch's verified digest →
 *   `diverged`: the provider changed it since both sides last agreed. The
 *   verified digest, not the current winner, is the local state compared:
 *   a local edit still on its way to the provider moves the winner but not
 *   the verified digest, and must not read as a provider-side change.
 *   Either digest unknown (`null`) → no judgement.
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
 * Replaces a scope's candidates with what the completed `run` derives from
 * the scope's watches, its baseline (the watches as they were when it
 * started) and its receipts.
 *
 * Every previous row of the scope goes, except given-up ones: a given-up
 * case stays given up (attempts and last error kept) and, when the run
 * derives it again, follows the new run. Every other derived case starts
 * afresh: open, no attempts.
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

/**
 * The most deletion candidates a run may yield under a safety limit of
 * `maxDeletionFraction` of its tracked set (rounded down; a hair of slack
 * absorbs floating-point error, so 0.29 of 100 allows 29).
 */
export const deletionAllowance = (tracked: number, maxDeletionFraction: number): number =>
  Math.floor(maxDeletionFraction * tracked + 1e-9)

/**
 * The deletion safety limit a listing applies when its caller names none:
 * a complete run may not yield deletions of more than half its tracked set.
 * An empty or truncated listing that still reads "complete" would otherwise
 * turn every tracked document into a deletion candidate.
 */
export const DEFAULT_MAX_DELETION_FRACTION = 0.5

/**
 * The default limit holds runs that tracked at least this many documents; a
 * scope of one document may lose it without a refusal (one deletion is not
 * a mass deletion, and no fraction of one is meaningful).
 */
export const DEFAULT_DELETION_LIMIT_MIN_TRACKED = 2

/**
 * The fraction a listing of `run` is held to: the caller's, or by default
 * `DEFAULT_MAX_DELETION_FRACTION` once the run tracked at least
 * `DEFAULT_DELETION_LIMIT_MIN_TRACKED` documents; `undefined` for no limit.
 */
export const deletionLimitFor = (run: RelistRun, maxDeletionFraction: number | undefined): number | undefined =>
  maxDeletionFraction ??
    ((run.trackedCount ?? 0) >= DEFAULT_DELETION_LIMIT_MIN_TRACKED ? DEFAULT_MAX_DELETION_FRACTION : undefined)

/** True when a complete run derived more deletions than the limit allows. */
export const exceedsDeletionLimit = (run: RelistRun, maxDeletionFraction: number): boolean =>
  (run.deletionCount ?? 0) > deletionAllowance(run.trackedCount ?? 0, maxDeletionFraction)
