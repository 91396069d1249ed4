import type { OperationState, ProviderLimit, RelistRunState, StoreStatus, VerificationStatus } from "@connector-store/core"
import { chartOf, type Sample } from "../chart.js"
import { linkTo, type PageContext } from "../context.js"
import { isoOf, relativeOf } from "../format.js"
import { html, type Html } from "../html.js"
import { badge } from "../layout.js"
import type { DashboardStore } from "../options.js"

/** How many rows a bounded count reads before it says "at least". */
export const COUNT_CAP = 100

/** A store with fewer operations and fewer watches than this has its counts read exactly; a larger one, bounded. */
export const EXACT_BELOW = 500

/** A count read up to a cap: `more` when the cap was reached. */
export interface Bounded {
  readonly count: number
  readonly more: boolean
}

/** What the overview counts: exact (the store's status) on a small store, bounded by `COUNT_CAP` per state on a large one. */
export interface OverviewCounts {
  readonly exact: boolean
  readonly at: number
  readonly operations: Readonly<Record<OperationState, Bounded>>
  readonly inDoubt: Bounded
  readonly watches: Readonly<Record<VerificationStatus, Bounded>>
  readonly relistRuns: Readonly<Record<RelistRunState, Bounded>>
  readonly syncStates: { readonly total: Bounded; readonly held: Bounded; readonly stale: Bounded }
  /** Only on a small store (the status's own counts). */
  readonly exactOnly: Pick<StoreStatus, "leasesHeld" | "givenUpCandidates" | "oldestDueOperation" | "oldestDueWatch" | "pendingAuthorizations"> | null
}

const exactly = (count: number): Bounded => ({ count, more: false })
const mapValues = <K extends string>(record: Readonly<Record<K, number>>): Record<K, Bounded> =>
  Object.fromEntries(Object.entries(record).map(([key, n]) => [key, exactly(n as number)])) as Record<K, Bounded>

/** The overview's counts from the store's status (exact). */
export const exactCounts = (status: StoreStatus): OverviewCounts => ({
  exact: true,
  at: status.at,
  operations: mapValues(status.operations),
  inDoubt: exactly(status.inDoubt),
  watches: mapValues(status.watches),
  relistRuns: mapValues(status.relistRuns),
  syncStates: {
    total: exactly(status.syncStates.total),
    held: exactly(status.syncStates.leasesHeld),
    stale: exactly(status.syncStates.staleLeases)
  },
  exactOnly: status
})

const boundedOf = (page: { readonly items: ReadonlyArray<unknown>; readonly nextCursor: string | null }): Bounded => ({
  count: page.items.length,
  more: page.nextCursor !== null
})

/**
 * The overview's counts on a large store, each a keyset page of at most `COUNT_CAP` rows of one state (an index range, never
 * the table), marked when the cap was reached.
 */
export const boundedCounts = async (store: DashboardStore, at: number): Promise<OverviewCounts> => {
  const limit = COUNT_CAP
  const op = (state: OperationState) => store.listOperations({ states: [state], limit }).then(boundedOf)
  const watch = (status: VerificationStatus) => store.listWatches({ statuses: [status], limit }).then(boundedOf)
  const run = (state: RelistRunState) => store.listRelistRuns({ states: [state], limit }).then(boundedOf)
  const sync = (lease?: "held" | "stale") => store.listSyncStates({ lease, limit }).then(boundedOf)
  const [attempted, committed, dead, reconcile, inDoubt, pending, verified, failed, started, listing, complete, abandoned, superseded, total, held, stale] =
    await Promise.all([
      op("attempted"),
      op("committed"),
      op("dead"),
      op("reconcile_only"),
      store.listOperations({ inDoubt: true, limit }).then(boundedOf),
      watch("pending_verification"),
      watch("verified"),
      watch("repair_failed"),
      run("started"),
      run("listing"),
      run("complete"),
      run("abandoned"),
      run("superseded"),
      sync(),
      sync("held"),
      sync("stale")
    ])
  return {
    exact: false,
    at,
    operations: { attempted, committed, dead, reconcile_only: reconcile },
    inDoubt,
    watches: { pending_verification: pending, verified, repair_failed: failed },
    relistRuns: { started, listing, complete, abandoned, superseded },
    syncStates: { total, held, stale },
    exactOnly: null
  }
}

/** What the overview shows: its counts, bounded counts of due rows, the limits, the chart's readings. */
export interface OverviewData {
  readonly counts: OverviewCounts
  readonly dueOperations: Bounded
  readonly dueWatches: Bounded
  readonly limits: ReadonlyArray<ProviderLimit>
  readonly samples: ReadonlyArray<Sample>
}

const shown = (n: Bounded | number) => typeof n === "number" ? String(n) : n.more ? `${n.count}+` : String(n.count)

const listCard = (title: string, rows: ReadonlyArray<Html | null>, alert = false) =>
  html`<div class="card ${alert ? "alert" : ""}"><h3>${title}</h3><ul>${rows}</ul></div>`

const row = (label: Html | string, value: Bounded | number | string, href?: string) =>
  html`<li><span>${href === undefined ? label : html`<a href="${href}">${label}</a>`}</span><strong>${typeof value === "string" ? value : shown(value)}</strong></li>`

const any = (n: Bounded) => n.count > 0

/** The overview's body: counts by state, what waits longest, what needs a person, the chart. */
export const overviewBody = (ctx: PageContext, data: OverviewData): Html => {
  const { counts } = data
  const now = counts.at
  const exact = counts.exactOnly
  const paused = data.limits.filter((limit) => limit.pausedUntil !== null && limit.pausedUntil > now)
  const capped = data.limits.filter((limit) => limit.maxInFlight !== null)
  const needsPerson = any(counts.inDoubt) || any(counts.operations.dead) || any(counts.operations.reconcile_only) ||
    any(counts.watches.repair_failed) || (exact?.givenUpCandidates ?? 0) > 0 || paused.length > 0
  const oldestOp = exact?.oldestDueOperation ?? null
  const oldestWatch = exact?.oldestDueWatch ?? null
  return html`<p class="muted" data-counts="${counts.exact ? "exact" : "bounded"}">${
    counts.exact
      ? `Counts read at ${isoOf(now)}: exact.`
      : `Counts read at ${isoOf(now)}: a large store, so each is counted up to ${COUNT_CAP} on its index (shown as ${COUNT_CAP}+), never by reading a table.`
  }</p>
<div class="cards">
<div class="card ${needsPerson ? "alert" : "calm"}" data-count="needs-person"><h3>Needs a person</h3><ul>
${row(badge("in-doubt", "in doubt"), counts.inDoubt, linkTo(ctx, "/operations", { inDoubt: "yes" }))}
${row(badge("dead"), counts.operations.dead, linkTo(ctx, "/operations", { state: "dead" }))}
${row(badge("reconcile_only"), counts.operations.reconcile_only, linkTo(ctx, "/operations", { state: "reconcile_only" }))}
${row(badge("repair_failed"), counts.watches.repair_failed, linkTo(ctx, "/watches", { status: "repair_failed" }))}
${exact === null ? null : row(badge("given_up", "given-up candidates"), exact.givenUpCandidates, linkTo(ctx, "/relist"))}
${row(badge("paused", "paused accounts"), paused.length, linkTo(ctx, "/limits"))}</ul></div>
<div class="card"><h3>Due backlog</h3><div class="big" data-count="due-operations">${shown(data.dueOperations)}</div><ul>
${row("operations due now", data.dueOperations, linkTo(ctx, "/operations", { due: "yes" }))}
${exact === null ? null : row("oldest due since", oldestOp === null ? "-" : relativeOf(oldestOp.dueAt, now), oldestOp === null ? undefined : linkTo(ctx, "/operation", { caller: oldestOp.callerDID, id: oldestOp.operationID }))}
${row("watches due now", data.dueWatches, linkTo(ctx, "/watches", { due: "yes" }))}
${exact === null ? null : row("oldest due watch since", oldestWatch === null ? "-" : relativeOf(oldestWatch.dueAt, now))}
${exact === null ? null : row("operation leases held", exact.leasesHeld)}</ul></div>
${listCard("Operations", Object.entries(counts.operations).map(([state, n]) => row(badge(state), n as Bounded, linkTo(ctx, "/operations", { state }))))}
${listCard("Watches", Object.entries(counts.watches).map(([state, n]) => row(badge(state), n as Bounded, linkTo(ctx, "/watches", { status: state }))), any(counts.watches.repair_failed))}
${listCard("Relist runs", Object.entries(counts.relistRuns).map(([state, n]) => row(badge(state), n as Bounded, linkTo(ctx, "/relist", { state }))))}
${listCard("Sync states", [
    row("total", counts.syncStates.total, linkTo(ctx, "/sync")),
    row(badge("held", "leases held"), counts.syncStates.held, linkTo(ctx, "/sync", { lease: "held" })),
    row(badge("stale", "stale leases"), counts.syncStates.stale, linkTo(ctx, "/sync", { lease: "stale" }))
  ], any(counts.syncStates.stale))}
${exact === null ? null : listCard("Pending authorizations", [row("live", exact.pendingAuthorizations.live), row("expired", exact.pendingAuthorizations.expired)])}
${listCard("Provider limits", [
    row("scopes with limits", data.limits.length, linkTo(ctx, "/limits")),
    row(badge("paused", "paused now"), paused.length, linkTo(ctx, "/limits")),
    row("capped", capped.length, linkTo(ctx, "/limits"))
  ], paused.length > 0)}
</div>
<h2>Backlog and outcomes</h2>${chartOf(data.samples)}`
}
