import { Clock, Effect, Option } from "effect"
import type { ConcurrentUpdateExhausted, CorruptRow, InvalidInput, PersistenceError } from "../errors.js"
import { OperationEntropy } from "../operation/entropy.js"
import type { CollectParams } from "../operation/retention.js"
import { RelistRepository, type SourcePage } from "../ports/RelistRepository.js"
import { Transactor } from "../ports/Transactor.js"
import {
  flag,
  PAGE,
  RECEIPTS_TAKING,
  receiptList,
  SCOPE_SHAPE,
  scopeChecks
} from "../relist/checks.js"
import { COLLECT } from "../operation/checks.js"
import { RelistRunNotFound } from "../relist/errors.js"
import {
  type RelistAbandonOutcome,
  type SweepCheckpointInput,
  type SweepCheckpointOutcome,
  decideRelistAbandon,
  decideSweepCheckpoint,
  decideRelistReceipts,
  decideRelistStart,
  type RelistReceiptOutcome,
  withCandidateCounts
} from "../relist/lifecycle.js"
import {
  distinctReceipts,
  formatRelistScope,
  type RelistReceiptInput,
  type RelistReceipt,
  type RelistRun,
  type RelistScope
} from "../relist/RelistRun.js"
import { fieldsOf, optional, orNull, Rules, taking, validate, validated } from "../validation.js"
import { requireWon, retryOnLostRace } from "./run.js"

/** One page as its runner commits it: the page's receipts, and where to list on from. */
export interface SweepCheckpoint extends SweepCheckpointInput {
  readonly receipts: ReadonlyArray<RelistReceiptInput>
}

/** The relist-run half of the relist sweep's Effect API: runs, receipts, checkpoints, retention. */
export interface RelistRunMethods {
  /** Starts a relist run of `scope`, superseding its current one (which commits nothing more and yields no candidates). */
  readonly startRelistRun: (
    scope: RelistScope
  ) => Effect.Effect<RelistRun, InvalidInput | PersistenceError | ConcurrentUpdateExhausted | CorruptRow>
  /**
   * The scope's current run: where a crashed runner resumes (`cursor`, page `pagesCommitted + 1`), or the run behind the
   * candidates once complete.
   */
  readonly getSweepCheckpoint: (scope: RelistScope) => Effect.Effect<Option.Option<RelistRun>, InvalidInput | PersistenceError | CorruptRow>
  /** A run by id, whatever its state. */
  readonly getRelistRun: (runID: string) => Effect.Effect<Option.Option<RelistRun>, InvalidInput | PersistenceError | CorruptRow>
  /** Records entities a listing run saw (again is harmless: the last digest wins); a run no longer listing takes none (`stale-run`). */
  readonly recordRelistReceipt: (
    runID: string,
    receipts: ReadonlyArray<RelistReceiptInput>
  ) => Effect.Effect<RelistReceiptOutcome, InvalidInput | RelistRunNotFound | PersistenceError | CorruptRow>
  /**
   * Commits one page (receipts and cursor) atomically: only a listing run's next page is taken; the page marked `complete`
   * completes the run and derives its candidates.
   */
  readonly commitSweepCheckpoint: (
    runID: string,
    checkpoint: SweepCheckpoint
  ) => Effect.Effect<SweepCheckpointOutcome, InvalidInput | RelistRunNotFound | PersistenceError | ConcurrentUpdateExhausted | CorruptRow>
  /** Ends a current run on purpose: no more pages, no candidates. */
  readonly abandonRelistRun: (
    runID: string
  ) => Effect.Effect<RelistAbandonOutcome, InvalidInput | RelistRunNotFound | PersistenceError | ConcurrentUpdateExhausted | CorruptRow>
  /** A page of a run's receipts (any state), by source id. */
  readonly listSweepReceipts: (
    runID: string,
    page: SourcePage
  ) => Effect.Effect<ReadonlyArray<RelistReceipt>, InvalidInput | RelistRunNotFound | PersistenceError | CorruptRow>
  /** Deletes up to `limit` runs ended before `before`, oldest first, with receipts and candidates not given up; how many. */
  readonly collectRelistRuns: (params: CollectParams) => Effect.Effect<number, InvalidInput | PersistenceError>
}

/** The fields of a `SweepCheckpoint`; its receipts are taken as `RECEIPTS_TAKING`. */
const CHECKPOINT = fieldsOf<SweepCheckpoint>("checkpoint", {
  page: Rules.positiveInt,
  cursor: orNull(Rules.text),
  complete: optional(flag),
  receipts: receiptList
}, { nested: { receipts: RECEIPTS_TAKING } })

/** A fresh, unguessable run id (from the store's `OperationEntropy`). */
const newRunID = Effect.map(OperationEntropy, (entropy) => entropy.token())

/** Builds the relist-run methods over the ports. */
export const makeRelistRunMethods = Effect.gen(function*() {
  const relist = yield* RelistRepository
  const { withTransaction } = yield* Transactor

  const requireRun = (method: string, runID: string, found: Option.Option<RelistRun>) =>
    Effect.mapError(found, () => new RelistRunNotFound({ method, runID }))

  const methods: RelistRunMethods = {
    startRelistRun: taking("startRelistRun", ["scope"], [SCOPE_SHAPE], (scope: RelistScope) =>
      validated("startRelistRun", scopeChecks("scope", scope),
        () => retryOnLostRace("startRelistRun", formatRelistScope(scope), withTransaction(Effect.gen(function*() {
          const current = Option.getOrUndefined(yield* relist.lockCurrentRun(scope))
          const now = yield* Clock.currentTimeMillis
          const decision = decideRelistStart(current, scope, yield* newRunID, now)
          if (decision.superseded !== undefined && current !== undefined) {
            yield* requireWon(yield* relist.updateRun(decision.superseded, current.version))
          }
          yield* requireWon(yield* relist.insertRun(decision.run))
          // What the run will judge: the scope's watches as they are now, by version.
          yield* relist.putBaseline(decision.run)
          return decision.run
        })))
      )),

    getSweepCheckpoint: taking("getSweepCheckpoint", ["scope"], [SCOPE_SHAPE], (scope: RelistScope) =>
      validated("getSweepCheckpoint", scopeChecks("scope", scope), () => relist.getCurrentRun(scope))),

    getRelistRun: (runID) =>
      validated("getRelistRun", [["runID", runID, Rules.id]], () => relist.getRun(runID)),

    recordRelistReceipt: taking("recordRelistReceipt", ["runID", "receipts"], [undefined, RECEIPTS_TAKING], (
      runID: string,
      receipts: ReadonlyArray<RelistReceiptInput>
    ) =>
      validated("recordRelistReceipt", [["runID", runID, Rules.id], ["receipts", receipts, receiptList]],
        // The run stays locked while its receipts go in, so a supersession or
        // completion lands wholly before or wholly after them.
        () => withTransaction(Effect.gen(function*() {
          const run = yield* requireRun("recordRelistReceipt", runID, yield* relist.lockRun(runID))
          const outcome = decideRelistReceipts(run)
          if (outcome === "recorded" && receipts.length > 0) {
            yield* relist.putReceipts(runID, distinctReceipts(receipts), yield* Clock.currentTimeMillis)
          }
          return outcome
        }))
      )),

    commitSweepCheckpoint: taking("commitSweepCheckpoint", ["runID", "checkpoint"], [undefined, CHECKPOINT.shape], (
      runID: string,
      checkpoint: SweepCheckpoint
    ) =>
      validated("commitSweepCheckpoint", CHECKPOINT.checks(checkpoint, [["runID", runID, Rules.id]]),
        () => retryOnLostRace("commitSweepCheckpoint", `relist run ${runID}`, withTransaction(Effect.gen(function*() {
          const run = yield* requireRun("commitSweepCheckpoint", runID, yield* relist.lockRun(runID))
          const now = yield* Clock.currentTimeMillis
          const decision = decideSweepCheckpoint(run, checkpoint, now)
          if (decision.next === undefined) return decision.outcome
          if (checkpoint.receipts.length > 0) yield* relist.putReceipts(runID, distinctReceipts(checkpoint.receipts), now)
          const next = decision.outcome === "completed"
            ? withCandidateCounts(decision.next, yield* relist.deriveCandidates(decision.next, now))
            : decision.next
          yield* requireWon(yield* relist.updateRun(next, run.version))
          return decision.outcome
        })))
      )),

    abandonRelistRun: (runID) =>
      validated("abandonRelistRun", [["runID", runID, Rules.id]],
        () => retryOnLostRace("abandonRelistRun", `relist run ${runID}`, withTransaction(Effect.gen(function*() {
          const run = yield* requireRun("abandonRelistRun", runID, yield* relist.lockRun(runID))
          const decision = decideRelistAbandon(run, yield* Clock.currentTimeMillis)
          if (decision.next !== undefined) yield* requireWon(yield* relist.updateRun(decision.next, run.version))
          return decision.outcome
        })))
      ),

    listSweepReceipts: taking("listSweepReceipts", ["runID", "page"], [undefined, PAGE.shape], (runID: string, page: SourcePage) =>
      Effect.gen(function*() {
        yield* validate("listSweepReceipts", PAGE.checks(page, [["runID", runID, Rules.id]]))
        yield* requireRun("listSweepReceipts", runID, yield* relist.getRun(runID))
        return yield* relist.listReceipts(runID, { after: page.after, limit: page.limit })
      })),

    collectRelistRuns: taking("collectRelistRuns", ["params"], [COLLECT.shape], (params: CollectParams) =>
      validated("collectRelistRuns", COLLECT.checks(params), () => relist.collectRuns({ before: params.before, limit: params.limit })))
  }
  return methods
})
