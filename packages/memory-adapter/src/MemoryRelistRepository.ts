import {
  ACTIONABLE_SWEEP_STATUSES,
  baselineEntryOf,
  candidateKey,
  collectableRelistRuns,
  compareCodePoints,
  deriveSweepCandidates,
  isCollectedWithRun,
  isCurrentRelistRun,
  type ProjectionWatch,
  type RelistBaselineEntry,
  type RelistReceipt,
  RelistRepository,
  type RelistRun,
  sameRelistScope,
  type SourcePage,
  type SweepCandidate
} from "@connector-store/core"
import { Effect, Option } from "effect"
import type { MemoryDatabase } from "./MemoryDatabase.js"

const RUNS = "relist_run"
const RECEIPTS = "relist_receipt"
const CANDIDATES = "relist_candidate"
const BASELINE = "relist_baseline"
/** The watch table, as the memory watch repository names it: the tracked set. */
const WATCHES = "projection_watch"

const receiptKey = (runID: string, sourceID: string): string => JSON.stringify([runID, sourceID])

/** A baseline entry as stored: the entry and its run. */
interface BaselineRow extends RelistBaselineEntry {
  readonly runID: string
}

/** The keyset page of `rows` by source id. */
const pageOf = <A extends { readonly sourceID: string }>(rows: ReadonlyArray<A>, page: SourcePage): ReadonlyArray<A> =>
  rows
    .filter((row) => page.after === undefined || compareCodePoints(row.sourceID, page.after) > 0)
    .sort((a, b) => compareCodePoints(a.sourceID, b.sourceID))
    .slice(0, page.limit)

/** The relist tables in memory. */
export const makeMemoryRelistRepository = (db: MemoryDatabase): RelistRepository["Type"] => {
  const runs = Effect.map(db.read<RelistRun>(RUNS), (table) => Array.from(table.values()))
  const candidates = Effect.map(db.read<SweepCandidate>(CANDIDATES), (table) => Array.from(table.values()))
  const receiptsOf = (runID: string) =>
    Effect.map(db.read<RelistReceipt>(RECEIPTS), (table) => Array.from(table.values()).filter((row) => row.runID === runID))
  const runByID = (runID: string) => Effect.map(db.read<RelistRun>(RUNS), (table) => Option.fromNullable(table.get(runID)))
  const currentRun = (scope: Parameters<RelistRepository["Type"]["getCurrentRun"]>[0]) =>
    Effect.map(runs, (all) => Option.fromNullable(all.find((run) => sameRelistScope(run, scope) && isCurrentRelistRun(run))))
  const baselineOf = (runID: string) =>
    Effect.map(db.read<BaselineRow>(BASELINE), (table) => Array.from(table.values()).filter((row) => row.runID === runID))
  const entryOf = ({ runID: _, ...entry }: BaselineRow): RelistBaselineEntry => entry
  const candidateByKey = (key: string) =>
    Effect.map(db.read<SweepCandidate>(CANDIDATES), (table) => Option.fromNullable(table.get(key)))

  return {
    getRun: runByID,
    lockRun: runByID,
    getCurrentRun: currentRun,
    lockCurrentRun: currentRun,
    insertRun: (run) =>
      db.write<RelistRun, boolean>(RUNS, (table) => {
        const clash = table.has(run.runID) ||
          (isCurrentRelistRun(run) && Array.from(table.values()).some((other) => sameRelistScope(other, run) && isCurrentRelistRun(other)))
        if (clash) return false
        table.set(run.runID, run)
        return true
      }),
    updateRun: (next, expectedVersion) =>
      db.write<RelistRun, boolean>(RUNS, (table) => {
        if (table.get(next.runID)?.version !== expectedVersion) return false
        table.set(next.runID, next)
        return true
      }),
    putBaseline: (run) =>
      Effect.flatMap(db.read<ProjectionWatch>(WATCHES), (watches) =>
        db.write<BaselineRow, void>(BASELINE, (table) => {
          for (const watch of watches.values()) {
            if (sameRelistScope(watch, run)) {
              table.set(receiptKey(run.runID, watch.sourceID), { runID: run.runID, ...baselineEntryOf(watch) })
            }
          }
        })),
    getBaseline: (runID, sourceIDs) =>
      Effect.map(db.read<BaselineRow>(BASELINE), (table) => {
        const found: Array<RelistBaselineEntry> = []
        for (const sourceID of new Set(sourceIDs)) {
          const row = table.get(receiptKey(runID, sourceID))
          if (row !== undefined) found.push(entryOf(row))
        }
        return found
      }),
    putReceipts: (runID, receipts, seenAt) =>
      db.write<RelistReceipt, void>(RECEIPTS, (table) => {
        for (const receipt of receipts) {
          table.set(receiptKey(runID, receipt.sourceID), { runID, sourceID: receipt.sourceID, digest: receipt.digest, seenAt })
        }
      }),
    listReceipts: (runID, page) => Effect.map(receiptsOf(runID), (rows) => pageOf(rows, page)),
    deriveCandidates: (run, now) =>
      Effect.gen(function*() {
        const watches = Array.from((yield* db.read<ProjectionWatch>(WATCHES)).values())
        const receipts = new Map((yield* receiptsOf(run.runID)).map((row) => [row.sourceID, row]))
        const baseline = new Map((yield* baselineOf(run.runID)).map((row) => [row.sourceID, entryOf(row)]))
        const derivation = deriveSweepCandidates(run, watches, baseline, receipts, yield* candidates, now)
        yield* db.write<SweepCandidate, void>(CANDIDATES, (table) => {
          for (const [key, row] of table) if (sameRelistScope(row, run)) table.delete(key)
          for (const row of derivation.candidates) table.set(candidateKey(row), row)
        })
        const derived = new Set(derivation.candidates.filter((row) => row.runID === run.runID).map((row) => row.sourceID))
        yield* db.write<BaselineRow, void>(BASELINE, (table) => {
          for (const [key, row] of table) if (row.runID === run.runID && !derived.has(row.sourceID)) table.delete(key)
        })
        return derivation.counts
      }),
    listCandidates: (runID, page) =>
      Effect.gen(function*() {
        const run = Option.getOrUndefined(yield* runByID(runID))
        if (run?.state !== "complete") return []
        const rows = (yield* candidates).filter((row) =>
          row.runID === runID && ACTIONABLE_SWEEP_STATUSES.includes(row.status) &&
          (page.kind === undefined || row.kind === page.kind)
        )
        return pageOf(rows, page)
      }),
    listGivenUp: (scope, page) =>
      Effect.map(candidates, (rows) => pageOf(rows.filter((row) => sameRelistScope(row, scope) && row.status === "given_up"), page)),
    getCandidate: (identity) => candidateByKey(candidateKey(identity)),
    lockCandidate: (identity) => candidateByKey(candidateKey(identity)),
    updateCandidate: (next, expectedVersion) =>
      db.write<SweepCandidate, boolean>(CANDIDATES, (table) => {
        const key = candidateKey(next)
        const stored = table.get(key)
        if (stored === undefined || stored.runID !== next.runID || stored.version !== expectedVersion) return false
        table.set(key, next)
        return true
      }),
    collectRuns: (params) =>
      db.withTransaction(Effect.gen(function*() {
        const doomed = new Set(collectableRelistRuns(yield* runs, params))
        if (doomed.size === 0) return 0
        yield* db.write<RelistReceipt, void>(RECEIPTS, (table) => {
          for (const [key, row] of table) if (doomed.has(row.runID)) table.delete(key)
        })
        yield* db.write<SweepCandidate, void>(CANDIDATES, (table) => {
          for (const [key, row] of table) if (doomed.has(row.runID) && isCollectedWithRun(row, row.runID)) table.delete(key)
        })
        yield* db.write<BaselineRow, void>(BASELINE, (table) => {
          for (const [key, row] of table) if (doomed.has(row.runID)) table.delete(key)
        })
        return yield* db.write<RelistRun, number>(RUNS, (table) => {
          for (const runID of doomed) table.delete(runID)
          return doomed.size
        })
      }))
  }
}
