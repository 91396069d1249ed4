import type { Millis } from "../watch/ProjectionWatch.js"
import { isPaused, roomUnder } from "./decisions.js"
import { type ProviderLimit, type ProviderScope, type ScopeLoad, scopeKey, scopesOfAccount } from "./ProviderLimit.js"

/** The scopes a batch claim keeps out of its read of due rows: those paused at `now` and those whose cap is full. */
export const scopesPassedOver = (
  limits: ReadonlyArray<ProviderLimit>,
  loadOf: (limit: ProviderLimit) => ScopeLoad | undefined,
  now: Millis
): ReadonlyArray<ProviderScope> =>
  limits.filter((limit) =>
    isPaused(limit, now) || (limit.maxInFlight !== null && roomUnder(limit.maxInFlight, loadOf(limit)?.live ?? 0) === 0)
  ).map((limit) => limit.scope)

/** An operation's place in a batch: its account (the scopes it falls under follow). */
export interface BatchCandidate {
  /** The operation's connector. */
  readonly connectorName: string
  /** The operation's provider account. */
  readonly accountKey: string
}

/**
 * Which of a batch's would-be leases their scopes admit, in order (none paused, each cap with `room` left, one place taken
 * each), and the room left.
 */
export const admitUnderLimits = <C extends BatchCandidate>(
  candidates: ReadonlyArray<C>,
  limits: ReadonlyMap<string, ProviderLimit>,
  room: ReadonlyMap<string, number>,
  now: Millis
): { readonly admitted: ReadonlyArray<C>; readonly room: ReadonlyMap<string, number> } => {
  const left = new Map(room)
  const admitted: Array<C> = []
  for (const candidate of candidates) {
    const keys = scopesOfAccount(candidate.connectorName, candidate.accountKey).map(scopeKey)
    const blocked = keys.some((key) => {
      const limit = limits.get(key)
      return limit !== undefined && (isPaused(limit, now) || (limit.maxInFlight !== null && (left.get(key) ?? 0) <= 0))
    })
    if (blocked) continue
    for (const key of keys) {
      if (limits.get(key)?.maxInFlight != null) left.set(key, (left.get(key) ?? 0) - 1)
    }
    admitted.push(candidate)
  }
  return { admitted, room: left }
}
