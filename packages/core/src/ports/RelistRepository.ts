import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { CollectParams } from "../operation/retention.js"
import type { RelistBaselineEntry } from "../relist/derivation.js"
import type { SweepCandidateCounts } from "../relist/lifecycle.js"
import type { RelistReceiptInput, RelistReceipt, RelistRun, RelistScope } from "../relist/RelistRun.js"
import type { SweepCandidate, SweepCandidateIdentity, SweepCandidateKind } from "../relist/SweepCandidate.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/**
 * One page of a keyset listing: rows whose source id sorts strictly after
 * `after` (by Unicode code point), at most `limit` of them, in that order.
 */
export interface SourcePage {
  readonly after?: string | undefined
  readonly limit: number
}

/** A page of a run's actionable candidates, optionally of one kind. */
export interface SweepCandidatePage extends SourcePage {
  readonly kind?: SweepCandidateKind | undefined
}

/**
 * The relist tables (runs, receipts, candidates), as rows. Adapters
 * implement only this; every decision about what to write is made in core.
 *
 * `lock*` reads take the row's write lock for the rest of the surrounding
 * transaction (FOR UPDATE on Postgres, the write lock on SQLite), so they
 * are meant to run inside `Transactor.withTransaction`.
 */
export class RelistRepository extends Context.Tag("@connector-store/core/RelistRepository")<RelistRepository, {
  readonly getRun: (runID: string) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /** Reads a run and locks it until the transaction ends. */
  readonly lockRun: (runID: string) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /** The scope's current run (started, listing or complete), if any. */
  readonly getCurrentRun: (scope: RelistScope) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /** The scope's current run, locked until the transaction ends. */
  readonly lockCurrentRun: (scope: RelistScope) => Effect.Effect<Option.Option<RelistRun>, PersistenceError>
  /**
   * Inserts a new run; `false` when its id is taken or its scope already has
   * a current run (at most one per scope, enforced by the store itself).
   */
  readonly insertRun: (run: RelistRun) => Effect.Effect<boolean, PersistenceError>
  /** Writes `next` only if the stored version is still `expectedVersion`; `false` when the race was lost. */
  readonly updateRun: (next: RelistRun, expectedVersion: number) => Effect.Effect<boolean, PersistenceError>
  /**
   * Records the run's baseline: every watch of the run's scope as it is now
   * (`baselineEntryOf`), in one set-based statement. Runs inside the
   * transaction that inserts the run.
   */
  readonly putBaseline: (run: RelistRun) => Effect.Effect<void, PersistenceError>
  /** The run's baseline entries for these source ids (those it has). */
  readonly getBaseline: (
    runID: string,
    sourceIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<RelistBaselineEntry>, PersistenceError>
  /**
   * Records receipts of a run (distinct source ids), seen at `seenAt`. A
   * source id already receipted in the run takes the new digest and time.
   */
  readonly putReceipts: (
    runID: string,
    receipts: ReadonlyArray<RelistReceiptInput>,
    seenAt: Millis
  ) => Effect.Effect<void, PersistenceError>
  /** A page of a run's receipts by source id. */
  readonly listReceipts: (runID: string, page: SourcePage) => Effect.Effect<ReadonlyArray<RelistReceipt>, PersistenceError>
  /**
   * Replaces the run's scope's candidates with what `run` derives, as
   * `deriveSweepCandidates` defines it over the scope's watches, the run's
   * baseline and its receipts, and returns its counts; then keeps only the
   * baseline entries of the sources it derived a candidate for (what later
   * re-derivations read). Set-based: no per-document query. Runs inside the
   * transaction that completes `run`.
   */
  readonly deriveCandidates: (run: RelistRun, now: Millis) => Effect.Effect<SweepCandidateCounts, PersistenceError>
  /**
   * A page of the run's open and decided candidates, read together with the
   * run's state: rows come back only while the run is complete (current).
   * One statement per page.
   */
  readonly listCandidates: (runID: string, page: SweepCandidatePage) => Effect.Effect<ReadonlyArray<SweepCandidate>, PersistenceError>
  /** A page of the scope's given-up candidates, whatever run derived them. */
  readonly listGivenUp: (scope: RelistScope, page: SourcePage) => Effect.Effect<ReadonlyArray<SweepCandidate>, PersistenceError>
  readonly getCandidate: (identity: SweepCandidateIdentity) => Effect.Effect<Option.Option<SweepCandidate>, PersistenceError>
  /** Reads a candidate and locks it until the transaction ends. */
  readonly lockCandidate: (identity: SweepCandidateIdentity) => Effect.Effect<Option.Option<SweepCandidate>, PersistenceError>
  /**
   * Writes `next` only if the stored row still belongs to `next.runID` and
   * its version is still `expectedVersion`; `false` when the race was lost.
   */
  readonly updateCandidate: (next: SweepCandidate, expectedVersion: number) => Effect.Effect<boolean, PersistenceError>
  /**
   * Deletes what the relist retention rule (`collectableRelistRuns`) allows:
   * at most `limit` ended runs, with their receipts, their baselines and
   * their candidates that are not given up. Returns how many runs went.
   */
  readonly collectRuns: (params: CollectParams) => Effect.Effect<number, PersistenceError>
}>() {}
