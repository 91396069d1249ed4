import {
  awaitsSettlement,
  type ConnectorOperation,
  formatProviderScope,
  isInDoubt,
  type OperationState,
  type OperatorAction,
  type OperatorPage,
  type OperatorSyncState,
  type ProjectionWatch,
  type ProviderLimit,
  type RelistRun,
  type VerificationStatus
} from "@connector-store/core"
import { operationFilterOf, operationTarget, scopeTarget, syncTarget, watchFilterOf, watchTarget } from "../actions.js"
import { linkTo, type PageContext, param } from "../context.js"
import { isoOf, relativeOf } from "../format.js"
import { html, type Html } from "../html.js"
import { actionButton, badge, corruptNote, csrfField, filterForm, pagerOf, tabsOf } from "../layout.js"

/** The page size of every list. */
export const PAGE_SIZE = 50

/** A page-size from `?limit=`, else `PAGE_SIZE`. */
const limitOf = (ctx: PageContext): number => {
  const n = Number(param(ctx, "limit"))
  return Number.isSafeInteger(n) && n >= 1 && n <= 500 ? n : PAGE_SIZE
}

/** The form that runs an action on every row of the current filter: first a dry-run count, then a confirmation. */
const bulkForm = (ctx: PageContext, action: string, label: string): Html | null => {
  if (!ctx.canAct) return null
  const filter = new URLSearchParams(ctx.url.searchParams)
  filter.delete("cursor")
  return html`<form class="inline" method="post" action="${linkTo(ctx, `/actions/${action}`)}">${csrfField(ctx)}
<input type="hidden" name="scope" value="filter"><input type="hidden" name="filter" value="${filter.toString()}">
<button type="submit" class="act" data-bulk="${action}">${label}</button></form>`
}

const OPERATION_STATE_TABS: ReadonlyArray<readonly [string, string]> = [
  ["", "all"],
  ["attempted", "attempted"],
  ["committed", "committed"],
  ["dead", "dead"],
  ["reconcile_only", "reconcile_only"]
]

/** The link to an operation's page. */
export const operationLink = (ctx: PageContext, row: { readonly callerDID: string; readonly operationID: string }) =>
  linkTo(ctx, "/operation", { caller: row.callerDID, id: row.operationID })

/** The link to a watch's page. */
export const watchLink = (ctx: PageContext, id: { ownerDID: string; connectorName: string; model: string; accountKey: string; sourceID: string }) =>
  linkTo(ctx, "/watch", { owner: id.ownerDID, connector: id.connectorName, model: id.model, account: id.accountKey, source: id.sourceID })

/** The state of an operation as badges: its state, and in doubt when a request may have landed. */
export const operationBadges = (row: ConnectorOperation): Html =>
  html`${badge(row.state)}${isInDoubt(row) ? html` ${badge("in-doubt", "in doubt")}` : null}${row.deferReason === null ? null : html` ${badge("paused", `deferred: ${row.deferReason}`)}`}`

/** The row actions an operation allows now. */
export const operationActions = (ctx: PageContext, row: ConnectorOperation): Html =>
  html`${row.state === "dead" ? actionButton(ctx, "retry", operationTarget(row), "Retry") : null}${
    awaitsSettlement(row) ? actionButton(ctx, "give-up", operationTarget(row), "Give up", {}, true) : null
  }`

/** The operations list: tabs by state, filters, a keyset page newest first, row and filter actions. */
export const operationsBody = async (ctx: PageContext): Promise<Html> => {
  const state = param(ctx, "state")
  const states: ReadonlyArray<OperationState> | undefined =
    state === "attempted" || state === "committed" || state === "dead" || state === "reconcile_only" ? [state] : undefined
  const page: OperatorPage<ConnectorOperation> = await ctx.store.listOperations({
    ...operationFilterOf(ctx.url.searchParams, ctx.now),
    states,
    limit: limitOf(ctx),
    cursor: param(ctx, "cursor")
  })
  return html`${tabsOf(ctx, "/operations", "state", OPERATION_STATE_TABS)}
<div class="tabs">${tabsOf(ctx, "/operations", "inDoubt", [["", "any doubt"], ["yes", "in doubt"]])}${tabsOf(ctx, "/operations", "due", [["", "any time"], ["yes", "due now"]])}</div>
${filterForm(ctx, "/operations", [["owner", "owner"], ["connector", "connector"], ["caller", "caller"], ["document", "document"]], ["state", "inDoubt", "due"])}
<p>${state === "dead" ? bulkForm(ctx, "retry", "Retry every dead operation of this filter…") : null}${
    state === "reconcile_only" ? bulkForm(ctx, "give-up", "Give up every reconcile_only operation of this filter…") : null
  }</p>
${corruptNote(page.corrupt)}
${page.items.length === 0 ? html`<p class="muted">No operations match.</p>` : html`<table data-list="operations"><thead><tr>
<th>operation</th><th>state</th><th>op</th><th>connector / account</th><th>owner</th><th>attempts</th><th>next attempt</th><th>last failure</th><th>updated</th><th></th></tr></thead><tbody>
${page.items.map((row) => html`<tr data-key="${operationTarget(row)}"><td class="id"><a href="${operationLink(ctx, row)}">${row.callerDID} / ${row.operationID}</a></td>
<td>${operationBadges(row)}</td><td>${row.op}</td><td class="id">${row.connectorName} / ${row.accountKey}</td><td class="id">${row.ownerDID}</td>
<td>${row.attempts}</td><td>${row.state === "attempted" ? relativeOf(row.nextAttemptAt ?? row.createdAt, ctx.now) : "-"}</td>
<td>${row.lastKind === null ? "-" : `${row.lastKind}${row.lastHTTPStatus === null ? "" : ` (HTTP ${row.lastHTTPStatus})`}`}</td>
<td title="${isoOf(row.updatedAt)}">${relativeOf(row.updatedAt, ctx.now)}</td><td>${operationActions(ctx, row)}</td></tr>`)}
</tbody></table>`}
${pagerOf(ctx, "/operations", page.nextCursor)}`
}

/** The watches list. */
export const watchesBody = async (ctx: PageContext): Promise<Html> => {
  const status = param(ctx, "status")
  const statuses: ReadonlyArray<VerificationStatus> | undefined =
    status === "pending_verification" || status === "verified" || status === "repair_failed" ? [status] : undefined
  const page: OperatorPage<ProjectionWatch> = await ctx.store.listWatches({
    ...watchFilterOf(ctx.url.searchParams, ctx.now),
    statuses,
    limit: limitOf(ctx),
    cursor: param(ctx, "cursor")
  })
  return html`${tabsOf(ctx, "/watches", "status", [["", "all"], ["pending_verification", "pending_verification"], ["verified", "verified"], ["repair_failed", "repair_failed"]])}
${tabsOf(ctx, "/watches", "due", [["", "any time"], ["yes", "due now"]])}
${filterForm(ctx, "/watches", [["owner", "owner"], ["connector", "connector"], ["document", "document"]], ["status", "due"])}
<p>${status === "repair_failed" ? bulkForm(ctx, "rearm-watch", "Re-arm every repair_failed watch of this filter…") : null}</p>
${corruptNote(page.corrupt)}
${page.items.length === 0 ? html`<p class="muted">No watches match.</p>` : html`<table data-list="watches"><thead><tr>
<th>watch</th><th>status</th><th>document</th><th>generation</th><th>attempts</th><th>next attempt</th><th>deferred</th><th>updated</th><th></th></tr></thead><tbody>
${page.items.map((row) => html`<tr><td class="id"><a href="${watchLink(ctx, row)}">${row.ownerDID} / ${row.connectorName} / ${row.model} / ${row.accountKey} / ${row.sourceID}</a></td>
<td>${badge(row.verificationStatus)}</td><td class="id">${row.documentID}</td><td>${row.repairGeneration}</td><td>${row.verificationAttempts}</td>
<td>${relativeOf(row.nextAttemptAt, ctx.now)}</td><td>${row.deferReason ?? "-"}</td><td title="${isoOf(row.updatedAt)}">${relativeOf(row.updatedAt, ctx.now)}</td>
<td>${actionButton(ctx, "rearm-watch", watchTarget(row), "Re-arm")}</td></tr>`)}
</tbody></table>`}
${pagerOf(ctx, "/watches", page.nextCursor)}`
}

/** The link to a sync state's page. */
export const syncLink = (ctx: PageContext, row: { readonly connectorName: string; readonly ownerDID: string }) =>
  linkTo(ctx, "/sync-state", { connector: row.connectorName, owner: row.ownerDID })

/** The release control of a sync state: a stale lease plainly, a live one only by force. */
export const releaseButton = (ctx: PageContext, row: OperatorSyncState): Html | null =>
  row.lease === "stale"
    ? actionButton(ctx, "release-sync-lease", syncTarget(row.connectorName, row.ownerDID), "Release stale lease")
    : row.lease === "held"
    ? actionButton(ctx, "release-sync-lease", syncTarget(row.connectorName, row.ownerDID), "Force release", { force: "yes" }, true)
    : null

/** The sync states list. */
export const syncStatesBody = async (ctx: PageContext): Promise<Html> => {
  const lease = param(ctx, "lease")
  const page: OperatorPage<OperatorSyncState> = await ctx.store.listSyncStates({
    connectorName: param(ctx, "connector"),
    ownerDID: param(ctx, "owner"),
    lease: lease === "none" || lease === "held" || lease === "stale" ? lease : undefined,
    limit: limitOf(ctx),
    cursor: param(ctx, "cursor")
  })
  return html`${tabsOf(ctx, "/sync", "lease", [["", "all"], ["none", "no lease"], ["held", "lease held"], ["stale", "stale lease"]])}
${filterForm(ctx, "/sync", [["connector", "connector"], ["owner", "owner"]], ["lease"])}
${corruptNote(page.corrupt)}
${page.items.length === 0 ? html`<p class="muted">No sync states match.</p>` : html`<table data-list="sync"><thead><tr>
<th>connector / owner</th><th>status</th><th>lease</th><th>lease expires</th><th>entities</th><th>last synced</th><th>error</th><th></th></tr></thead><tbody>
${page.items.map((row) => html`<tr><td class="id"><a href="${syncLink(ctx, row)}">${row.connectorName} / ${row.ownerDID}</a></td><td>${badge(row.status)}</td>
<td>${badge(row.lease)}</td><td>${relativeOf(row.leaseExpiresAt, ctx.now)}</td><td>${row.entityCount}</td><td>${row.lastSyncedAt || "-"}</td>
<td class="id">${row.error ?? "-"}</td><td>${releaseButton(ctx, row)}</td></tr>`)}
</tbody></table>`}
${pagerOf(ctx, "/sync", page.nextCursor)}`
}

/** The relist runs list. */
export const relistRunsBody = async (ctx: PageContext): Promise<Html> => {
  const state = param(ctx, "state")
  const states = ["started", "listing", "complete", "abandoned", "superseded"] as const
  const page: OperatorPage<RelistRun> = await ctx.store.listRelistRuns({
    states: states.find((s) => s === state) === undefined ? undefined : [state as (typeof states)[number]],
    limit: limitOf(ctx),
    cursor: param(ctx, "cursor")
  })
  return html`${tabsOf(ctx, "/relist", "state", [["", "all"], ...states.map((s) => [s, s] as const)])}
${corruptNote(page.corrupt)}
${page.items.length === 0 ? html`<p class="muted">No relist runs match.</p>` : html`<table data-list="relist"><thead><tr>
<th>run</th><th>scope</th><th>state</th><th>pages</th><th>receipts</th><th>deletions</th><th>divergences</th><th>started</th><th>ended</th></tr></thead><tbody>
${page.items.map((row) => html`<tr><td class="id"><a href="${linkTo(ctx, "/relist-run", { run: row.runID })}">${row.runID}</a></td>
<td class="id">${row.ownerDID} / ${row.connectorName} / ${row.model} / ${row.accountKey}</td><td>${badge(row.state)}</td><td>${row.pagesCommitted}</td>
<td>${row.receiptCount ?? "-"}</td><td>${row.deletionCount ?? "-"}</td><td>${row.divergenceCount ?? "-"}</td>
<td title="${isoOf(row.startedAt)}">${relativeOf(row.startedAt, ctx.now)}</td><td>${relativeOf(row.endedAt, ctx.now)}</td></tr>`)}
</tbody></table>`}
${pagerOf(ctx, "/relist", page.nextCursor)}`
}

const scopeForm = (ctx: PageContext): Html | null =>
  ctx.canAct
    ? html`<h2>Pause or cap a scope</h2><form class="filters" method="post" action="${linkTo(ctx, "/actions/pause")}">${csrfField(ctx)}
<label>connector<input name="connector" required></label><label>account (blank: every account)<input name="account"></label>
<button type="submit" class="act" data-action="pause">Pause…</button><button type="submit" class="act" formaction="${linkTo(ctx, "/actions/cap")}" data-action="cap">Set cap…</button></form>`
    : null

/** The provider limits: every scope's pause and cap (a small table: one row per scope with limits). */
export const limitsBody = async (ctx: PageContext): Promise<Html> => {
  const rows: ReadonlyArray<ProviderLimit> = await ctx.store.listProviderLimits()
  return html`${rows.length === 0 ? html`<p class="muted">No provider limits are set.</p>` : html`<table data-list="limits"><thead><tr>
<th>scope</th><th>state</th><th>cap</th><th>paused until</th><th>by status</th><th>updated</th><th></th></tr></thead><tbody>
${rows.map((row) => {
    const paused = row.pausedUntil !== null && row.pausedUntil > ctx.now
    const target = scopeTarget(row.scope)
    return html`<tr><td class="id">${formatProviderScope(row.scope)}</td><td>${paused ? badge("paused") : badge("done", "running")}</td>
<td>${row.maxInFlight ?? "none"}</td><td>${paused ? `${isoOf(row.pausedUntil)} (${relativeOf(row.pausedUntil, ctx.now)})` : "-"}</td>
<td>${row.pauseStatus ?? "-"}</td><td>${relativeOf(row.updatedAt, ctx.now)}</td>
<td>${paused ? actionButton(ctx, "resume", target, "Resume") : actionButton(ctx, "pause", target, "Pause…")}${actionButton(ctx, "cap", target, "Cap…")}</td></tr>`
  })}</tbody></table>`}
${scopeForm(ctx)}`
}

/** The audit log, newest first. */
export const auditBody = async (ctx: PageContext): Promise<Html> => {
  const page: OperatorPage<OperatorAction> = await ctx.store.listOperatorActions({
    actor: param(ctx, "actor"),
    action: param(ctx, "action"),
    limit: limitOf(ctx),
    cursor: param(ctx, "cursor")
  })
  return html`${filterForm(ctx, "/audit", [["actor", "who"], ["action", "store call"]], [])}
${corruptNote(page.corrupt)}
${page.items.length === 0 ? html`<p class="muted">No actions recorded.</p>` : html`<table data-list="audit"><thead><tr>
<th>when</th><th>who</th><th>what</th><th>rows</th><th>outcome</th><th>the store's answer</th></tr></thead><tbody>
${page.items.map((row) => html`<tr><td title="${isoOf(row.at)}">${isoOf(row.at)}<br><span class="muted">${relativeOf(row.at, ctx.now)}</span></td>
<td class="id">${row.actor}</td><td>${row.action}</td><td class="id lines">${row.targets.slice(0, 10).join("\n")}${row.targets.length > 10 ? ` … and ${row.targets.length - 10} more` : ""}</td>
<td>${badge(row.outcome)}</td><td class="id lines">${row.answer}</td></tr>`)}
</tbody></table>`}
${pagerOf(ctx, "/audit", page.nextCursor)}`
}
