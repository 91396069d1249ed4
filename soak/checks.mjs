// The soak's verdict, from the run's files and the final table, never from
// the store's own bookkeeping alone:
//   duplicates   a key the testkit's provider model calls applied twice
//                outside a sanctioned reissue (`check()` of a model rebuilt
//                from the key's ledger lines): two plain sends that both
//                applied, or a reissue that applied on top of an earlier
//                apply (a conditional re-send with a stale etag gets 412 and
//                a taken deterministic id 409, so a sanctioned reissue that
//                applies twice is a provider or runner fault);
//   lost         a key a claim answered for, or the provider saw, without a row
//                (in a failover run, except a row the promoted server never had:
//                one the failover forgot, which the replay could not bring back);
//   stuck        an attempted row with a lapsed lease, due, that the sweep
//                did not return, or one the recovery pass could not settle;
//   misreported  a document whose write state says `failed` although the
//                provider applied its write, or `committed` although it never did;
//   untyped      a rejection without a store `_tag` reaching a worker;
//   busy         SQLITE_BUSY reaching a caller;
//   integrity    SQLite's `PRAGMA integrity_check` not `ok`;
//   failover     (failover runs) the store did not notice the promoted server
//                (its status shows no failover to the timeline it is on), or a
//                synchronous standby, promoted, lacked something acknowledged.
// A failover run's forgotten keys are no violation by themselves: Postgres
// forgets what an asynchronous replica had not received. What the store owes
// them is the rest: a forgotten edit replayed in the failover's doubt is
// re-sent only as its reissue (else a duplicate), and ends committed only if
// the provider applied it (else misreported), so exactly once.
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

/** The failover checks: the store noticed the promoted server, and a synchronous standby forgot nothing. */
const failoverViolations = (failover, forgotten) => {
  if (failover === undefined) return []
  const found = []
  const noticed = failover.noticed
  if (noticed === null || noticed === undefined) found.push("the store's status shows no failover")
  else if (noticed.to.timeline !== failover.timelineAfter) {
    found.push(`the store's status shows a failover to timeline ${noticed.to.timeline}, the promoted server is on ${failover.timelineAfter}`)
  }
  if (failover.mode === "sync" && forgotten.size > 0) {
    found.push(`the promoted synchronous standby lacked ${forgotten.size} acknowledged keys: ${[...forgotten].slice(0, 5).join(", ")}`)
  }
  return found
}

/**
 * Judges a run: `{ ledger, events, rows, missedBySweep, unsettled, writeStates, integrity, failover? }`
 * → `{ violations: { duplicates: [...keys], lost, stuck, misreported, untyped, busy, integrity, failover }, details, forgotten }`;
 * `failover` (failover runs): `{ mode, timelineAfter, noticed (the store's `durability.failover`), forgotten (keys
 * acknowledged or sent before the crash the promoted server lacked), replayed }`. `forgotten` in the verdict counts
 * them: `{ keys, applied (the provider had applied), replayed, unreplayed }`.
 */
export const judge = ({ ledger, events, rows, missedBySweep, unsettled, writeStates, integrity, failover }) => {
  const byKey = groupBy([...ledger].sort((a, b) => a.n - b.n), (entry) => entry.request.key)
  const doubled = new Map([...byKey].map(([key, entries]) => [key, providerWithLedger(entries).check()]).filter(([, found]) => found.length > 0))
  const duplicates = [...doubled.keys()].sort()
  const applied = countBy(ledger.filter((entry) => entry.applied), (entry) => entry.request.key)
  const rowKeys = new Set(rows.map((row) => row.operation_id))
  const known = new Set([
    ...events.filter((event) => event.type === "claim-answer").map((event) => event.key),
    ...byKey.keys()
  ])
  const forgotten = new Set(failover?.forgotten ?? [])
  const lost = [...known].filter((key) => !rowKeys.has(key) && !forgotten.has(key)).sort()
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
      integrity: integrity === null || integrity === "ok" ? [] : [integrity],
      failover: failoverViolations(failover, forgotten)
    },
    details,
    forgotten: {
      keys: forgotten.size,
      applied: new Set(ledger.filter((entry) => entry.applied && entry.t < (failover?.crashAt ?? 0) && forgotten.has(entry.request.key))
        .map((entry) => entry.request.key)).size,
      replayed: (failover?.replayed ?? []).filter((key) => forgotten.has(key)).length,
      unreplayed: [...forgotten].filter((key) => !rowKeys.has(key)).length
    }
  }
}

/** True when any check found something. */
export const failed = (verdict) => Object.values(verdict.violations).some((list) => list.length > 0)
