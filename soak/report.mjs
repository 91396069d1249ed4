// The soak's printed summary: what ran, what was injected, and the verdict
// (`duplicates 0 · lost 0 · stuck 0` and the other checks, or the offending keys).

const tally = (items, keyOf) => {
  const counts = {}
  for (const item of items) counts[keyOf(item)] = (counts[keyOf(item)] ?? 0) + 1
  return counts
}
const list = (counts) => Object.entries(counts).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(" · ")

/** The summary lines of a run. */
export const formatReport = (stats, verdict) => {
  const states = tally(stats.rows, (row) => row.state)
  const drives = stats.events.filter((event) => event.type === "drive")
  const typed = tally(stats.events.filter((event) => event.type === "typed-error"), (event) => `${event.tag} (${event.method})`)
  const offline = stats.events.filter((event) => event.type === "fault" && event.what === "offline").length
  const faults = { ...stats.faults, offline }
  const injected = Object.values(faults).reduce((a, b) => a + b, 0)
  const v = verdict.violations
  const lines = [
    `operations ${stats.rows.length} (${list(states)}) · completed ${states.committed ?? 0}`,
    `by kind: ${list(tally(stats.rows, (row) => row.op))} · deletes committed ${stats.rows.filter((row) => row.op === "delete" && row.state === "committed").length}`,
    `drives ${drives.length} (${list(tally(drives, (event) => event.how))}) · provider requests ${stats.ledger.length} (applied ${stats.ledger.filter((e) => e.applied).length})` +
    ` · recovery ${stats.recovery.drives} re-drives in ${stats.recovery.rounds} rounds`,
    `late requests (arrived after their run's lease expired) ${stats.ledger.filter((e) => e.pastLease).length}`,
    `kills ${stats.kills} · workers started ${stats.spawned} · exited by themselves ${stats.selfExits}`,
    `faults injected ${injected}: ${list(faults)}`,
    `typed errors: ${list(typed) || "none"}`,
    `integrity ${stats.integrity ?? "n/a (postgres)"} · untyped ${v.untyped.length} · busy ${v.busy.length} · misreported ${v.misreported.length}`,
    `duplicates ${v.duplicates.length} · lost ${v.lost.length} · stuck ${v.stuck.length}`
  ]
  for (const [name, keys] of Object.entries(v)) {
    if (keys.length === 0) continue
    lines.push(`${name}:`)
    for (const key of keys.slice(0, 20)) {
      lines.push(`  ${key}`)
      for (const request of verdict.details[key] ?? []) lines.push(`    ${request}`)
    }
    if (keys.length > 20) lines.push(`  … and ${keys.length - 20} more`)
  }
  return lines.join("\n")
}
