// The soak's verdict, from the run's files and the final table, never from
// the store's own bookkeeping alone:
//   duplicates   a key the provider applied more than once (a conditional
//                re-send with a stale etag gets 412 and a taken deterministic
//                id 409, neither applied: a sanctioned reissue never applies
//                twice, so any second application is a violation);
//   lost         a key a claim answered for, or the provider saw, without a row;
//   stuck        an attempted row with a lapsed lease, due, that the sweep
//                did not return, or one the recovery pass could not settle;
//   misreported  a document whose write state says `failed` although the
//                provider applied its write, or `committed` although it never did;
//   untyped      a rejection without a store `_tag` reaching a worker;
//   busy         SQLITE_BUSY reaching a caller;
//   integrity    SQLite's `PRAGMA integrity_check` not `ok`.
import { readFileSync } from "node:fs"

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

/**
 * Judges a run: `{ ledger, events, rows, missedBySweep, unsettled, writeStates, integrity }`
 * → `{ violations: { duplicates: [...keys], lost, stuck, misreported, untyped, busy, integrity }, details }`.
 */
export const judge = ({ ledger, events, rows, missedBySweep, unsettled, writeStates, integrity }) => {
  const applied = countBy(ledger.filter((entry) => entry.applied), (entry) => entry.key)
  const duplicates = [...applied].filter(([, n]) => n > 1).map(([key]) => key).sort()
  const rowKeys = new Set(rows.map((row) => row.operation_id))
  const known = new Set([
    ...events.filter((event) => event.type === "claim-answer").map((event) => event.key),
    ...ledger.map((entry) => entry.key)
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
    ledger.filter((entry) => entry.key === key).map((entry) =>
      `${new Date(entry.t).toISOString().slice(11, 23)} ${entry.worker} token ${String(entry.token).slice(0, 8)} ` +
      `${entry.op}${entry.ifMatch ? ` ifMatch ${entry.ifMatch}` : ""}${entry.providerID ? ` id ${entry.providerID}` : ""} ` +
      `reissue ${entry.reissue ?? "none"} → ${entry.status}${entry.applied ? " applied" : ""}${entry.fault ? ` (${entry.fault})` : ""}` +
      `${entry.late ? " LATE: arrived after its run's lease expired" : ""}`
    )
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
