import { type Digest, formatWatchIdentity, type Millis, watchKey } from "../watch/ProjectionWatch.js"
import type { RelistScope } from "./RelistRun.js"

/** Failed applies after which a candidate is given up until a person re-arms it. */
export const MAX_SWEEP_APPLY_ATTEMPTS = 5

/** Why a tracked document is a candidate: its entity was not seen (`deleted`) or seen with another digest (`diverged`). */
export type SweepCandidateKind = "deleted" | "diverged"

/** What the sweep decided: delete the local document, ingest the entity again, or keep things as they are. */
export type SweepOutcome = "delete_local" | "reingest" | "keep"

/**
 * Where a candidate stands: `open`, `decided` (an outcome to apply), `applied`, `kept`, or `given_up` after
 * `MAX_SWEEP_APPLY_ATTEMPTS` failed applies (until a person re-arms it).
 */
export type SweepCandidateStatus = "open" | "decided" | "applied" | "kept" | "given_up"

/** A candidate's identity: its scope and the provider entity's source id (the shape of a watch identity). */
export interface SweepCandidateIdentity extends RelistScope {
  /** The provider entity's source id, as the watch names it. */
  readonly sourceID: string
}

/** The sweep's case about one tracked entity of a scope, re-derived by each complete run (a given-up case stays given up). */
export interface SweepCandidate extends SweepCandidateIdentity {
  /** The complete run that derived it last. */
  readonly runID: string
  /** The local document the watch projects the entity into, which `delete_local` or `reingest` acts on. */
  readonly documentID: string
  /** Why it is a candidate: `deleted` (the run did not see the entity) or `diverged` (it saw another digest). */
  readonly kind: SweepCandidateKind
  /** The digest the run saw at the provider (`null` for a deletion). */
  readonly providerDigest: Digest | null
  /** The watch's verified digest when the run derived it. */
  readonly localDigest: Digest | null
  /** Where the candidate stands (see `SweepCandidateStatus`); `open` when derived. */
  readonly status: SweepCandidateStatus
  /** What the sweep decided; `null` while open. */
  readonly outcome: SweepOutcome | null
  /** Failed applies since it was derived or last re-armed; never above `MAX_SWEEP_APPLY_ATTEMPTS`. */
  readonly applyAttempts: number
  /** The kind of the last failed apply, as its runner reported it; `null` when none failed. */
  readonly lastErrorKind: string | null
  /** The message of the last failed apply; `null` when none failed. */
  readonly lastErrorMessage: string | null
  /** Bumped by every write (0 when derived); a transition is written only if it is unchanged. */
  readonly version: number
  /** When the run that derived it completed (ms since the epoch); a given-up case keeps its first. */
  readonly createdAt: Millis
  /** When it was last written (ms since the epoch). */
  readonly updatedAt: Millis
}

/** The statuses that are still work for the sweep: listed by `listSweepCandidates`. */
export const ACTIONABLE_SWEEP_STATUSES: ReadonlyArray<SweepCandidateStatus> = ["open", "decided"]

/** An unambiguous map key for a candidate identity (its watch's `watchKey`). */
export const candidateKey: (id: SweepCandidateIdentity) => string = watchKey

/** A readable label of a candidate identity, for errors and logs (its watch's `formatWatchIdentity`). */
export const formatCandidateIdentity: (id: SweepCandidateIdentity) => string = formatWatchIdentity
