import { Effect, Option } from "effect"
import type { ProviderLimitInput, ProviderPauseInput } from "../limits/checks.js"
import type { ProviderLimit, ProviderScope } from "../limits/ProviderLimit.js"
import type { PromiseCall } from "./call.js"

/**
 * The provider limits methods of the Promise API: per-scope pauses and
 * concurrency caps kept in the database, honoured by the claims of every
 * store opened with `providerLimits: true`. A scope is a provider account
 * (`{ connectorName, accountKey }`) or, without `accountKey`, the whole
 * connector.
 */
export interface PromiseLimitMethods {
  /**
   * Caps the scope's live operation leases at `maxInFlight` (null clears the cap); resolves with the scope's
   * limits as they now stand.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  setProviderLimit(limit: ProviderLimitInput): Promise<ProviderLimit>
  /**
   * Pauses the scope until `until` (store clock): no operation of it is leased before then. A pause never
   * shortens a later one already in place.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  pauseProvider(pause: ProviderPauseInput): Promise<ProviderLimit>
  /**
   * Lifts the scope's pause at once (its cap stays); `null` when the scope has no limits.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, CorruptRow
   */
  resumeProvider(scope: ProviderScope): Promise<ProviderLimit | null>
  /**
   * The scope's limits, or `null` when none were ever set.
   *
   * @throws InvalidInput, PersistenceError, CorruptRow
   */
  getProviderLimit(scope: ProviderScope): Promise<ProviderLimit | null>
  /**
   * Every scope's limits, by connector then account (a connector's own row first).
   *
   * @throws PersistenceError
   */
  listProviderLimits(): Promise<ReadonlyArray<ProviderLimit>>
}

/** The provider limits methods over `call`. */
export const promiseLimitMethods = (call: PromiseCall): PromiseLimitMethods => ({
  setProviderLimit: (limit) => call((s) => s.setProviderLimit(limit)),
  pauseProvider: (pause) => call((s) => s.pauseProvider(pause)),
  resumeProvider: (scope) => call((s) => Effect.map(s.resumeProvider(scope), Option.getOrNull)),
  getProviderLimit: (scope) => call((s) => Effect.map(s.getProviderLimit(scope), Option.getOrNull)),
  listProviderLimits: () => call((s) => s.listProviderLimits())
})
