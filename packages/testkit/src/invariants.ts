import type { ConnectorOperation, ProjectionWatch, SafeReissue } from "@connector-store/core"
import { type FakeProvider, keyOf, type LedgerEntry } from "./provider.js"

/** What every invariant says, for reports and docs. */
export const INVARIANTS = {
  "no-blind-claim": "a claim granted after a request of the key applied (or while one may still arrive) carries a reissue",
  "no-double-apply": "the provider applied no key's write twice, except where a sanctioned reissue was one of them (a key replayed after retention collected its row starts over)",
  "nothing-lost": "every key a claim answered for, or that reached the provider, has its row, unless retention removed it by the keep rule; and no operation committed that the provider never applied",
  "nothing-stuck": "after recovery (leases lapsed, everything due driven) no operation is attempted and no watch pending; before it, the due sweep lists every lapsed attempted row",
  "retention-keeps": "retention deletes only rows the keep rule lets go, and never a row last seen attempted or awaiting settlement",
  "relist-deletes-only-dead-documents": "a relist deletion is never applied to a document the provider still has an entity for, or one written since the run started",
  "no-pending-watch-never-due": "no pending watch is left without a due time",
  "no-give-up-swallows-a-later-winner": "no watch ends repair_failed with an ingress winner that no verification of that generation was claimed against",
  "no-failed-that-applied": "no operation reads failed (dead, not in doubt) when the provider applied it",
  "committed-has-watch": "every committed write-back of a document that still exists has its watch",
  "typed-rejections": "every store rejection carries one of the store's error tags"
} as const

/** The name of an invariant (see `INVARIANTS`). */
export type InvariantName = keyof typeof INVARIANTS

/** One broken invariant: its name and what broke it, naming keys, requests and actors. */
export interface InvariantViolation {
  /** Which invariant. */
  readonly invariant: InvariantName
  /** What broke it. */
  readonly detail: string
}

/** The key of a watch generation (`sourceID#repairGeneration`), as `EndState.claimedAgainst` is keyed. */
export const watchGenerationKey = (w: Pick<ProjectionWatch, "sourceID" | "repairGeneration">): string => `${w.sourceID}#${w.repairGeneration}`

const finished = (row: ConnectorOperation) => row.state === "committed" || row.state === "dead"

/** True when the lease on `row` is live at `now` (a lease expiring at t is live before t). */
const leaseLive = (row: ConnectorOperation, now: number) => row.leaseToken !== null && (row.leaseExpiresAt === null || row.leaseExpiresAt >= now)

const older = (a: ConnectorOperation, b: ConnectorOperation) =>
  a.createdAt < b.createdAt ||
  (a.createdAt === b.createdAt && (a.callerDID < b.callerDID || (a.callerDID === b.callerDID && a.operationID < b.operationID)))

/**
 * The retention keep rule, written from the operations guide without the
 * store's code: a finished row updated before `before`, under no live lease,
 * may go when it has no document, or when a newer row of its caller and a
 * newer row of its owner on that document are finished (and, for a
 * committed row, committed): the newest rows decide the document's state.
 * `rows` are the rows it is judged against.
 */
export const keepRuleLets = (row: ConnectorOperation, rows: ReadonlyArray<ConnectorOperation>, before: number, now: number): boolean => {
  if (!finished(row) || row.updatedAt >= before || leaseLive(row, now)) return false
  if (row.documentID === null) return true
  const newer = (party: "callerDID" | "ownerDID", ok: (o: ConnectorOperation) => boolean) =>
    rows.some((o) => o.documentID === row.documentID && o[party] === row[party] && ok(o) && older(row, o))
  const committed = (o: ConnectorOperation) => o.state === "committed"
  if (row.state === "committed" && !(newer("callerDID", committed) && newer("ownerDID", committed))) return false
  return newer("callerDID", finished) && newer("ownerDID", finished)
}

/** One `collectFinishedOperations` call, with the rows read right around it. */
export interface RetentionCall {
  /** How the call is named in a violation. */
  readonly call: string
  /** Every operation row just before the call. */
  readonly rowsBefore: ReadonlyArray<ConnectorOperation>
  /** Every operation row just after it. */
  readonly rowsAfter: ReadonlyArray<ConnectorOperation>
  /** The call's `before` parameter. */
  readonly before: number
  /** The store's clock at the call. */
  readonly now: number
  /** The newest version of a row seen anywhere in the run (an answer, a snapshot), by key; absent, the row itself. */
  readonly latestSeen?: ((key: string) => ConnectorOperation | undefined) | undefined
}

/** What one retention call removed, and the violations of removing it. */
export interface RetentionJudgement {
  /** The keys the call removed (their rows are gone, by retention, not lost). */
  readonly removed: ReadonlyArray<string>
  /** `retention-keeps` violations. */
  readonly violations: ReadonlyArray<InvariantViolation>
}

/**
 * Judges one retention call from the rows before and after it and the
 * newest version of each row seen: every row it removed must be one the
 * keep rule lets go (judged on the newest version seen of it, and against
 * the rows of either side, so a row made collectable in between is not
 * blamed), and none may have been last seen attempted or awaiting a settle
 * (a row revived since it was chosen).
 */
export const judgeRetention = ({ call, rowsBefore, rowsAfter, before, now, latestSeen }: RetentionCall): RetentionJudgement => {
  const remaining = new Set(rowsAfter.map(keyOf))
  const newest = (row: ConnectorOperation) => {
    const seen = latestSeen?.(keyOf(row))
    return seen !== undefined && seen.version > row.version ? seen : row
  }
  const context = [...rowsBefore.map(newest), ...rowsAfter]
  const removed: Array<string> = []
  const violations: Array<InvariantViolation> = []
  for (const row of rowsBefore) {
    const key = keyOf(row)
    if (remaining.has(key)) continue
    removed.push(key)
    const latest = newest(row)
    if (!finished(latest)) {
      violations.push({ invariant: "retention-keeps", detail: `${call} deleted ${key}, last seen ${latest.state} (version ${latest.version})` })
    } else if (!keepRuleLets(latest, context, before, now) && !keepRuleLets(row, context, before, now)) {
      violations.push({ invariant: "retention-keeps", detail: `${call} deleted ${key} (${latest.state}, updated ${latest.updatedAt}), which the keep rule keeps` })
    }
  }
  return { removed, violations }
}

/** A claim the store granted, as things stood the moment it answered. */
export interface GrantedClaim {
  /** Who claimed. */
  readonly actor: string
  /** The key, `callerDID/operationID`. */
  readonly key: string
  /** The reissue the claim handed out. */
  readonly reissue: SafeReissue | null
  /** True when, as the store answered, a request of the key had applied or might still arrive (`FakeProvider.possiblyLanded`). */
  readonly landedAtGrant: boolean
  /** True when a request of the key had applied (for the detail). */
  readonly applied: boolean
  /** True when the key was claimed again after retention removed its row: a new operation, outside its idempotency window. */
  readonly startedOver: boolean
  /** Where in the run it happened (a trace line), for the detail. */
  readonly at?: string | undefined
}

/** `no-blind-claim`: a claim granted after a request of its key applied, or while one may still arrive, must carry a reissue. */
export const judgeClaim = (claim: GrantedClaim): ReadonlyArray<InvariantViolation> =>
  claim.reissue !== null || !claim.landedAtGrant || claim.startedOver ? [] : [{
    invariant: "no-blind-claim",
    detail: `${claim.actor}'s claim of ${claim.key} answered reissue: null, but an earlier request of it ${claim.applied ? "was applied" : "is still in flight"}` +
      (claim.at === undefined ? "" : ` (${claim.at})`)
  }]

/** A relist deletion, as things stood the moment the local document was deleted. */
export interface RelistDeletion {
  /** Who applied it. */
  readonly actor: string
  /** The relist run. */
  readonly runID: string
  /** The candidate's source. */
  readonly sourceID: string
  /** The local document deleted. */
  readonly documentID: string
  /** The provider entities last written from that document. */
  readonly liveEntities: ReadonlyArray<string>
  /** True when a write-back of the document committed after the run started. */
  readonly writtenSinceRunStarted: boolean
}

/** `relist-deletes-only-dead-documents`: no provider entity written from the document, and no write-back of it committed since the run started. */
export const judgeRelistDeletion = (d: RelistDeletion): ReadonlyArray<InvariantViolation> =>
  d.liveEntities.length === 0 && !d.writtenSinceRunStarted ? [] : [{
    invariant: "relist-deletes-only-dead-documents",
    detail: `${d.actor} applied delete_local of ${d.documentID} (candidate ${d.sourceID} of run ${d.runID.slice(0, 8)}) while ` +
      (d.liveEntities.length > 0 ? `the provider has ${d.liveEntities.join(", ")} written from it` : "a write-back of it committed after the run started")
  }]

/** `no-double-apply`: the provider's own duplicate-apply check (`FakeProvider.check`), keys that started over excepted. */
export const judgeDoubleApply = (
  provider: Pick<FakeProvider, "check">,
  startedOver: ReadonlySet<string> = new Set()
): ReadonlyArray<InvariantViolation> => provider.check({ startedOver })

const appliedByKey = (ledger: ReadonlyArray<LedgerEntry>): ReadonlyMap<string, ReadonlyArray<LedgerEntry>> => {
  const out = new Map<string, Array<LedgerEntry>>()
  for (const entry of ledger) if (entry.applied) out.set(entry.request.key, [...(out.get(entry.request.key) ?? []), entry])
  return out
}

/** The end of a run, after recovery: what the store holds, what the provider took, and what the run knows happened. */
export interface EndState {
  /** The provider the run wrote to: its ledger, and its own duplicate-apply check. */
  readonly provider: Pick<FakeProvider, "ledger" | "check">
  /** Every operation row. */
  readonly rows: ReadonlyArray<ConnectorOperation>
  /** Every watch row. */
  readonly watches: ReadonlyArray<ProjectionWatch>
  /** Keys some claim answered for: the store knows them. */
  readonly knownKeys: Iterable<string>
  /** Keys a retention call removed: their absence is no loss. */
  readonly collected: { has(key: string): boolean }
  /** Keys claimed again after retention removed them: new operations, judged neither for double apply nor for a commit the provider never saw. */
  readonly startedOver: ReadonlySet<string>
  /** Attempted rows whose lease had lapsed and that were due, but that the due sweep did not list (before recovery). */
  readonly missedBySweep?: ReadonlyArray<string> | undefined
  /** Winners an ingress brought in, per document. */
  readonly ingressWinners?: ReadonlyMap<string, ReadonlySet<string>> | undefined
  /** Per watch generation (`watchGenerationKey`), the winners current when a verifier's claim was granted. */
  readonly claimedAgainst?: ReadonlyMap<string, ReadonlySet<string>> | undefined
  /** Each local document's winner at the end, null when it is gone. */
  readonly winnerOf?: ((documentID: string) => string | null) | undefined
}

/** `nothing-lost`: every known key, and every key that reached the provider, has its row unless retention removed it; nothing committed that never applied. */
export const judgeLost = ({ provider, rows, knownKeys, collected, startedOver }: EndState): ReadonlyArray<InvariantViolation> => {
  const out: Array<InvariantViolation> = []
  const present = new Set(rows.map(keyOf))
  for (const k of new Set([...knownKeys, ...provider.ledger.map((e) => e.request.key)])) {
    if (!present.has(k) && !collected.has(k)) out.push({ invariant: "nothing-lost", detail: `${k} has no row, and no retention call removed it` })
  }
  const applied = appliedByKey(provider.ledger)
  for (const row of rows) {
    const k = keyOf(row)
    if (row.state === "committed" && !applied.has(k) && !startedOver.has(k)) {
      out.push({ invariant: "nothing-lost", detail: `${k} is committed (→ ${row.sourceID}), but the provider never applied a request of it` })
    }
  }
  return out
}

/** `nothing-stuck`: no operation attempted and no watch pending after recovery, and none the due sweep missed before it. */
export const judgeStuck = ({ rows, watches, missedBySweep = [] }: EndState): ReadonlyArray<InvariantViolation> => [
  ...missedBySweep.map((k): InvariantViolation => ({ invariant: "nothing-stuck", detail: `${k}: attempted, lease lapsed and due, but the due sweep did not list it` })),
  ...rows.filter((r) => r.state === "attempted").map((r): InvariantViolation => ({ invariant: "nothing-stuck", detail: `${keyOf(r)} still attempted after recovery` })),
  ...watches.filter((w) => w.verificationStatus === "pending_verification" && w.nextAttemptAt !== null).map((w): InvariantViolation => ({
    invariant: "nothing-stuck",
    detail: `watch ${w.sourceID} g${w.repairGeneration} still pending after recovery`
  }))
]

/** `no-failed-that-applied`: no operation dead and not in doubt when the provider applied a request of it. */
export const judgeFailedThatApplied = ({ provider, rows }: EndState): ReadonlyArray<InvariantViolation> => {
  const applied = appliedByKey(provider.ledger)
  return rows.flatMap((row): ReadonlyArray<InvariantViolation> => {
    const entries = applied.get(keyOf(row)) ?? []
    return row.state === "dead" && row.inDoubtSince === null && entries.length > 0
      ? [{ invariant: "no-failed-that-applied", detail: `${keyOf(row)} is dead and not in doubt, but the provider applied it (request #${entries.map((e) => e.n).join(", #")})` }]
      : []
  })
}

/**
 * `committed-has-watch`: every committed write-back of a document has a
 * watch of that document. A document that is gone (`winnerOf` answers
 * null: deleted locally) needs none.
 */
export const judgeCommittedWithoutWatch = ({ rows, watches, winnerOf }: EndState): ReadonlyArray<InvariantViolation> => {
  const watched = new Set(watches.map((w) => w.documentID))
  return rows.flatMap((row): ReadonlyArray<InvariantViolation> =>
    row.state !== "committed" || row.documentID === null || watched.has(row.documentID) || winnerOf?.(row.documentID) === null ? [] : [{
      invariant: "committed-has-watch",
      detail: `${keyOf(row)} committed → ${row.sourceID} for ${row.documentID}, which has no watch`
    }])
}

/** `no-pending-watch-never-due`: a pending watch always has a due time. */
export const judgePendingNeverDue = ({ watches }: EndState): ReadonlyArray<InvariantViolation> =>
  watches.filter((w) => w.verificationStatus === "pending_verification" && w.nextAttemptAt === null).map((w) => ({
    invariant: "no-pending-watch-never-due",
    detail: `watch ${w.sourceID} g${w.repairGeneration} is pending with no due time`
  }))

/**
 * `no-give-up-swallows-a-later-winner`: no watch ends `repair_failed` with
 * an observed winner an ingress brought in, that no verification of that
 * generation was claimed against, and that is still the document's winner
 * (a winner that differs from both watermarks is still news: the audit
 * lists it and the next ingress opens; only one the watch records as seen
 * is swallowed).
 */
export const judgeSwallowedWinner = ({ watches, ingressWinners, claimedAgainst, winnerOf }: EndState): ReadonlyArray<InvariantViolation> =>
  watches.flatMap((w): ReadonlyArray<InvariantViolation> => {
    if (w.verificationStatus !== "repair_failed" || w.observedWinnerDigest === null) return []
    const ingressed = ingressWinners?.get(w.documentID)?.has(w.observedWinnerDigest) ?? false
    const compared = claimedAgainst?.get(watchGenerationKey(w))?.has(w.observedWinnerDigest) ?? false
    const hidden = winnerOf?.(w.documentID) === w.observedWinnerDigest
    return ingressed && !compared && hidden ? [{
      invariant: "no-give-up-swallows-a-later-winner",
      detail: `watch ${w.sourceID} g${w.repairGeneration} gave up with observed := ${w.observedWinnerDigest}, an ingress winner ` +
        `no verification of that generation was claimed against; the sweep will never list it again`
    }] : []
  })

/**
 * Every check over the end of a run, after recovery: no write applied twice
 * outside a sanctioned reissue (the provider's own `check()`), nothing
 * lost, nothing stuck, nothing failed that applied, no committed write-back
 * without its watch, no pending watch never due, and no give-up that
 * swallowed a later winner.
 */
export const judgeEnd = (state: EndState): ReadonlyArray<InvariantViolation> => [
  ...judgeDoubleApply(state.provider, state.startedOver),
  ...judgeLost(state),
  ...judgeStuck(state),
  ...judgeFailedThatApplied(state),
  ...judgeCommittedWithoutWatch(state),
  ...judgePendingNeverDue(state),
  ...judgeSwallowedWinner(state)
]
