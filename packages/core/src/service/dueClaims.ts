import { Clock, Effect, Metric, Option } from "effect"
import type { InvalidInput, PersistenceError } from "../errors.js"
import { optionalLease } from "../operation/checks.js"
import { type ClaimResult, decideDueClaim } from "../operation/claim.js"
import { doubtedByFailover } from "../operation/failover.js"
import { ServerHistory } from "../ports/ServerHistory.js"
import { countDoubtfulClaim } from "./serverHistory.js"
import type { ConnectorOperation } from "../operation/ConnectorOperation.js"
import type { DueOperationPosition } from "../operation/due.js"
import { OperationEntropy } from "../operation/entropy.js"
import { OperationPolicy } from "../operation/policy.js"
import { allOptionNames } from "../optionNames.js"
import { collectCorruptRows, type CorruptRowReport } from "../ports/CorruptRows.js"
import type { FairDueRead } from "../ports/DueRead.js"
import { type FairPosition, fairStart } from "../due/fair.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import type { DueWatchPosition } from "../watch/due.js"
import type { Millis, ProjectionWatch } from "../watch/ProjectionWatch.js"
import { decideClaim } from "../watch/transitions.js"
import { fieldOf, type Rule, Rules, shapeOf, taking, validate } from "../validation.js"
import { StoreMetrics } from "./metrics.js"
import { ProviderLimitEnforcement } from "../limits/ProviderLimit.js"
import { makeLimitedOperations } from "./limits.js"

/** The largest `limit` of `claimDueOperations`. */
export const MAX_DUE_CLAIMS = 1_000

/**
 * How many pages of rows that do not decode one `claimDueOperations` call
 * passes over before it answers with what it has: a due order whose head is
 * corrupt delays the rows behind it by that many pages per call, never
 * stalls them.
 */
const CORRUPT_PAGES_PASSED = 8

/** The parameters of `claimDueOperations`. */
export interface DueClaimParams {
  /** At most this many due operations are claimed: 1 to `MAX_DUE_CLAIMS`. */
  readonly limit: number
  /** How long each lease lasts; the policy's `leaseMs` when absent. */
  readonly leaseMs?: number | undefined
}

/** One operation a batch claim leased to the caller (a `claimed` `ClaimResult`; never `created`). */
export type DueClaim = Extract<ClaimResult, { readonly outcome: "claimed" }>

/** What `claimDueOperations` answers. */
export interface DueClaims {
  /**
   * The operations now leased to the caller, in the batch's order (by rank in their owner's, then by owner), each with
   * its own lease (drive each as a `claimed` answer of `claimOperation`:
   * mark, send, finalize or record the failure under its token). `reissue`
   * is non-null when the operation is in doubt: re-send only as it says.
   */
  readonly claimed: ReadonlyArray<DueClaim>
  /**
   * Due operations the claim ended instead of leasing: out of attempts
   * (`dead`, or `reconcile_only` when in doubt), or in doubt with no safe
   * way to re-send (`reconcile_only`). Nothing is to be sent for them.
   */
  readonly finished: ReadonlyArray<ConnectorOperation>
  /**
   * Due rows passed over because they cannot be decoded (each also logged
   * and counted in `StoreMetrics.corruptRowsSkipped`); they stay stored and
   * due until repaired.
   */
  readonly corrupt: ReadonlyArray<CorruptRowReport>
}

/** The parameters of `claimDueWatches`. */
export interface DueWatchClaimParams {
  /** What is due by, on the caller's clock (as `claimWatchAttempt`'s `now`). */
  readonly now: Millis
  /** Until when each claim holds, as `claimWatchAttempt`'s `until`: pass it back as `recordVerification`'s `claimedUntil`. */
  readonly until: Millis
  /** At most this many watches are claimed: 1 to `MAX_DUE_CLAIMS`. */
  readonly limit: number
}

/** What `claimDueWatches` answers. */
export interface DueWatchClaims {
  /**
   * The watches now claimed by the caller until `until`, in the batch's
   * order (by rank in their owner's, then by owner), as stored after the
   * claim: verify each for its `repairGeneration` and record the result
   * with `recordVerification` (or `deferWatch`).
   */
  readonly claimed: ReadonlyArray<ProjectionWatch>
  /**
   * Due rows passed over because they cannot be decoded (each also logged
   * and counted); they stay stored until repaired.
   */
  readonly corrupt: ReadonlyArray<CorruptRowReport>
}

/** The batch claims of the store's Effect API. */
export interface DueClaimMethods {
  /**
   * Leases up to `limit` due operations to the caller in one transaction,
   * fair between owners: every owner (`ownerDID`) with due work gets its
   * oldest due operation before any owner gets a second, and so on; one
   * owner's come in the due order. A batch visits at most `limit` owners
   * with due work (and `OWNERS_VISITED_PER_ROW × limit` in all), starting
   * after the last owner this store's previous batch visited and wrapping
   * around, so each owner is reached within ⌈owners / limit⌉ batches of a
   * runner; each store rotates on its own. Each operation is leased as a
   * `claimOperation` of its own key by this caller would
   * (`decideDueClaim`). Workers calling at once get disjoint
   * batches: on Postgres the rows another worker's batch holds locked are
   * passed over (`FOR UPDATE SKIP LOCKED`), and once a batch commits its
   * rows are leased, so not due, until the leases lapse. On SQLite and in
   * memory one writer claims at a time. Due by the store's clock, like
   * `claimOperation`. Its time and memory are bounded by `limit`, whatever
   * the backlog. A crashed worker's batch comes back when its leases lapse.
   */
  readonly claimDueOperations: (params: DueClaimParams) => Effect.Effect<DueClaims, InvalidInput | PersistenceError>
  /**
   * Claims up to `limit` watches due for verification in one transaction,
   * fair between owners as `claimDueOperations` is: every owner with a
   * claimable watch gets its oldest before any owner gets a second, owners
   * rotating from after the last one this store's previous watch batch
   * visited (a rotation of its own, beside the operations'); one owner's
   * come in the due order (next attempt, then identity). Each watch is
   * claimed as `claimWatchAttempt` would claim it for its current
   * generation (pending, due at `now`, under no live claim). Workers
   * calling at once get disjoint batches, as `claimDueOperations`' do. Only
   * the watches due by schedule: the due sweep's audit (settled watches
   * whose winner moved) stays with `listDueWork`.
   */
  readonly claimDueWatches: (params: DueWatchClaimParams) => Effect.Effect<DueWatchClaims, InvalidInput | PersistenceError>
}

const DUE_CLAIM_SHAPE = shapeOf(allOptionNames<DueClaimParams>()(["limit", "leaseMs"]))
const DUE_WATCH_CLAIM_SHAPE = shapeOf(allOptionNames<DueWatchClaimParams>()(["now", "until", "limit"]))

/**
 * Up to `limit` healthy rows of `lockPage`'s owner-fair pages, locked, the
 * first page's rotation starting after `cursor`, passing over pages of rows
 * that do not decode (at most `CORRUPT_PAGES_PASSED` of them); with the last
 * owner the first page's scan visited, the next batch's cursor.
 */
const lockHealthyFair = <A, P>(
  lockPage: (at: FairPosition<P>, limit: number) => Effect.Effect<FairDueRead<A, P>, PersistenceError>,
  limit: number,
  cursor: string | undefined
) =>
  Effect.gen(function*() {
    const rows: Array<A> = []
    let at = fairStart<P>(cursor)
    let scanned: string | undefined
    for (let page = 0; page <= CORRUPT_PAGES_PASSED && rows.length < limit; page++) {
      const read = yield* lockPage(at, limit - rows.length)
      if (page === 0) scanned = read.scanned
      rows.push(...read.rows)
      if (!read.more) break
      at = read.last
    }
    return { rows, scanned }
  })

/** A batch size from 1 to `MAX_DUE_CLAIMS`. */
const batchSize: Rule = (value) =>
  Rules.positiveInt(value) ?? ((value as number) > MAX_DUE_CLAIMS ? `must be at most ${MAX_DUE_CLAIMS}` : undefined)

/** Builds the batch claim over the ports. */
export const makeDueClaimMethods = Effect.gen(function*() {
  const operations = yield* OperationRepository
  const { withTransaction } = yield* Transactor
  const policy = yield* OperationPolicy
  const entropy = yield* OperationEntropy
  const history = Option.getOrUndefined(yield* Effect.serviceOption(ServerHistory))

  const watches = yield* WatchRepository
  const limited = (yield* ProviderLimitEnforcement).enforce ? yield* makeLimitedOperations : undefined
  // The owner the last batch claim's scan visited last, per store and table: the next batch's owners start after it.
  let operationCursor: string | undefined
  let watchCursor: string | undefined

  const methods: DueClaimMethods = {
    claimDueOperations: taking("claimDueOperations", ["params"], [DUE_CLAIM_SHAPE], (params: DueClaimParams) =>
      Effect.gen(function*() {
        yield* validate("claimDueOperations", [
          ["params", params, Rules.record],
          ["params.limit", fieldOf(params, "limit"), batchSize],
          ["params.leaseMs", fieldOf(params, "leaseMs"), optionalLease]
        ])
        const leaseMs = params.leaseMs ?? policy.leaseMs
        const [claims, corrupt] = yield* collectCorruptRows(withTransaction(limited !== undefined
          ? limited.claimDue(params.limit, leaseMs, CORRUPT_PAGES_PASSED + 1, operationCursor)
          : Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const { rows: due, scanned } = yield* lockHealthyFair<ConnectorOperation, DueOperationPosition>(
            (at, limit) => operations.lockDuePage(now, at, limit),
            params.limit,
            operationCursor
          )
          const doubt = history?.doubtAt(now)
          const decided = due.map((row) => ({ row, decision: decideDueClaim(row, entropy.token(), leaseMs, policy, now, doubt) }))
          const writes = decided.filter(({ decision }) => decision.next !== undefined)
          const won = yield* operations.updateAll(writes.map(({ decision, row }) => [row, decision.next!] as const))
          // Every row is locked by this transaction: a write that did not match changed nothing, and is left out.
          const lost = new Set(writes.filter((_, i) => !won[i]).map(({ row }) => row))
          const claimed: Array<DueClaim> = []
          const finished: Array<ConnectorOperation> = []
          for (const { decision, row } of decided) {
            if (lost.has(row)) continue
            const result = decision.result
            if (history !== undefined && doubtedByFailover(row, result.outcome, doubt, now)) countDoubtfulClaim(history)
            if (result.outcome === "claimed") claimed.push(result)
            else if (result.outcome === "finished" && decision.next !== undefined) finished.push(result.operation)
          }
          return { claimed, finished, scanned }
        })))
        // The rotation goes on after the last owner this batch's scan visited (this store's runners only).
        if (claims.scanned !== undefined) operationCursor = claims.scanned
        yield* Metric.update(Metric.tagged(StoreMetrics.dueSweepSize, "kind", "claimed"), claims.claimed.length)
        return { claimed: claims.claimed, finished: claims.finished, corrupt }
      })),

    claimDueWatches: taking("claimDueWatches", ["params"], [DUE_WATCH_CLAIM_SHAPE], (params: DueWatchClaimParams) =>
      Effect.gen(function*() {
        yield* validate("claimDueWatches", [
          ["params", params, Rules.record],
          ["params.now", fieldOf(params, "now"), Rules.millis],
          ["params.until", fieldOf(params, "until"), Rules.millis],
          ["params.limit", fieldOf(params, "limit"), batchSize]
        ])
        const { now, until } = params
        const [claims, corrupt] = yield* collectCorruptRows(withTransaction(Effect.gen(function*() {
          const { rows: due, scanned } = yield* lockHealthyFair<ProjectionWatch, DueWatchPosition>(
            (at, limit) => watches.lockClaimablePage(now, at, limit),
            params.limit,
            watchCursor
          )
          const writtenAt = yield* Clock.currentTimeMillis
          const writes = due.flatMap((row) => {
            const next = decideClaim(row, { generation: row.repairGeneration, until }, now, writtenAt).next
            return next === undefined ? [] : [[row, next] as const]
          })
          const won = yield* watches.updateAll(writes)
          return { claimed: writes.filter((_, i) => won[i]).map(([, next]) => next), scanned }
        })))
        if (claims.scanned !== undefined) watchCursor = claims.scanned
        yield* Metric.update(Metric.tagged(StoreMetrics.dueSweepSize, "kind", "claimed-watches"), claims.claimed.length)
        return { claimed: claims.claimed, corrupt }
      }))
  }
  return methods
})
