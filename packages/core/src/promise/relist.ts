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
  startRelistRun(scope: RelistScope): Promise<RelistRun>
  getSweepCheckpoint(scope: RelistScope): Promise<RelistRun | null>
  getRelistRun(runID: string): Promise<RelistRun | null>
  recordRelistReceipt(runID: string, receipts: ReadonlyArray<RelistReceiptInput>): Promise<RelistReceiptOutcome>
  commitSweepCheckpoint(runID: string, checkpoint: SweepCheckpoint): Promise<SweepCheckpointOutcome>
  abandonRelistRun(runID: string): Promise<RelistAbandonOutcome>
  listSweepReceipts(runID: string, page: SourcePage): Promise<ReadonlyArray<RelistReceipt>>
  listSweepCandidates(runID: string, options: SweepCandidateListOptions): Promise<ReadonlyArray<SweepCandidate>>
  recordSweepOutcome(ref: SweepCandidateRef, outcome: SweepOutcome): Promise<"recorded" | "given-up" | "settled" | StaleRelistRun>
  markSweepCandidateApplied(ref: SweepCandidateRef): Promise<SweepApplyOutcome | StaleRelistRun>
  /**
   * Applies a decided candidate with `apply` inside the store's transaction,
   * the candidate and its watch locked and re-derived, and marks it applied
   * in the same transaction (see the Effect API's `applySweepCandidate`).
   */
  applySweepCandidate(ref: SweepCandidateRef, apply: PromiseSweepApply<H>): Promise<SweepApplyOutcome | StaleRelistRun>
  recordSweepApplyFailure(ref: SweepCandidateRef, failure: SweepApplyFailure): Promise<SweepApplyFailureOutcome | StaleRelistRun>
  rearmSweepCandidate(identity: SweepCandidateIdentity): Promise<SweepRearmOutcome>
  getSweepCandidate(identity: SweepCandidateIdentity): Promise<SweepCandidate | null>
  listGivenUpSweepCandidates(scope: RelistScope, page: SourcePage): Promise<ReadonlyArray<SweepCandidate>>
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
