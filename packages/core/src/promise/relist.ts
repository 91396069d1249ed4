import { Effect, Option } from "effect"
import type { CollectParams } from "../operation/retention.js"
import type { SourcePage } from "../ports/RelistRepository.js"
import type {
  SweepApplyFailure,
  SweepApplyFailureOutcome,
  SweepApplyOutcome,
  SweepRearmOutcome
} from "../relist/candidates.js"
import type { RelistAbandonOutcome, RelistReceiptOutcome, SweepCheckpointOutcome } from "../relist/lifecycle.js"
import type { RelistReceipt, RelistReceiptInput, RelistRun, RelistScope } from "../relist/RelistRun.js"
import type { SweepCandidate, SweepCandidateIdentity, SweepOutcome } from "../relist/SweepCandidate.js"
import type { SweepCheckpoint } from "../service/relist.js"
import type { StaleRelistRun, SweepApply, SweepCandidateListOptions, SweepCandidateRef } from "../service/relistCandidates.js"
import type { PromiseCall } from "./call.js"
import { callBackFrom } from "./readers.js"

/**
 * An applier's work for one decided candidate, run inside the store's
 * transaction (see `applySweepCandidate`); `tx` is the adapter's handle on
 * that transaction, as winner readers get it. A throw or a rejection fails
 * the call with `SweepApplyFailed` and rolls the transaction back.
 */
export type PromiseSweepApply<H> = (candidate: SweepCandidate, tx: H) => Promise<void> | void

/**
 * The relist sweep as Promises (see the Effect API for each method's
 * guarantees). Absent rows come back as `null`; refusals reject with the
 * store's tagged errors (`RelistRunNotComplete`, `DeletionLimitExceeded`, …).
 * `H` is the transaction handle an `applySweepCandidate` callback gets.
 */
export interface PromiseRelistMethods<H = undefined> {
  /**
   * Starts a relist run of a scope; the scope's previous run, listing or complete, is superseded and yields
   * nothing more.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  startRelistRun(scope: RelistScope): Promise<RelistRun>
  /**
   * The scope's run still listing, with the cursor to resume from, or `null`.
   *
   * @throws InvalidInput, PersistenceError, CorruptRow
   */
  getSweepCheckpoint(scope: RelistScope): Promise<RelistRun | null>
  /**
   * One relist run, or `null`.
   *
   * @throws InvalidInput, PersistenceError, CorruptRow
   */
  getRelistRun(runID: string): Promise<RelistRun | null>
  /**
   * Records entities a run saw at the provider, outside a page checkpoint; `stale-run` once superseded.
   *
   * @throws InvalidInput, RelistRunNotFound, PersistenceError, CorruptRow
   */
  recordRelistReceipt(runID: string, receipts: ReadonlyArray<RelistReceiptInput>): Promise<RelistReceiptOutcome>
  /**
   * Commits one listed page (its receipts and the cursor after it), and with `complete` ends the listing.
   *
   * @throws InvalidInput, RelistRunNotFound, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  commitSweepCheckpoint(runID: string, checkpoint: SweepCheckpoint): Promise<SweepCheckpointOutcome>
  /**
   * Abandons a run: it yields no candidates from then on (`already-ended` when it had ended).
   *
   * @throws InvalidInput, RelistRunNotFound, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  abandonRelistRun(runID: string): Promise<RelistAbandonOutcome>
  /**
   * One page of the receipts a run recorded.
   *
   * @throws InvalidInput, RelistRunNotFound, PersistenceError, CorruptRow
   */
  listSweepReceipts(runID: string, page: SourcePage): Promise<ReadonlyArray<RelistReceipt>>
  /**
   * The open candidates of a complete run: watched entities it did not see (deleted) or saw changed
   * (diverged).
   *
   * @throws InvalidInput, RelistRunNotFound, RelistRunNotComplete, DeletionLimitExceeded, PersistenceError, CorruptRow
   */
  listSweepCandidates(runID: string, options: SweepCandidateListOptions): Promise<ReadonlyArray<SweepCandidate>>
  /**
   * Records what is to be done with a candidate (delete locally, re-ingest, keep).
   *
   * @throws InvalidInput, RelistRunNotFound, SweepCandidateNotFound, SweepCandidateWithdrawn,
   *   SweepOutcomeNotAllowed, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  recordSweepOutcome(ref: SweepCandidateRef, outcome: SweepOutcome): Promise<"recorded" | "given-up" | "settled" | StaleRelistRun>
  /**
   * Marks a decided candidate applied, after the caller did the work itself.
   *
   * @throws InvalidInput, RelistRunNotFound, SweepCandidateNotFound, SweepCandidateWithdrawn,
   *   PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  markSweepCandidateApplied(ref: SweepCandidateRef): Promise<SweepApplyOutcome | StaleRelistRun>
  /**
   * Applies a decided candidate with `apply` inside the store's transaction,
   * the candidate and its watch locked and re-derived, and marks it applied
   * in the same transaction (see the Effect API's `applySweepCandidate`).
   *
   * @throws InvalidInput, RelistRunNotFound, SweepCandidateNotFound, SweepCandidateWithdrawn,
   *   SweepApplyFailed (`apply` threw or rejected; its `cause` says why), PersistenceError,
   *   ConcurrentUpdateExhausted, CorruptRow
   */
  applySweepCandidate(ref: SweepCandidateRef, apply: PromiseSweepApply<H>): Promise<SweepApplyOutcome | StaleRelistRun>
  /**
   * Counts a failed apply; the last allowed one gives the candidate up for a person to look at.
   *
   * @throws InvalidInput, RelistRunNotFound, SweepCandidateNotFound, PersistenceError,
   *   ConcurrentUpdateExhausted, CorruptRow
   */
  recordSweepApplyFailure(ref: SweepCandidateRef, failure: SweepApplyFailure): Promise<SweepApplyFailureOutcome | StaleRelistRun>
  /**
   * Re-opens a given-up candidate, its failed applies reset.
   *
   * @throws InvalidInput, RelistRunNotFound, SweepCandidateNotFound, PersistenceError,
   *   ConcurrentUpdateExhausted, CorruptRow
   */
  rearmSweepCandidate(identity: SweepCandidateIdentity): Promise<SweepRearmOutcome>
  /**
   * The sweep candidate of one entity of a scope, or `null`.
   *
   * @throws InvalidInput, PersistenceError, CorruptRow
   */
  getSweepCandidate(identity: SweepCandidateIdentity): Promise<SweepCandidate | null>
  /**
   * One page of a scope's given-up candidates.
   *
   * @throws InvalidInput, PersistenceError
   */
  listGivenUpSweepCandidates(scope: RelistScope, page: SourcePage): Promise<ReadonlyArray<SweepCandidate>>
  /**
   * Retention: deletes up to `limit` runs that ended before `before`, oldest first, with their receipts and
   * their candidates that are not given up; how many runs went.
   *
   * @throws InvalidInput, PersistenceError
   */
  collectRelistRuns(params: CollectParams): Promise<number>
}

/** `apply` as the Effect API runs it: handed the current transaction's handle, awaited when it returns a Promise. */
const applyOf = <H>(apply: PromiseSweepApply<H>, handle: Effect.Effect<H>): SweepApply => (candidate) =>
  Effect.flatMap(handle, (tx) =>
    Effect.withFiberRuntime((fiber) =>
      Effect.tryPromise({
        try: async () => {
          await callBackFrom(fiber, () => apply(candidate, tx))
        },
        catch: (cause) => cause
      })
    ))

const noHandle: Effect.Effect<undefined> = Effect.succeed(undefined)

/**
 * The relist sweep methods over `call`; `handle` yields the adapter's handle
 * on the current transaction, for `applySweepCandidate` callbacks (without
 * it they get `undefined`).
 */
export function promiseRelistMethods(call: PromiseCall): PromiseRelistMethods<undefined>
export function promiseRelistMethods<H>(call: PromiseCall, handle: Effect.Effect<H>): PromiseRelistMethods<H>
export function promiseRelistMethods<H>(call: PromiseCall, handle?: Effect.Effect<H>): PromiseRelistMethods<H | undefined> {
  const txOf: Effect.Effect<H | undefined> = handle ?? noHandle
  return {
    startRelistRun: (scope) => call((s) => s.startRelistRun(scope)),
    getSweepCheckpoint: (scope) => call((s) => Effect.map(s.getSweepCheckpoint(scope), Option.getOrNull)),
    getRelistRun: (runID) => call((s) => Effect.map(s.getRelistRun(runID), Option.getOrNull)),
    recordRelistReceipt: (runID, receipts) => call((s) => s.recordRelistReceipt(runID, receipts)),
    commitSweepCheckpoint: (runID, checkpoint) => call((s) => s.commitSweepCheckpoint(runID, checkpoint)),
    abandonRelistRun: (runID) => call((s) => s.abandonRelistRun(runID)),
    listSweepReceipts: (runID, page) => call((s) => s.listSweepReceipts(runID, page)),
    listSweepCandidates: (runID, options) => call((s) => s.listSweepCandidates(runID, options)),
    recordSweepOutcome: (ref, outcome) => call((s) => s.recordSweepOutcome(ref, outcome)),
    markSweepCandidateApplied: (ref) => call((s) => s.markSweepCandidateApplied(ref)),
    // A non-function is handed on as it is, for the boundary to refuse.
    applySweepCandidate: (ref, apply) =>
      call((s) => s.applySweepCandidate(ref, typeof apply === "function" ? applyOf(apply, txOf) : apply as never)),
    recordSweepApplyFailure: (ref, failure) => call((s) => s.recordSweepApplyFailure(ref, failure)),
    rearmSweepCandidate: (identity) => call((s) => s.rearmSweepCandidate(identity)),
    getSweepCandidate: (identity) => call((s) => Effect.map(s.getSweepCandidate(identity), Option.getOrNull)),
    listGivenUpSweepCandidates: (scope, page) => call((s) => s.listGivenUpSweepCandidates(scope, page)),
    collectRelistRuns: (params) => call((s) => s.collectRelistRuns(params))
  }
}
