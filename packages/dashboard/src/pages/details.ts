import {
  awaitsSettlement,
  type ConnectorOperation,
  isInDoubt,
  type ProjectionWatch,
  type RelistRun,
  safeReissue,
  type SweepCandidate
} from "@connector-store/core"
import { errorWords, operationTarget, watchTarget } from "../actions.js"
import { linkTo, type PageContext, param } from "../context.js"
import { isoOf, jsonText, relativeOf } from "../format.js"
import { html, type Html } from "../html.js"
import { actionButton, badge } from "../layout.js"
import { operationActions, operationBadges, operationLink, releaseButton, watchLink } from "./lists.js"

/** A detail page's answer: its title and body, or that the row is not there. */
export interface Detail {
  readonly title: string
  readonly body: Html
  readonly found: boolean
}

const notFound = (what: string): Detail => ({ title: `No such ${what}`, body: html`<p>No ${what} has that key.</p>`, found: false })

const fields = (rows: ReadonlyArray<readonly [string, unknown]>): Html =>
  html`<dl class="fields">${rows.map(([name, value]) => html`<dt>${name}</dt><dd>${value === null || value === undefined ? "-" : value}</dd>`)}</dl>`

const when = (ms: number | null, now: number) => ms === null ? "-" : html`${isoOf(ms)} <span class="muted">(${relativeOf(ms, now)})</span>`

/** One moment of an operation's story, as its row tells it. */
interface Moment {
  readonly at: number | null
  readonly kind: "ok" | "bad" | "doubt" | "run" | "info"
  readonly text: Html
}

/** What an operation's row tells of its story, in time order (a row keeps the last of each fact, not a history). */
export const operationStory = (row: ConnectorOperation, watch: ProjectionWatch | null, now: number): ReadonlyArray<Moment> => {
  const moments: Array<Moment> = [{ at: row.createdAt, kind: "run", text: html`claimed: the key was first claimed, node key <code>${row.nodeKey}</code>` }]
  if (row.attempts > 0) moments.push({ at: null, kind: "run", text: html`${row.attempts} attempt${row.attempts === 1 ? "" : "s"} counted (each marked sent before its request left)` })
  if (row.sendMarker !== null) moments.push({ at: row.inDoubtSince, kind: "doubt", text: html`marked sent by run <code>${row.sendMarker}</code>` })
  if (row.inDoubtSince !== null) moments.push({ at: row.inDoubtSince, kind: "doubt", text: html`in doubt since: a request may have landed with no outcome known` })
  if (row.lastKind !== null) {
    moments.push({
      at: null,
      kind: row.lastKind === "unknown" ? "doubt" : "bad",
      text: html`last failure: <strong>${row.lastKind}</strong>${row.lastHTTPStatus === null ? null : html` (HTTP ${row.lastHTTPStatus})`}`
    })
  }
  if (isInDoubt(row)) {
    const intent = safeReissue(row.reissueIntent)
    moments.push({
      at: null,
      kind: "doubt",
      text: intent === undefined
        ? html`reissue decision: no safe re-send; a lookup or a person settles it (reconcile)`
        : html`reissue decision: a re-drive re-sends only as <strong>${intent.kind}</strong>`
    })
  }
  if (row.deferReason !== null) moments.push({ at: row.nextAttemptAt, kind: "info", text: html`deferred for ${row.deferReason}, without spending an attempt` })
  if (row.leaseExpiresAt !== null && row.state === "attempted") {
    moments.push({
      at: row.leaseExpiresAt,
      kind: "run",
      text: row.leaseExpiresAt > now
        ? html`leased to runner incarnation <code>${row.incarnation ?? "-"}</code> until then`
        : html`lease of incarnation <code>${row.incarnation ?? "-"}</code> lapsed (a takeover may claim it)`
    })
  }
  if (row.state === "attempted") moments.push({ at: row.nextAttemptAt ?? row.createdAt, kind: "run", text: html`next attempt due` })
  if (row.state !== "attempted") {
    moments.push({
      at: row.updatedAt,
      kind: row.state === "committed" ? "ok" : row.state === "dead" ? "bad" : "doubt",
      text: row.state === "committed"
        ? html`finalized: committed${row.sourceID === null ? null : html` as provider entity <code>${row.sourceID}</code>`}`
        : row.state === "dead"
        ? html`ended dead${isInDoubt(row) ? " while in doubt: unconfirmed, not failed" : ""}`
        : html`reconcile_only: the outcome is unknown; it waits for a lookup or a person`
    })
  }
  if (watch !== null) {
    moments.push({
      at: watch.updatedAt,
      kind: watch.verificationStatus === "verified" ? "ok" : watch.verificationStatus === "repair_failed" ? "bad" : "run",
      text: html`its watch: ${badge(watch.verificationStatus)} generation ${watch.repairGeneration}, ${watch.verificationAttempts} verification attempt${
        watch.verificationAttempts === 1 ? "" : "s"
      }`
    })
  }
  const timed = moments.filter((m) => m.at !== null).sort((a, b) => a.at! - b.at!)
  const untimed = moments.filter((m) => m.at === null)
  // The facts without a time of their own sit after the claim, in the order they happen.
  return [timed[0]!, ...untimed, ...timed.slice(1)]
}

const timeline = (moments: ReadonlyArray<Moment>, now: number): Html =>
  html`<ol class="timeline">${moments.map((m) => html`<li class="t-${m.kind}"><span class="when">${m.at === null ? "" : `${isoOf(m.at)} (${relativeOf(m.at, now)})`}</span>${m.text}</li>`)}</ol>`

const settleForm = (ctx: PageContext, row: ConnectorOperation): Html | null =>
  ctx.canAct && awaitsSettlement(row)
    ? html`<h2>Reconcile</h2><p class="muted">A lookup at the provider found the request applied: record what it found (the watch is armed as a finalize would).</p>
<form class="filters" method="post" action="${linkTo(ctx, "/actions/reconcile")}"><input type="hidden" name="csrf" value="${ctx.csrf}">
<input type="hidden" name="target" value="${operationTarget(row)}">
<label>provider source id<input name="sourceID" required value="${row.sourceID ?? ""}"></label>
<label>local document id<input name="documentID" required value="${row.documentID ?? ""}"></label>
<label>provider etag<input name="providerEtag" value="${row.providerEtag ?? ""}"></label>
<label>provider entity (JSON)<input name="resultEntity" value="null"></label>
<button type="submit" class="act" data-action="reconcile">Reconcile as committed…</button></form>`
    : null

/** An operation's page: its fields (never its lease token), its story, its watch, its actions. */
export const operationDetail = async (ctx: PageContext): Promise<Detail> => {
  const node = param(ctx, "node")
  const caller = param(ctx, "caller")
  const id = param(ctx, "id")
  const row = node !== undefined
    ? await ctx.store.findOperationByNodeKey(node)
    : caller !== undefined && id !== undefined
    ? await ctx.store.getOperation({ callerDID: caller, operationID: id })
    : null
  if (row === null) return notFound("operation")
  const watch = row.sourceID === null
    ? null
    : await ctx.store.getWatch({ ownerDID: row.ownerDID, connectorName: row.connectorName, model: row.model, accountKey: row.accountKey, sourceID: row.sourceID })
  const now = ctx.now
  return {
    title: `Operation ${row.callerDID} / ${row.operationID}`,
    found: true,
    body: html`<p>${operationBadges(row)} ${operationActions(ctx, row)}</p>
<h2>Story</h2>${timeline(operationStory(row, watch, now), now)}
${watch === null ? null : html`<p>Watch: <a href="${watchLink(ctx, watch)}">${watch.ownerDID} / ${watch.connectorName} / ${watch.model} / ${watch.accountKey} / ${watch.sourceID}</a></p>`}
<h2>Fields</h2>${
      fields([
        ["caller", row.callerDID],
        ["operation id", row.operationID],
        ["node key", row.nodeKey],
        ["owner", row.ownerDID],
        ["connector", row.connectorName],
        ["account", row.accountKey],
        ["model", row.model],
        ["op", row.op],
        ["target", row.target],
        ["source id", row.sourceID],
        ["document", row.documentID],
        ["deterministic event id", row.deterministicEventID],
        ["payload hash", row.payloadHash],
        ["provider etag", row.providerEtag],
        ["state", row.state],
        ["attempts", row.attempts],
        ["next attempt", when(row.nextAttemptAt, now)],
        ["last failure kind", row.lastKind],
        ["last HTTP status", row.lastHTTPStatus],
        ["deferred for", row.deferReason],
        ["send marker", row.sendMarker],
        ["in doubt since", when(row.inDoubtSince, now)],
        ["lease", row.leaseExpiresAt === null ? "none" : html`until ${when(row.leaseExpiresAt, now)} (token not shown)`],
        ["holder incarnation", row.incarnation],
        ["version", row.version],
        ["created", when(row.createdAt, now)],
        ["updated", when(row.updatedAt, now)]
      ])
    }
<h2>Reissue intent</h2><pre>${jsonText(row.reissueIntent)}</pre>
<h2>Result entity</h2><pre>${jsonText(row.resultEntity)}</pre>
${settleForm(ctx, row)}`
  }
}

/** A watch's page: its generation and verifications, its operations on the document. */
export const watchDetail = async (ctx: PageContext): Promise<Detail> => {
  const identity = {
    ownerDID: param(ctx, "owner") ?? "",
    connectorName: param(ctx, "connector") ?? "",
    model: param(ctx, "model") ?? "",
    accountKey: param(ctx, "account") ?? "",
    sourceID: param(ctx, "source") ?? ""
  }
  if (Object.values(identity).some((part) => part === "")) return notFound("watch")
  const row = await ctx.store.getWatch(identity)
  if (row === null) return notFound("watch")
  const now = ctx.now
  const operations = await ctx.store.listOperations({ documentID: row.documentID, ownerDID: row.ownerDID, limit: 20 })
  return {
    title: `Watch ${row.ownerDID} / ${row.connectorName} / ${row.model} / ${row.accountKey} / ${row.sourceID}`,
    found: true,
    body: html`<p>${badge(row.verificationStatus)} ${actionButton(ctx, "rearm-watch", watchTarget(row), "Re-arm")}</p>
<h2>Verification</h2>${
      fields([
        ["document", row.documentID],
        ["generation", row.repairGeneration],
        ["verification attempts", row.verificationAttempts],
        ["verified digest", row.verifiedStateDigest],
        ["observed winner digest", row.observedWinnerDigest],
        ["next attempt", when(row.nextAttemptAt, now)],
        ["claimed until", when(row.claimedUntil, now)],
        ["deferred for", row.deferReason],
        ["version", row.version],
        ["created", when(row.createdAt, now)],
        ["updated", when(row.updatedAt, now)]
      ])
    }
<h2>Operations on its document</h2>${
      operations.items.length === 0 ? html`<p class="muted">None kept.</p>` : html`<ul>${
        operations.items.map((op) => html`<li><a href="${operationLink(ctx, op)}">${op.callerDID} / ${op.operationID}</a> ${operationBadges(op)} ${isoOf(op.createdAt)}</li>`)
      }</ul>`
    }`
  }
}

/** A sync state's page: its lease and progress (the lease token and nothing secret shown). */
export const syncDetail = async (ctx: PageContext): Promise<Detail> => {
  const connectorName = param(ctx, "connector")
  const ownerDID = param(ctx, "owner")
  if (connectorName === undefined || ownerDID === undefined) return notFound("sync state")
  const page = await ctx.store.listSyncStates({ connectorName, ownerDID, limit: 1 })
  const row = page.items.find((item) => item.connectorName === connectorName && item.ownerDID === ownerDID)
  if (row === undefined) return notFound("sync state")
  const now = ctx.now
  return {
    title: `Sync state ${row.connectorName} / ${row.ownerDID}`,
    found: true,
    body: html`<p>${badge(row.status)} lease ${badge(row.lease)} ${releaseButton(ctx, row)}</p>
${
      fields([
        ["status", row.status],
        ["lease", row.lease],
        ["lease expires", when(row.leaseExpiresAt, now)],
        ["holder incarnation", row.incarnation ?? null],
        ["entities", row.entityCount],
        ["last synced", row.lastSyncedAt || "-"],
        ["error", row.error ?? null],
        ["version", row.version]
      ])
    }
<h2>Checkpoint</h2><pre>${jsonText(row.checkpoint)}</pre><h2>Recovery buffer</h2><pre>${jsonText(row.recovery)}</pre>`
  }
}

const candidateRows = (ctx: PageContext, rows: ReadonlyArray<SweepCandidate>, run: RelistRun): Html =>
  rows.length === 0 ? html`<p class="muted">None.</p>` : html`<table><thead><tr><th>source</th><th>kind</th><th>status</th><th>outcome</th><th>apply attempts</th><th>last error</th><th></th></tr></thead><tbody>
${rows.map((c) => html`<tr><td class="id">${c.sourceID}</td><td>${c.kind}</td><td>${badge(c.status)}</td><td>${c.outcome ?? "-"}</td><td>${c.applyAttempts}</td>
<td class="id">${c.lastErrorKind === null ? "-" : `${c.lastErrorKind}: ${c.lastErrorMessage ?? ""}`}</td>
<td>${c.status === "given_up" ? actionButton(ctx, "rearm-candidate", watchTarget({ ...run, sourceID: c.sourceID }), "Re-arm") : null}</td></tr>`)}</tbody></table>`

/** A relist run's page: its progress, its candidates, its scope's given-up candidates. */
export const relistDetail = async (ctx: PageContext): Promise<Detail> => {
  const runID = param(ctx, "run")
  if (runID === undefined) return notFound("relist run")
  const run = await ctx.store.getRelistRun(runID)
  if (run === null) return notFound("relist run")
  const now = ctx.now
  const scope = { ownerDID: run.ownerDID, connectorName: run.connectorName, model: run.model, accountKey: run.accountKey }
  let candidates: Html
  try {
    candidates = run.state === "complete"
      ? candidateRows(ctx, await ctx.store.listSweepCandidates(run.runID, { limit: 100 }), run)
      : html`<p class="muted">A run yields candidates once complete.</p>`
  } catch (error) {
    candidates = html`<p class="warn">${errorWords(error).words}</p>`
  }
  const givenUp = await ctx.store.listGivenUpSweepCandidates(scope, { limit: 100 })
  const current = run.state === "started" || run.state === "listing" || run.state === "complete"
  return {
    title: `Relist run ${run.runID}`,
    found: true,
    body: html`<p>${badge(run.state)} ${current ? actionButton(ctx, "abandon-run", JSON.stringify([run.runID]), "Abandon run", {}, true) : null}</p>
${
      fields([
        ["scope", `${run.ownerDID} / ${run.connectorName} / ${run.model} / ${run.accountKey}`],
        ["pages committed", run.pagesCommitted],
        ["cursor", run.cursor],
        ["receipts", run.receiptCount],
        ["tracked", run.trackedCount],
        ["deletions", run.deletionCount],
        ["divergences", run.divergenceCount],
        ["started", when(run.startedAt, now)],
        ["completed", when(run.completedAt, now)],
        ["ended", when(run.endedAt, now)],
        ["version", run.version]
      ])
    }
<h2>Candidates</h2>${candidates}<h2>Given-up candidates of its scope</h2>${candidateRows(ctx, givenUp, run)}`
  }
}
