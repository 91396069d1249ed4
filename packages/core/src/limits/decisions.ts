import type { Millis } from "../watch/ProjectionWatch.js"
import { bump } from "../versioned.js"
import type { LimitedBy, ProviderLimit, ProviderScope, ScopeLoad } from "./ProviderLimit.js"

/** True while `limit` pauses its scope: a pause until `t` holds strictly before `t`. */
export const isPaused = (limit: ProviderLimit, now: Millis): boolean => limit.pausedUntil !== null && limit.pausedUntil > now

/** How many more leases a scope admits with `live` leases live: unbounded without a cap, never below zero. */
export const roomUnder = (maxInFlight: number | null, live: number): number =>
  maxInFlight === null ? Number.POSITIVE_INFINITY : Math.max(0, maxInFlight - live)

/** True when `limit` can keep a claim from leasing at `now`: a pause in force, or a cap. */
export const limitsClaims = (limit: ProviderLimit, now: Millis): boolean => isPaused(limit, now) || limit.maxInFlight !== null

/** A scope's row before any limit was set: no cap, no pause, version 0. */
export const blankProviderLimit = (scope: ProviderScope, now: Millis): ProviderLimit => ({
  scope,
  maxInFlight: null,
  pausedUntil: null,
  pauseStatus: null,
  version: 0,
  updatedAt: now
})

/** What a limit write decided: the row as it stands afterwards, and the write (`insert` or `update`), if any. */
export interface LimitDecision {
  /** The scope's limits after the call. */
  readonly limit: ProviderLimit
  /** The write, when the row changes. */
  readonly write: { readonly kind: "insert" | "update"; readonly next: ProviderLimit } | undefined
}

const written = (row: ProviderLimit | undefined, scope: ProviderScope, patch: Partial<ProviderLimit>, now: Millis): LimitDecision => {
  const next = row === undefined ? { ...blankProviderLimit(scope, now), ...patch } : bump(row, now, patch)
  return { limit: next, write: { kind: row === undefined ? "insert" : "update", next } }
}

/** Sets or (with null) clears the scope's cap; the row is created when there is none. */
export const decideSetLimit = (
  row: ProviderLimit | undefined,
  scope: ProviderScope,
  maxInFlight: number | null,
  now: Millis
): LimitDecision =>
  row !== undefined && row.maxInFlight === maxInFlight ? { limit: row, write: undefined } : written(row, scope, { maxInFlight }, now)

/** A pause asked for: until when, and the HTTP status behind it. */
export interface PauseRequest {
  /** No operation of the scope is leased before this time. */
  readonly until: Millis
  /** The status that caused it (e.g. 429), if any. */
  readonly status?: number | null | undefined
}

/** Combines a pause with the scope's current one: the later end wins with its status, so a pause never shortens another. */
export const decidePause = (
  row: ProviderLimit | undefined,
  scope: ProviderScope,
  pause: PauseRequest,
  now: Millis
): LimitDecision =>
  row !== undefined && row.pausedUntil !== null && row.pausedUntil >= pause.until
    ? { limit: row, write: undefined }
    : written(row, scope, { pausedUntil: pause.until, pauseStatus: pause.status ?? null }, now)

/** Lifts the scope's pause, whatever its end; the cap stays. Nothing to write without a pause. */
export const decideResume = (row: ProviderLimit | undefined, scope: ProviderScope, now: Millis): LimitDecision | undefined =>
  row === undefined
    ? undefined
    : row.pausedUntil === null
    ? { limit: row, write: undefined }
    : written(row, scope, { pausedUntil: null, pauseStatus: null }, now)

/** A limit that keeps a claim from leasing: which scope, why, and until when it may lease at the earliest. */
export interface ClaimLimit extends LimitedBy {
  /** The pause's end, or for a cap the earliest end of a live lease in the scope. */
  readonly until: Millis
}

/** The limit that keeps a claim from leasing at `now`: a pause in force first, then a full cap; `undefined` for none. */
export const decideClaimLimit = (
  limits: ReadonlyArray<ProviderLimit>,
  loadOf: (limit: ProviderLimit) => ScopeLoad | undefined,
  now: Millis
): ClaimLimit | undefined => {
  let paused: ClaimLimit | undefined
  for (const limit of limits) {
    if (isPaused(limit, now) && (paused === undefined || limit.pausedUntil! > paused.until)) {
      paused = { scope: limit.scope, reason: "paused", until: limit.pausedUntil! }
    }
  }
  if (paused !== undefined) return paused
  let full: ClaimLimit | undefined
  for (const limit of limits) {
    if (limit.maxInFlight === null) continue
    const load = loadOf(limit)
    if (load === undefined || roomUnder(limit.maxInFlight, load.live) > 0) continue
    const until = load.earliestExpiry ?? now
    if (full === undefined || until > full.until) full = { scope: limit.scope, reason: "at-capacity", until }
  }
  return full
}
