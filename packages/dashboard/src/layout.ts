import { type PageContext, linkTo } from "./context.js"
import { html, type Html } from "./html.js"

const NAV: ReadonlyArray<readonly [string, string]> = [
  ["/", "Overview"],
  ["/operations", "Operations"],
  ["/watches", "Watches"],
  ["/sync", "Sync states"],
  ["/relist", "Relist runs"],
  ["/limits", "Provider limits"],
  ["/audit", "Audit log"]
]

/** The security headers of every answer: nothing inline runs, nothing is framed, nothing is cached. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
}

/** A whole page: the header with its navigation and refresh control, then `body`; `live` pages refresh while visible. */
export const pageOf = (
  ctx: PageContext,
  page: { readonly title: string; readonly here: string; readonly body: Html; readonly live?: boolean }
): Html =>
  html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · connector-store</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="${linkTo(ctx, "/assets/dashboard.css")}">
<script src="${linkTo(ctx, "/assets/dashboard.js")}" defer></script></head>
<body><header><span class="brand">connector-store</span>
<nav>${NAV.map(([path, label]) => html`<a href="${linkTo(ctx, path)}" class="${page.here === path ? "here" : ""}">${label}</a>`)}</nav>
<span class="tools"><span class="access" title="your access">${ctx.canAct ? "admin: actions on" : ctx.access === "admin" ? "admin: actions off" : "read-only"}</span>
${page.live === true && ctx.refreshMs > 0
    ? html`<label><input type="checkbox" id="auto" checked> live</label>`
    : null}
<button type="button" id="refresh" title="refresh now">Refresh</button><span id="refreshed"></span></span></header>
<main id="live" data-refresh-ms="${page.live === true ? ctx.refreshMs : 0}"><h1>${page.title}</h1>${page.body}</main></body></html>`

/** A coloured badge for a state, status or outcome. */
export const badge = (state: string, label: string = state): Html => html`<span class="badge s-${state.replace(/[^a-z_-]/gi, "")}">${label}</span>`

/** The hidden CSRF field every form carries. */
export const csrfField = (ctx: PageContext): Html => html`<input type="hidden" name="csrf" value="${ctx.csrf}">`

/** Tabs of one query parameter's values; `all` clears it. The other parameters of the filter stay; the cursor does not. */
export const tabsOf = (ctx: PageContext, path: string, name: string, values: ReadonlyArray<readonly [string, string]>): Html => {
  const current = ctx.url.searchParams.get(name) ?? ""
  const rest: Record<string, string> = {}
  for (const [key, value] of ctx.url.searchParams) if (key !== name && key !== "cursor") rest[key] = value
  return html`<div class="tabs">${
    values.map(([value, label]) => html`<a class="${current === value ? "here" : ""}" href="${linkTo(ctx, path, { ...rest, [name]: value })}">${label}</a>`)
  }</div>`
}

/** The filter form of a list: text fields by name, the tab's value kept. */
export const filterForm = (
  ctx: PageContext,
  path: string,
  fields: ReadonlyArray<readonly [name: string, label: string]>,
  keep: ReadonlyArray<string>
): Html =>
  html`<form class="filters" method="get" action="${linkTo(ctx, path)}">
${keep.map((name) => ctx.url.searchParams.has(name) ? html`<input type="hidden" name="${name}" value="${ctx.url.searchParams.get(name)}">` : null)}
${fields.map(([name, label]) => html`<label>${label}<input name="${name}" value="${ctx.url.searchParams.get(name) ?? ""}"></label>`)}
<button type="submit">Filter</button> <a href="${linkTo(ctx, path)}">clear</a></form>`

/** The next-page link of a keyset page (and back to the first). */
export const pagerOf = (ctx: PageContext, path: string, nextCursor: string | null): Html => {
  const rest: Record<string, string> = {}
  for (const [key, value] of ctx.url.searchParams) if (key !== "cursor") rest[key] = value
  return html`<div class="pager">${ctx.url.searchParams.has("cursor") ? html`<a href="${linkTo(ctx, path, rest)}">« first page</a>` : null}
${nextCursor === null ? html`<span class="muted">last page</span>` : html`<a rel="next" href="${linkTo(ctx, path, { ...rest, cursor: nextCursor })}">next page »</a>`}</div>`
}

/** A note of the rows of a page that could not be decoded. */
export const corruptNote = (corrupt: ReadonlyArray<{ readonly table: string; readonly key: string }>): Html | null =>
  corrupt.length === 0 ? null : html`<p class="warn">${corrupt.length} row${corrupt.length === 1 ? "" : "s"} of this page cannot be decoded and are left out: ${
    corrupt.map((row) => `${row.table} ${row.key}`).join(", ")
  }</p>`

/** A small form that posts one action on one row (the confirmation comes next). */
export const actionButton = (
  ctx: PageContext,
  action: string,
  target: string,
  label: string,
  extra: Readonly<Record<string, string>> = {},
  danger = false
): Html | null =>
  ctx.canAct
    ? html`<form class="inline" method="post" action="${linkTo(ctx, `/actions/${action}`)}">${csrfField(ctx)}
<input type="hidden" name="target" value="${target}">${Object.entries(extra).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<button type="submit" class="${danger ? "danger" : "act"}" data-action="${action}">${label}</button></form>`
    : null
