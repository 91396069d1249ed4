import type { SimulationReport } from "./report.js"

const list = (counts: Readonly<Record<string, number>>, labels: Readonly<Record<string, string>> = {}): string => {
  const parts = Object.entries(counts).filter(([, n]) => n > 0).map(([k, n]) => `${labels[k] ?? k} ${n}`)
  return parts.length === 0 ? "none" : parts.join(", ")
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

const CRASH_LABELS: Readonly<Record<string, string>> = {
  "after-claim": "after the claim",
  "after-mark-sent": "after marking the request sent",
  "stalls-past-lease": "stalled past its lease",
  "during-request": "with the request in flight",
  "after-response": "after the provider answered"
}

const DEFERRAL_LABELS: Readonly<Record<string, string>> = {
  offline: "offline",
  auth: "expired grant",
  refused: "refused (the verifier's claim had lapsed)"
}

/**
 * The report as a person reads it: what ran, what happened to the writes,
 * the watches and the sweeps, what an operator must look at, and the
 * invariant checks (✓ held, ✗ failed, with each violation).
 */
export const formatReport = (r: SimulationReport): string => {
  const o = r.operations
  const w = r.watches
  const lines: Array<string> = []
  const add = (text = "") => lines.push(text)
  const where = r.processes > 0 ? `${r.runners} runners in ${r.processes} child processes` : `${r.runners} runners in one process`
  // One process runs on a virtual clock; child processes cannot share it and keep the machine's.
  const time = r.processes > 0 ? `${seconds(r.elapsedMs)} of wall-clock time` : `${seconds(r.elapsedMs)} of simulated time`
  add(`Connector simulation · seed ${r.seed} · ${r.database} · ${where} · ${time}`)
  if (!r.finished) add("The duration ran out before every write-back reached a final state; the relist sweep and retention were skipped.")
  add()
  add(`Write-backs (${o.planned} planned: the user's edits on three devices, each one idempotency key; ` +
    `${o.plannedByKind.create} creates, ${o.plannedByKind.update} updates, ${o.plannedByKind.delete} deletes)`)
  add(`  final states: committed ${o.byState.committed} · dead ${o.byState.dead} · reconcile_only ${o.byState.reconcile_only}` +
    ` · still attempted ${o.byState.attempted} · collected by retention ${o.collectedByRetention}`)
  add(`  attempts the store counted: ${o.attempts} (a request is counted before it leaves)`)
  add(`  claims: ${list(o.claims)}`)
  add(`  failures recorded (kind → outcome): ${list(o.failures)}`)
  add(`  deferrals without spending an attempt: offline ${o.deferrals.offline}, expired grant ${o.deferrals.auth}`)
  add(`  reissues: ${o.reissues.handedOut} re-drives were handed a safe reissue (a request may have landed); ` +
    `the provider refused ${o.reissues.refusedByProvider} re-sends because the first had landed, ` +
    `${o.reissues.settledByLookup} were settled by looking the entity up`)
  add(`  crashes injected: ${list(o.crashes, CRASH_LABELS)}` +
    (o.childProcessesKilled > 0 ? `; child processes killed: ${o.childProcessesKilled}` : ""))
  add(`  stale runners stopped by their lost lease: ${o.staleRunnersFenced}`)
  add()
  const p = r.provider
  add(`Provider: ${p.requests} write requests reached it, ${p.applied} applied`)
  add(`  answers: ${list(p.byStatus)}`)
  add(`  refused before reaching it: offline ${p.refusedOffline}, expired grant ${p.refusedUnauthorized}; ` +
    `entities edited elsewhere: ${p.editedElsewhere}`)
  add()
  const watchCount = Object.values(w.byStatus).reduce((sum, n) => sum + n, 0)
  add(`Projection watches: ${watchCount} (${list(w.byStatus)})`)
  add(`  one per entity written back, not one per write-back: the edits of one entity share its watch, and a delete retires it`)
  add(`  verifications: ${list(w.verifications)}`)
  add(`  repairs (the provider's state pulled into the local copy): ${w.repairs}; ` +
    `repair_failed is a watch whose verifications ran out without a match, not a repair that was tried`)
  add(`  ingress arms by the sync: ${list(w.ingressArms)}; audit re-arms: ${list(w.auditArms)}; ` +
    `verifications put off: ${list(w.deferrals, DEFERRAL_LABELS)}`)
  add(`Resumes: on reconnect ${r.resumes.offline}, after re-auth ${r.resumes.auth}`)
  add(`Sync: ${r.sync.completed} syncs completed, ${r.sync.pages} page checkpoints, lease busy ${r.sync.leaseBusy} times, ` +
    `interrupted ${r.sync.interrupted}`)
  const a = r.pendingAuth
  add(`Pending OAuth: ${a.consents} consents (${a.callbacksConsumed} callbacks consumed, ${a.replaysRefused} replays refused); ` +
    `${a.expiredDeleted} abandoned authorization expired and deleted`)
  if (r.relist !== null) {
    const s = r.relist
    add(`Relist sweep: ${s.deletedAtProvider.length} entities deleted and ${s.editedAtProvider.length} edited at the provider; ` +
      `runs ${s.runs.map((run) => `${run.state} after ${run.pages} pages`).join(", ")}`)
    add(`  candidates asked of incomplete runs: refused ${s.incompleteRefused}, answered ${s.incompleteListed}`)
    add(`  candidates: deleted ${s.candidates.deleted}, diverged ${s.candidates.diverged} → deleted locally ${s.deletedLocally}, ` +
      `re-ingested ${s.reingested}, kept ${s.keptBecausePresent}, given up ${s.givenUp.length} (after ${s.applyFailures} failed applies)`)
  }
  add(`Retention: ${o.collectedByRetention} superseded finished operations collected`)
  add()
  add(`What an operator must look at (${r.attention.length})`)
  const byWhat = new Map<string, Array<string>>()
  for (const item of r.attention) byWhat.set(item.what, [...(byWhat.get(item.what) ?? []), item.detail])
  for (const [what, details] of byWhat) {
    add(`  ${what}: ${details.length}`)
    for (const detail of details.slice(0, 5)) add(`    ${detail}`)
    if (details.length > 5) add(`    … and ${details.length - 5} more`)
  }
  if (byWhat.size === 0) add("  nothing")
  if (r.errors.length > 0) {
    add()
    add(`Unexpected errors (runners carried on): ${r.errors.join("; ")}`)
  }
  add()
  add("Invariants")
  for (const check of r.invariants) {
    add(`  ${check.holds ? "✓" : "✗"} ${check.name} (${check.detail})`)
    for (const v of check.violations) add(`      ${v}`)
  }
  add(r.ok ? "All invariants hold." : "AN INVARIANT FAILED.")
  return lines.join("\n")
}
