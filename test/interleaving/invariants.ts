import type { ConnectorOperation, ProjectionWatch } from "@connector-store/core"
import type { LedgerEntry } from "./provider.js"
import { generationKey, type Knowledge, keyOf, type Violation } from "./world.js"

/** What every invariant says, for reports and docs. */
export const INVARIANTS = {
  "no-blind-claim": "a claim granted after a request of the key applied (or while one may still arrive) carries a reissue",
  "no-double-apply": "the provider applied no key's write twice, except where a sanctioned reissue was one of them (a key replayed after retention collected its row starts over)",
  "nothing-lost": "every key a claim answered for, or that reached the provider, has its row, unless retention removed it by the keep rule",
  "nothing-stuck": "after recovery (leases lapsed, everything due driven) no operation is attempted and no watch pending; before it, the due sweep lists every lapsed attempted row",
  "retention-keeps": "retention deletes only rows the keep rule lets go, and never a row last seen attempted or awaiting settlement",
  "relist-deletes-only-dead-documents": "a relist deletion is never applied to a document the provider still has an entity for, or one written since the run started",
  "no-pending-watch-never-due": "no pending watch is left without a due time",
  "no-give-up-swallows-a-later-winner": "no watch ends repair_failed with an ingress winner that no verification of that generation was claimed against",
  "no-failed-that-applied": "no operation reads failed (dead, not in doubt) when the provider applied it",
  "typed-rejections": "every store rejection carries one of the store's error tags"
} as const

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

/**
 * Judges one retention call from the rows before and after it and the
 * newest version of each row the suite saw: every row it removed must be
 * one the keep rule lets go (judged on the newest version seen of it, and
 * against the rows of either side, so a row made collectable in between is
 * not blamed), and none may have been last seen attempted or awaiting a
 * settle (a row revived since it was chosen).
 */
export const judgeRetention = (
  call: string,
  before: ReadonlyArray<ConnectorOperation>,
  after: ReadonlyArray<ConnectorOperation>,
  know: Knowledge,
  params: { readonly before: number },
  now: number
): ReadonlyArray<Violation> => {
  const remaining = new Set(after.map(keyOf))
  const newest = (row: ConnectorOperation) => {
    const seen = know.latestRow.get(keyOf(row))
    return seen !== undefined && seen.version > row.version ? seen : row
  }
  const context = [...before.map(newest), ...after]
  const out: Array<Violation> = []
  for (const row of before) {
    const key = keyOf(row)
    if (remaining.has(key)) continue
    know.collected.set(key, call)
    const latest = newest(row)
    if (!finished(latest)) {
      out.push({ invariant: "retention-keeps", detail: `${call} deleted ${key}, last seen ${latest.state} (version ${latest.version})` })
    } else if (!keepRuleLets(latest, context, params.before, now) && !keepRuleLets(row, context, params.before, now)) {
      out.push({ invariant: "retention-keeps", detail: `${call} deleted ${key} (${latest.state}, updated ${latest.updatedAt}), which the keep rule keeps` })
    }
  }
  return out
}

/** The end state the final checks look at. */
export interface EndState {
  readonly ledger: ReadonlyArray<LedgerEntry>
  readonly rows: ReadonlyArray<ConnectorOperation>
  readonly watches: ReadonlyArray<ProjectionWatch>
  /** Attempted rows whose lease had lapsed and that were due, but that the due sweep did not list. */
  readonly missedBySweep: ReadonlyArray<string>
  readonly know: Knowledge
  /** Each local document's winner at the end. */
  readonly winnerOf: (documentID: string) => string | null
}

/** The checks over the end of a run, after recovery. */
export const judgeEnd = ({ ledger, rows, watches, missedBySweep, know, winnerOf }: EndState): ReadonlyArray<Violation> => {
  const out: Array<Violation> = []
  const plainApplied = new Map<string, Array<LedgerEntry>>()
  const anyApplied = new Map<string, Array<LedgerEntry>>()
  for (const entry of ledger) {
    if (!entry.applied) continue
    const k = entry.request.key
    anyApplied.set(k, [...(anyApplied.get(k) ?? []), entry])
    if (entry.request.reissue === null) plainApplied.set(k, [...(plainApplied.get(k) ?? []), entry])
  }
  for (const [k, entries] of plainApplied) {
    if (entries.length > 1 && !know.replayedAfterRetention.has(k)) {
      out.push({
        invariant: "no-double-apply",
        detail: `${k} applied ${entries.length} times by requests that were not sanctioned reissues: ` +
          entries.map((e) => `#${e.n} by ${e.actor} (${e.fate}${e.late ? ", late" : ""})`).join(", ")
      })
    }
  }
  const present = new Set(rows.map(keyOf))
  for (const k of new Set([...know.knownKeys, ...ledger.map((e) => e.request.key)])) {
    if (!present.has(k) && !know.collected.has(k)) out.push({ invariant: "nothing-lost", detail: `${k} has no row, and no retention call removed it` })
  }
  for (const k of missedBySweep) out.push({ invariant: "nothing-stuck", detail: `${k}: attempted, lease lapsed and due, but the due sweep did not list it` })
  for (const row of rows) {
    if (row.state === "attempted") out.push({ invariant: "nothing-stuck", detail: `${keyOf(row)} still attempted after recovery` })
    if (row.state === "dead" && row.inDoubtSince === null && (anyApplied.get(keyOf(row))?.length ?? 0) > 0) {
      out.push({ invariant: "no-failed-that-applied", detail: `${keyOf(row)} is dead and not in doubt, but the provider applied it` })
    }
  }
  for (const w of watches) {
    if (w.verificationStatus === "pending_verification" && w.nextAttemptAt === null) {
      out.push({ invariant: "no-pending-watch-never-due", detail: `watch ${w.sourceID} g${w.repairGeneration} is pending with no due time` })
    } else if (w.verificationStatus === "pending_verification") {
      out.push({ invariant: "nothing-stuck", detail: `watch ${w.sourceID} g${w.repairGeneration} still pending after recovery` })
    }
    if (w.verificationStatus === "repair_failed" && w.observedWinnerDigest !== null) {
      const ingressed = know.ingressWinners.get(w.documentID)?.has(w.observedWinnerDigest) ?? false
      const compared = know.claimedAgainst.get(generationKey(w))?.has(w.observedWinnerDigest) ?? false
      // A winner that differs from both watermarks is still news (the audit
      // branch lists it, the next ingress opens): only one the watch records
      // as seen is swallowed.
      const hidden = winnerOf(w.documentID) === w.observedWinnerDigest
      if (ingressed && !compared && hidden) {
        out.push({
          invariant: "no-give-up-swallows-a-later-winner",
          detail: `watch ${w.sourceID} g${w.repairGeneration} gave up with observed := ${w.observedWinnerDigest}, an ingress winner ` +
            `no verification of that generation was claimed against; the sweep will never list it again`
        })
      }
    }
  }
  return out
}
