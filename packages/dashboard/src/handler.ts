import { ACTIONS, type DashboardAction, errorWords, outcomeOf, runAction } from "./actions.js"
import { SCRIPT, STYLES } from "./assets.js"
import { SampleRing } from "./chart.js"
import { linkTo, type PageContext } from "./context.js"
import { html, type Html } from "./html.js"
import { badge, csrfField, pageOf, SECURITY_HEADERS } from "./layout.js"
import type { DashboardAccess, DashboardHandler, DashboardOptions } from "./options.js"
import { operationDetail, relistDetail, syncDetail, watchDetail } from "./pages/details.js"
import { auditBody, limitsBody, operationsBody, relistRunsBody, syncStatesBody, watchesBody } from "./pages/lists.js"
import { boundedCounts, COUNT_CAP, EXACT_BELOW, exactCounts, type OverviewCounts, overviewBody } from "./pages/overview.js"

const CSRF_COOKIE = "connector_store_dashboard_csrf"
const MAX_FORM_BYTES = 256 * 1024

const answer = (status: number, body: string, type: string, headers: Readonly<Record<string, string>> = {}) =>
  new Response(body, { status, headers: { ...SECURITY_HEADERS, "content-type": type, ...headers } })

const plain = (status: number, text: string) => answer(status, `${text}\n`, "text/plain; charset=utf-8")

const randomToken = (): string => {
  const bytes = new Uint8Array(24)
  globalThis.crypto.getRandomValues(bytes)
  return Buffer.from(bytes).toString("base64url")
}

const cookieOf = (request: Request, name: string): string | undefined => {
  for (const part of (request.headers.get("cookie") ?? "").split(";")) {
    const [key, ...rest] = part.trim().split("=")
    if (key === name) return rest.join("=")
  }
  return undefined
}

/** Equal strings, compared in time that does not depend on where they differ. */
const sameToken = (a: string, b: string): boolean => {
  if (a.length !== b.length || a.length === 0) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

/** The mount point as a path without a trailing slash: `""` or `/ops`. */
const normalBase = (basePath: string | undefined): string => {
  const base = (basePath ?? "").replace(/\/+$/, "")
  if (base !== "" && !base.startsWith("/")) throw new TypeError(`basePath must start with "/", got ${JSON.stringify(basePath)}`)
  return base
}

/**
 * Why a form post cannot be this dashboard's own, or undefined when it can: its origin must be the page's (the `Origin` header,
 * else `Sec-Fetch-Site`), and its CSRF field must equal this browser's cookie.
 */
const crossSiteProblem = (request: Request, url: URL, form: URLSearchParams, cookie: string | undefined): string | undefined => {
  const origin = request.headers.get("origin")
  if (origin !== null && origin !== url.origin) return "the request came from another site"
  const site = request.headers.get("sec-fetch-site")
  if (site !== null && site !== "same-origin" && site !== "none") return "the request came from another site"
  const token = form.get("csrf")
  if (cookie === undefined || token === null || !sameToken(cookie, token)) return "the form's token does not match this browser's (reload the page)"
  return undefined
}

/**
 * The dashboard as a fetch-style handler, mounted at `basePath`: server-rendered pages over the store's operator API, their
 * script and styles served by the handler itself. Every request is authorized on the server first; an action needs actions on,
 * an admin, a POST from this dashboard's own page (origin and CSRF token), and a confirmation; each row goes through the same
 * guarded store call as the CLI's, and every action is written to the store's audit log.
 */
export const dashboardHandler = (options: DashboardOptions): DashboardHandler => {
  const base = normalBase(options.basePath)
  const actionsOn = options.actions === true
  const authorize = options.authorize ?? (() => (actionsOn ? "admin" : "read-only") as DashboardAccess)
  const actorOf = options.actorOf ?? (() => "admin")
  const now = options.now ?? Date.now
  const refreshMs = options.refreshMs ?? 5000
  const maxBulkRows = Math.min(500, Math.max(1, options.maxBulkRows ?? 200))
  const statusTtlMs = options.statusTtlMs ?? 2000
  const store = options.store
  const samples = new SampleRing()
  let cached: { readonly at: number; readonly counts: Promise<OverviewCounts> } | undefined

  /**
   * The overview's counts, one reading shared by every page within `statusTtlMs`: the store's exact status while its
   * operation and watch tables are small, bounded counts on their indexes once either is large. Each reading is a chart sample.
   */
  const countsNow = (): Promise<OverviewCounts> => {
    const t = now()
    if (cached !== undefined && t - cached.at < statusTtlMs) return cached.counts
    const counts = Promise.all([store.listOperations({ limit: EXACT_BELOW }), store.listWatches({ limit: EXACT_BELOW })]).then(([ops, watches]) =>
      ops.nextCursor === null && watches.nextCursor === null ? store.getStoreStatus().then(exactCounts) : boundedCounts(store, t)
    )
    cached = { at: t, counts }
    counts.then((c) =>
      samples.add({
        at: c.at,
        backlog: c.operations.attempted.count,
        stuck: c.operations.dead.count + c.operations.reconcile_only.count + c.watches.repair_failed.count,
        committed: c.operations.committed.count
      }), () => {
      cached = undefined
    })
    return counts
  }

  const overview = async (ctx: PageContext): Promise<Html> => {
    const [counts, dueOperations, dueWatches, limits] = await Promise.all([
      countsNow(),
      store.listOperations({ dueBy: ctx.now, limit: COUNT_CAP }),
      store.listWatches({ dueBy: ctx.now, limit: COUNT_CAP }),
      store.listProviderLimits()
    ])
    return overviewBody(ctx, {
      counts,
      dueOperations: { count: dueOperations.items.length, more: dueOperations.nextCursor !== null },
      dueWatches: { count: dueWatches.items.length, more: dueWatches.nextCursor !== null },
      limits,
      samples: samples.all()
    })
  }

  const lists: Readonly<Record<string, readonly [string, (ctx: PageContext) => Promise<Html>]>> = {
    "/": ["Overview", overview],
    "/operations": ["Operations", operationsBody],
    "/watches": ["Watches", watchesBody],
    "/sync": ["Sync states", syncStatesBody],
    "/relist": ["Relist runs", relistRunsBody],
    "/limits": ["Provider limits", limitsBody],
    "/audit": ["Audit log", auditBody]
  }
  const details: Readonly<Record<string, readonly [string, typeof operationDetail]>> = {
    "/operation": ["/operations", operationDetail],
    "/watch": ["/watches", watchDetail],
    "/sync-state": ["/sync", syncDetail],
    "/relist-run": ["/relist", relistDetail]
  }

  const htmlAnswer = (status: number, page: Html, headers: Readonly<Record<string, string>>) =>
    answer(status, page.text, "text/html; charset=utf-8", headers)

  /** The confirmation of an action: what it will do to which rows, counted; nothing is changed yet. */
  const confirmation = (ctx: PageContext, action: DashboardAction, targets: ReadonlyArray<string>, more: boolean, form: URLSearchParams, back: string) => {
    const shown = targets.slice(0, 50).map((target) => {
      const row = action.parse(target)
      return row === undefined ? target : (action.identity as (row: unknown) => string)(row)
    })
    const kept = action.fields ?? []
    return html`<p data-dry-run="${targets.length}">This will <strong>${action.label.toLowerCase()}</strong> on <strong>${targets.length}</strong> row${targets.length === 1 ? "" : "s"}${
      more ? html` (the first ${targets.length} of this filter; run it again for the rest)` : null
    }. Each goes through the store's own guard, which refuses a row that changed since.</p>
<ul>${shown.map((name) => html`<li class="id">${name}</li>`)}${targets.length > shown.length ? html`<li>… and ${targets.length - shown.length} more</li>` : null}</ul>
<form method="post" action="${linkTo(ctx, `/actions/${action.name}`)}" class="filters">${csrfField(ctx)}<input type="hidden" name="confirm" value="yes">
<input type="hidden" name="back" value="${back}">${form.get("force") === "yes" ? html`<input type="hidden" name="force" value="yes">` : null}
${targets.map((target) => html`<input type="hidden" name="target" value="${target}">`)}
${kept.map(([name, label, initial]) => html`<label>${label}<input name="${name}" value="${form.get(name) ?? initial}"></label>`)}
<button type="submit" class="primary" id="confirm">Confirm: ${action.label} (${targets.length})</button> <a href="${back}">cancel</a></form>`
  }

  const act = async (request: Request, ctx: PageContext, name: string, form: URLSearchParams): Promise<Html> => {
    const action = ACTIONS.get(name)!
    const back = (() => {
      const given = form.get("back")
      if (given !== null && given.startsWith(`${base}/`) && !given.startsWith("//")) return given
      const referer = request.headers.get("referer")
      if (referer !== null) {
        try {
          const url = new URL(referer)
          if (url.origin === ctx.url.origin && url.pathname.startsWith(`${base}/`)) return url.pathname + url.search
        } catch {
          // not a URL: the overview
        }
      }
      return linkTo(ctx, "/")
    })()
    let targets = form.getAll("target")
    if (targets.length === 0 && form.get("connector")) targets = [JSON.stringify([form.get("connector"), form.get("account") ?? ""])]
    if (form.get("confirm") !== "yes") {
      if (form.get("scope") === "filter") {
        if (action.bulk === undefined) return html`<p class="error">This action works on one row at a time.</p>`
        const { more, targets: listed } = await action.bulk(ctx, new URLSearchParams(form.get("filter") ?? ""), ctx.maxBulkRows)
        if (listed.length === 0) return html`<p>No row of this filter can take it. Nothing was changed. <a href="${back}">back</a></p>`
        return confirmation(ctx, action, listed, more, form, back)
      }
      if (targets.length === 0) return html`<p class="error">No row was named. Nothing was changed.</p>`
      return confirmation(ctx, action, targets, false, form, back)
    }
    if (targets.length === 0 || targets.length > ctx.maxBulkRows) {
      return html`<p class="error">An action names 1 to ${ctx.maxBulkRows} rows. Nothing was changed.</p>`
    }
    const answers = await runAction(ctx, action, targets, form)
    const outcome = outcomeOf(answers)
    const words = answers.map((row) => `${row.target}: ${row.answer}`).join("\n")
    let audit: Html
    try {
      await store.recordOperatorAction({
        actor: await actorOf(request),
        action: action.call,
        targets: answers.map((row) => row.target),
        outcome,
        answer: words
      })
      audit = html`<p class="muted">Recorded in the <a href="${linkTo(ctx, "/audit")}">audit log</a>.</p>`
    } catch (error) {
      audit = html`<p class="error">The audit log did not take this entry: ${errorWords(error).words}</p>`
    }
    return html`<div class="notice ${outcome}" data-outcome="${outcome}"><p>${badge(outcome)} ${action.label}: ${answers.filter((a) => a.outcome === "done").length} of ${answers.length} done.</p>
<ul>${answers.map((row) => html`<li data-answer="${row.outcome}">${badge(row.outcome)} <span class="id">${row.target}</span>: ${row.answer}</li>`)}</ul></div>
${audit}<p><a href="${back}" id="back">back</a></p>`
  }

  return async (request) => {
    const url = new URL(request.url)
    if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) return plain(404, "not found")
    const path = url.pathname.slice(base.length) || "/"
    let access: DashboardAccess
    try {
      access = await authorize(request)
    } catch {
      access = "forbidden"
    }
    if (access !== "admin" && access !== "read-only") return plain(403, "forbidden: this dashboard is not open to you")
    if (request.method === "GET" && path === "/assets/dashboard.js") return answer(200, SCRIPT, "text/javascript; charset=utf-8")
    if (request.method === "GET" && path === "/assets/dashboard.css") return answer(200, STYLES, "text/css; charset=utf-8")

    const cookie = cookieOf(request, CSRF_COOKIE)
    const csrf = cookie !== undefined && /^[A-Za-z0-9_-]{32}$/.test(cookie) ? cookie : randomToken()
    const headers: Record<string, string> = cookie === csrf
      ? {}
      : {
        "set-cookie": `${CSRF_COOKIE}=${csrf}; Path=${base || "/"}; HttpOnly; SameSite=Strict${url.protocol === "https:" ? "; Secure" : ""}`
      }
    const ctx: PageContext = {
      store,
      url,
      base,
      access,
      canAct: actionsOn && access === "admin",
      csrf,
      now: now(),
      refreshMs,
      maxBulkRows
    }
    const failure = (error: unknown) =>
      htmlAnswer(500, pageOf(ctx, { title: "The store did not answer", here: "", body: html`<p class="error">${errorWords(error).words}</p>` }), headers)

    if (request.method === "POST") {
      const name = path.startsWith("/actions/") ? path.slice("/actions/".length) : ""
      if (!ACTIONS.has(name)) return plain(404, "not found")
      if (!actionsOn) return plain(403, "refused: actions are switched off on this dashboard (read-only)")
      if (access !== "admin") return plain(403, "refused: read-only access cannot act")
      const type = request.headers.get("content-type") ?? ""
      if (!type.startsWith("application/x-www-form-urlencoded")) return plain(415, "refused: an action is a form post")
      const body = await request.text()
      if (body.length > MAX_FORM_BYTES) return plain(413, "refused: the form is too large")
      const form = new URLSearchParams(body)
      const problem = crossSiteProblem(request, url, form, cookie)
      if (problem !== undefined) return plain(403, `refused: ${problem}`)
      try {
        const body = await act(request, ctx, name, form)
        return htmlAnswer(200, pageOf(ctx, { title: ACTIONS.get(name)!.label, here: "", body }), headers)
      } catch (error) {
        return failure(error)
      }
    }
    if (request.method !== "GET" && request.method !== "HEAD") return plain(405, "method not allowed")

    const list = lists[path]
    if (list !== undefined) {
      try {
        return htmlAnswer(200, pageOf(ctx, { title: list[0], here: path, body: await list[1](ctx), live: true }), headers)
      } catch (error) {
        return failure(error)
      }
    }
    const detail = details[path]
    if (detail !== undefined) {
      try {
        const found = await detail[1](ctx)
        return htmlAnswer(found.found ? 200 : 404, pageOf(ctx, { title: found.title, here: detail[0], body: found.body, live: true }), headers)
      } catch (error) {
        return failure(error)
      }
    }
    return plain(404, "not found")
  }
}
