import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { CollectParams } from "../operation/retention.js"
import type { RelistBaselineEntry } from "../relist/derivation.js"
import type { SweepCandidateCounts } from "../relist/lifecycle.js"
import type { RelistReceiptInput, RelistReceipt, RelistRun, RelistScope } from "../relist/RelistRun.js"
import type { SweepCandidate, SweepCandidateIdentity, SweepCandidateKind } from "../relist/SweepCandidate.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** One keyset page: rows whose source id sorts (by code point) strictly after `after`, at most `limit`. */
export interface SourcePage {
  readonly after?: string | undefined
  readonly limit: number
}

/** A page of a run's actionable candidates, optionally of one kind. */
export interface SweepCandidatePage extends SourcePage {
  readonly kind?: SweepCandidateKind | undefined
}

/** The relist tables (runs, receipts, candidates), as rows; `lock*` reads lock until the transaction ends. */
export class RelistRepository extends Context.Tag("@connector-store/core/RelistRepository")<RelistRepository, {
  readonly getRun: (runID: string) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /** Reads a run and locks it until the transaction ends. */
  readonly lockRun: (runID: string) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /** The scope's current run (started, listing or complete), if any. */
  readonly getCurrentRun: (scope: RelistScope) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /** The scope's current run, locked until the transaction ends. */
  readonly lockCurrentRun: (scope: RelistScope) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /** Inserts a new run; `false` when its id is taken or its scope has a current run already. */
  readonly insertRun: (run: RelistRun) => Effect.Effect<boolean, PersistenceError>
  /** Writes `next` only if the stored version is still `expectedVersion`; `false` when the race was lost. */
  readonly updateRun: (next: RelistRun, expectedVersion: number) => Effect.Effect<boolean, PersistenceError>
  /** Records the run's baseline (`baselineEntryOf` each watch of its scope now), in the transaction that inserts the run. */
  readonly putBaseline: (run: RelistRun) => Effect.Effect<void, PersistenceError>
  /** The run's baseline entries for these source ids (those it has). */
  readonly getBaseline: (
    runID: string,
    sourceIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<RelistBaselineEntry>, PersistenceError>
  /** Records receipts of a run seen at `seenAt`; a source receipted already takes the new digest and time. */
  readonly putReceipts: (
    runID: string,
    receipts: ReadonlyArray<RelistReceiptInput>,
    seenAt: Millis
  ) => Effect.Effect<void, PersistenceError>
  /** A page of a run's receipts by source id. */
  readonly listReceipts: (runID: string, page: SourcePage) => Effect.Effect<ReadonlyArray<RelistReceipt>, PersistenceError>
  /**
   * Replaces the scope's candidates as `deriveSweepCandidates` does and answers its counts, keeping only the baseline entries
   * of the derived sources; in the transaction that completes `run`.
   */
  readonly deriveCandidates: (run: RelistRun, now: Millis) => Effect.Effect<SweepCandidateCounts, PersistenceError>
  /** A page of the run's open and decided candidates, read with the run's state: rows only while it is complete. */
  readonly listCandidates: (runID: string, page: SweepCandidatePage) => Effect.Effect<ReadonlyArray<SweepCandidate>, PersistenceError>
  /** A page of the scope's given-up candidates, whatever run derived them. */
  readonly listGivenUp: (scope: RelistScope, page: SourcePage) => Effect.Effect<ReadonlyArray<SweepCandidate>, PersistenceError>
  readonly getCandidate: (identity: SweepCandidateIdentity) => Effect.Effect<Option.Option<SweepCandidate>, PersistenceError>
  /** Reads a candidate and locks it until the transaction ends. */
  readonly lockCandidate: (identity: SweepCandidateIdentity) => Effect.Effect<Option.Option<SweepCandidate>, PersistenceError>
  /** Writes `next` only while the stored row belongs to `next.runID` at `expectedVersion`; `false` when the race was lost. */
  readonly updateCandidate: (next: SweepCandidate, expectedVersion: number) => Effect.Effect<boolean, PersistenceError>
  /** Deletes what `collectableRelistRuns` allows, with receipts, baselines and candidates not given up; answers how many runs went. */
  readonly collectRuns: (params: CollectParams) => Effect.Effect<number, PersistenceError>
}>() {}
