// The soak's verdict, from the run's files and the final table, never from
// the store's own bookkeeping alone:
//   duplicates   a key the testkit's provider model calls applied twice
//                outside a sanctioned reissue (`check()` of a model rebuilt
//                from the key's ledger lines): two plain sends that both
//                applied, or a reissue that applied on top of an earlier
//                apply (a conditional re-send with a stale etag gets 412 and
//                a taken deterministic id 409, so a sanctioned reissue that
//                applies twice is a provider or runner fault);
//   lost         a key a claim answered for, or the provider saw, without a row;
//   stuck        an attempted row with a lapsed lease, due, that the sweep
//                did not return, or one the recovery pass could not settle;
//   misreported  a document whose write state says `failed` although the
//                provider applied its write, or `committed` although it never did;
//   untyped      a rejection without a store `_tag` reaching a worker;
//   busy         SQLITE_BUSY reaching a caller;
//   integrity    SQLite's `PRAGMA integrity_check` not `ok`.
import { readFileSync } from "node:fs"
import { providerWithLedger } from "@connector-store/testkit/provider"

/** The JSON lines of `path` (a line cut short by a kill is skipped). */
export const readLines = (path) => {
  let text
  try {
    text = readFileSync(path, "utf8")
  } catch {
    return []
  }
  const out = []
  for (const line of text.split("\n")) {
    if (line === "") continue
    try {
      out.push(JSON.parse(line))
    } catch {
      // a torn last line of a killed writer
    }
  }
  return out
}

const countBy = (items, keyOf) => {
  const counts = new Map()
  for (const item of items) counts.set(keyOf(item), (counts.get(keyOf(item)) ?? 0) + 1)
  return counts
}

const groupBy = (items, keyOf) => {
  const groups = new Map()
  for (const item of items) groups.set(keyOf(item), [...(groups.get(keyOf(item)) ?? []), item])
  return groups
}

/** One ledger line as a person reads it. */
const describeEntry = (entry) => {
  const { request } = entry
  return `${new Date(entry.t).toISOString().slice(11, 23)} ${entry.actor} token ${String(entry.token).slice(0, 8)} ` +
    `${request.op}${request.ifMatch ? ` ifMatch ${request.ifMatch}` : ""}${request.providerID ? ` id ${request.providerID}` : ""} ` +
    `reissue ${request.reissue ?? "none"} → ${entry.status}${entry.applied ? " applied" : ""}${entry.fault ? ` (${entry.fault})` : ""}` +
    `${entry.pastLease ? " LATE: arrived after its run's lease expired" : ""}`
}

/**
 * Judges a run: `{ ledger, events, rows, missedBySweep, unsettled, writeStates, integrity }`
 * → `{ violations: { duplicates: [...keys], lost, stuck, misreported, untyped, busy, integrity }, details }`.
 */
export const judge = ({ ledger, events, rows, missedBySweep, unsettled, writeStates, integrity }) => {
  const byKey = groupBy([...ledger].sort((a, b) => a.n - b.n), (entry) => entry.request.key)
  const doubled = new Map([...byKey].map(([key, entries]) => [key, providerWithLedger(entries).check()]).filter(([, found]) => found.length > 0))
  const duplicates = [...doubled.keys()].sort()
  const applied = countBy(ledger.filter((entry) => entry.applied), (entry) => entry.request.key)
  const rowKeys = new Set(rows.map((row) => row.operation_id))
  const known = new Set([
    ...events.filter((event) => event.type === "claim-answer").map((event) => event.key),
    ...byKey.keys()
  ])
  const lost = [...known].filter((key) => !rowKeys.has(key)).sort()
  const stuck = [...new Set([...missedBySweep, ...unsettled])].sort()
  const misreported = []
  for (const row of rows) {
    const state = writeStates.get(row.document_id)
    const landed = (applied.get(row.operation_id) ?? 0) > 0
    if (state === "failed" && landed) misreported.push(`${row.operation_id} (failed, but applied)`)
    if (state === "committed" && !landed) misreported.push(`${row.operation_id} (committed, never applied)`)
  }
  const violationsOf = (what) =>
    events.filter((event) => event.type === "violation" && event.what === what).map((event) =>
      `worker ${event.worker} ${event.method}: ${event.text}`
    )
  const details = Object.fromEntries(duplicates.map((key) => [
    key,
    [...doubled.get(key).map((violation) => violation.detail), ...byKey.get(key).map(describeEntry)]
  ]))
  return {
    violations: {
      duplicates, lost, stuck, misreported, untyped: violationsOf("untyped"), busy: violationsOf("busy"),
      integrity: integrity === null || integrity === "ok" ? [] : [integrity]
    },
    details
  }
}

/** True when any check found something. */
export const failed = (verdict) => Object.values(verdict.violations).some((list) => list.length > 0)
