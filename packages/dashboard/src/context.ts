import type { DashboardAccess, DashboardStore } from "./options.js"

/** One request as the pages see it: where it is, who asks, and what they may do. */
export interface PageContext {
  readonly store: DashboardStore
  readonly url: URL
  /** The mount point, without a trailing slash (`""` at the root). */
  readonly base: string
  readonly access: Exclude<DashboardAccess, "forbidden">
  /** True when this request may act: actions are on and it is an admin's. */
  readonly canAct: boolean
  /** This browser's CSRF token, echoed by every form. */
  readonly csrf: string
  readonly now: number
  readonly refreshMs: number
  readonly maxBulkRows: number
}

/** A link inside the dashboard: `path` under the mount point, with the non-empty `params` as its query. */
export const linkTo = (ctx: PageContext, path: string, params: Readonly<Record<string, string | number | undefined | null>> = {}): string => {
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value))
  }
  const text = query.toString()
  return `${ctx.base}${path}${text === "" ? "" : `?${text}`}`
}

/** A query parameter, or undefined when absent or empty. */
export const param = (ctx: PageContext, name: string): string | undefined => {
  const value = ctx.url.searchParams.get(name)
  return value === null || value === "" ? undefined : value
}
