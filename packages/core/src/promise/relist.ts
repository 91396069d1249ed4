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
import type { StaleRelistRun, SweepCandidateListOptions, SweepCandidateRef } from "../service/relistCandidates.js"
import type { PromiseCall } from "./call.js"

/**
 * The relist sweep as Promises (see the Effect API for each method's
 * guarantees). Absent rows come back as `null`; refusals reject with the
 * store's tagged errors (`RelistRunNotComplete`, `DeletionLimitExceeded`, …).
 */
export interface PromiseRelistMethods {
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
  recordSweepApplyFailure(ref: SweepCandidateRef, failure: SweepApplyFailure): Promise<SweepApplyFailureOutcome | StaleRelistRun>
  rearmSweepCandidate(identity: SweepCandidateIdentity): Promise<SweepRearmOutcome>
  getSweepCandidate(identity: SweepCandidateIdentity): Promise<SweepCandidate | null>
  listGivenUpSweepCandidates(scope: RelistScope, page: SourcePage): Promise<ReadonlyArray<SweepCandidate>>
  collectRelistRuns(params: CollectParams): Promise<number>
}

/** The relist sweep methods over `call`. */
export const promiseRelistMethods = (call: PromiseCall): PromiseRelistMethods => ({
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
  recordSweepApplyFailure: (ref, failure) => call((s) => s.recordSweepApplyFailure(ref, failure)),
  rearmSweepCandidate: (identity) => call((s) => s.rearmSweepCandidate(identity)),
  getSweepCandidate: (identity) => call((s) => Effect.map(s.getSweepCandidate(identity), Option.getOrNull)),
  listGivenUpSweepCandidates: (scope, page) => call((s) => s.listGivenUpSweepCandidates(scope, page)),
  collectRelistRuns: (params) => call((s) => s.collectRelistRuns(params))
})
