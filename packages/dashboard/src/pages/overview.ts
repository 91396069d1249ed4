import type { ProviderLimit, StoreStatus } from "@connector-store/core"
import { chartOf, type Sample } from "../chart.js"
import { linkTo, type PageContext } from "../context.js"
import { isoOf, relativeOf } from "../format.js"
import { html, type Html } from "../html.js"
import { badge } from "../layout.js"

/** How many due rows the overview counts before it says "at least". */
export const DUE_COUNT_LIMIT = 100

/** What the overview shows: the store's status, bounded counts of due rows, the limits, the chart's readings. */
export interface OverviewData {
  readonly status: StoreStatus
  readonly dueOperations: { readonly count: number; readonly more: boolean }
  readonly dueWatches: { readonly count: number; readonly more: boolean }
  readonly limits: ReadonlyArray<ProviderLimit>
  readonly samples: ReadonlyArray<Sample>
}

const counted = (n: { readonly count: number; readonly more: boolean }) => n.more ? `${n.count}+` : String(n.count)

const listCard = (title: string, rows: ReadonlyArray<Html>, alert = false) =>
  html`<div class="card ${alert ? "alert" : ""}"><h3>${title}</h3><ul>${rows}</ul></div>`

const row = (label: Html | string, value: Html | string | number, href?: string) =>
  html`<li><span>${href === undefined ? label : html`<a href="${href}">${label}</a>`}</span><strong>${value}</strong></li>`

/** The overview's body: counts by state, what waits longest, what needs a person, the chart. */
export const overviewBody = (ctx: PageContext, data: OverviewData): Html => {
  const { status } = data
  const now = status.at
  const paused = data.limits.filter((limit) => limit.pausedUntil !== null && limit.pausedUntil > now)
  const capped = data.limits.filter((limit) => limit.maxInFlight !== null)
  const needsPerson = status.inDoubt + status.operations.dead + status.operations.reconcile_only + status.watches.repair_failed +
    status.givenUpCandidates + paused.length
  const oldestOp = status.oldestDueOperation
  const oldestWatch = status.oldestDueWatch
  return html`<p class="muted">Counts read at ${isoOf(now)} (exact: one count per table and state).</p>
<div class="cards">
<div class="card ${needsPerson > 0 ? "alert" : "calm"}" data-count="needs-person"><h3>Needs a person</h3><ul>
${row(badge("in-doubt", "in doubt"), status.inDoubt, linkTo(ctx, "/operations", { inDoubt: "yes" }))}
${row(badge("dead"), status.operations.dead, linkTo(ctx, "/operations", { state: "dead" }))}
${row(badge("reconcile_only"), status.operations.reconcile_only, linkTo(ctx, "/operations", { state: "reconcile_only" }))}
${row(badge("repair_failed"), status.watches.repair_failed, linkTo(ctx, "/watches", { status: "repair_failed" }))}
${row(badge("given_up", "given-up candidates"), status.givenUpCandidates, linkTo(ctx, "/relist"))}
${row(badge("paused", "paused accounts"), paused.length, linkTo(ctx, "/limits"))}</ul></div>
<div class="card"><h3>Due backlog</h3><div class="big" data-count="due-operations">${counted(data.dueOperations)}</div><ul>
${row("operations due now", counted(data.dueOperations), linkTo(ctx, "/operations", { due: "yes" }))}
${row("oldest due since", oldestOp === null ? "-" : relativeOf(oldestOp.dueAt, now), oldestOp === null ? undefined : linkTo(ctx, "/operation", { caller: oldestOp.callerDID, id: oldestOp.operationID }))}
${row("watches due now", counted(data.dueWatches), linkTo(ctx, "/watches", { due: "yes" }))}
${row("oldest due watch since", oldestWatch === null ? "-" : relativeOf(oldestWatch.dueAt, now))}
${row("operation leases held", status.leasesHeld)}</ul></div>
${listCard("Operations", Object.entries(status.operations).map(([state, n]) => row(badge(state), n, linkTo(ctx, "/operations", { state }))))}
${listCard("Watches", Object.entries(status.watches).map(([state, n]) => row(badge(state), n, linkTo(ctx, "/watches", { status: state }))), status.watches.repair_failed > 0)}
${listCard("Relist runs", Object.entries(status.relistRuns).map(([state, n]) => row(badge(state), n, linkTo(ctx, "/relist", { state }))))}
${listCard("Sync states", [
    row("total", status.syncStates.total, linkTo(ctx, "/sync")),
    row(badge("held", "leases held"), status.syncStates.leasesHeld, linkTo(ctx, "/sync", { lease: "held" })),
    row(badge("stale", "stale leases"), status.syncStates.staleLeases, linkTo(ctx, "/sync", { lease: "stale" }))
  ], status.syncStates.staleLeases > 0)}
${listCard("Pending authorizations", [row("live", status.pendingAuthorizations.live), row("expired", status.pendingAuthorizations.expired)])}
${listCard("Provider limits", [
    row("scopes with limits", data.limits.length, linkTo(ctx, "/limits")),
    row(badge("paused", "paused now"), paused.length, linkTo(ctx, "/limits")),
    row("capped", capped.length, linkTo(ctx, "/limits"))
  ], paused.length > 0)}
</div>
<h2>Backlog and outcomes</h2>${chartOf(data.samples)}`
}
