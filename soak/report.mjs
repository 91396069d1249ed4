// The soak's printed summary: what ran, what was injected, and the verdict
// (`duplicates 0 · lost 0 · stuck 0` and the other checks, or the offending keys);
// a failover run's failover: when, the timelines, what the promoted server
// forgot, what the store noticed and how many claims it put in doubt.

const tally = (items, keyOf) => {
  const counts = {}
  for (const item of items) counts[keyOf(item)] = (counts[keyOf(item)] ?? 0) + 1
  return counts
}
const list = (counts) => Object.entries(counts).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(" · ")

const seconds = (ms) => `${(ms / 1_000).toFixed(1)} s`

/** The failover lines of a failover run. */
const failoverLines = (stats, verdict) => {
  const f = stats.failover
  const noticed = f.noticed
  const after = stats.ledger.filter((entry) => entry.t >= f.switchedAt)
  const reissues = after.filter((entry) => entry.request.reissue !== null && entry.request.reissue !== undefined)
  const forgotten = verdict.forgotten
  return [
    `failover ${f.mode}: ${f.cutAt === null ? "" : `replica cut, ${seconds(f.crashAt - f.cutAt)} later `}primary crashed, ` +
    `promoted in ${seconds(f.promotedAt - f.crashAt)}, address switched · timeline ${f.timelineBefore} → ${f.timelineAfter}`,
    `  forgotten by the promoted server: ${forgotten.keys} keys acknowledged or sent before the crash (${forgotten.applied} applied at the provider)` +
    ` · replayed ${f.replayed.length} edits without a row (${list(tally(f.replayResults, (result) => result))  || "none"}) · still without a row ${forgotten.unreplayed}`,
    noticed === null || noticed === undefined
      ? "  noticed: NOT by the store (its status shows no failover)"
      : `  noticed by the store ${seconds(noticed.noticedAt - f.switchedAt)} after the switch, timeline ${noticed.from.timeline} → ${noticed.to.timeline}` +
        ` · claims put in doubt ${noticed.doubtfulClaims} · window until +${seconds(noticed.until - noticed.noticedAt)}`,
    `  after the switch: provider requests ${after.length}, reissues ${reissues.length} (${list(tally(reissues, (entry) => entry.status)) || "none"})` +
    ` · parked reconcile_only ${stats.rows.filter((row) => row.state === "reconcile_only").length}`
  ]
}

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
    ...(stats.failover === undefined ? [] : failoverLines(stats, verdict)),
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
