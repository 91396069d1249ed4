import { Option, Redacted } from "effect"
import type { Millis } from "../watch/ProjectionWatch.js"

/**
 * The PKCE state of one OAuth authorization between the authorize redirect
 * and its callback, keyed by the OAuth `state`. Single use: consuming it
 * removes it. The code verifier is a secret; it stays `Redacted` everywhere
 * in the store, so printing, logging or tracing a record never shows it.
 */
export interface PendingAuth {
  readonly state: string
  readonly connectorName: string
  readonly ownerDID: string
  readonly codeVerifier: Redacted.Redacted<string>
  readonly redirectUri: string
  readonly scopes: ReadonlyArray<string>
  readonly createdAt: Millis
  /** The last instant the authorization may be completed (inclusive). */
  readonly expiresAt: Millis
}

/** What `createPendingAuth` takes: a record, with `createdAt` defaulting to the store's clock. */
export interface PendingAuthInput extends Omit<PendingAuth, "createdAt"> {
  readonly createdAt?: Millis | undefined
}

/**
 * The verifiers RFC 7636 allows: 43 to 128 characters from
 * `A-Z a-z 0-9 - . _ ~`. Anything else would fail at the token endpoint later.
 */
export const PKCE_VERIFIER_PATTERN = /^[A-Za-z0-9\-._~]{43,128}$/

/** True when `value` is a Redacted string holding an RFC 7636 code verifier. */
export const isRedactedVerifier = (value: unknown): value is Redacted.Redacted<string> => {
  if (!Redacted.isRedacted(value)) return false
  const inner: unknown = Redacted.value(value)
  return typeof inner === "string" && PKCE_VERIFIER_PATTERN.test(inner)
}

/**
 * True once the authorization can no longer be completed at `now`: its
 * expiry is strictly before `now`. A record expiring exactly at `now` is
 * still good, and `deleteExpiredPendingAuth(now)` keeps it, for the same reason.
 */
export const isPendingAuthExpired = (record: Pick<PendingAuth, "expiresAt">, now: Millis): boolean =>
  record.expiresAt < now

/**
 * What a consume hands back: the record it removed, unless that record had
 * expired at `now` (removed all the same, but not to be used).
 */
export const decideConsume = (taken: Option.Option<PendingAuth>, now: Millis): Option.Option<PendingAuth> =>
  Option.filter(taken, (record) => !isPendingAuthExpired(record, now))
