import { Option, Redacted } from "effect"
import type { Millis } from "../watch/ProjectionWatch.js"

/**
 * The PKCE state of one OAuth authorization between the authorize redirect
 * and its callback, keyed by the OAuth `state`: the original store's record,
 * field for field. Single use: consuming it removes it. The code verifier
 * is a secret; it stays `Redacted` everywhere in the store, so printing,
 * logging or tracing a record never shows it.
 */
export interface PendingAuth {
  readonly state: string
  readonly codeVerifier: Redacted.Redacted<string>
  /** The connector (OAuth provider) being authorized. */
  readonly provider: string
  readonly ownerDID: string
  /** Present only when one was stored. */
  readonly ownerWrappableDID?: string
  /** Present only when one was stored. */
  readonly controllerWrappableDID?: string
  readonly createdAt: Millis
  readonly redirectURL: string
  readonly scopes: ReadonlyArray<string>
  /** The last instant the authorization may be completed (inclusive). */
  readonly expiresAt: Millis
}

/**
 * What `createPendingAuth` takes: a record, with `createdAt` defaulting to
 * the store's clock, and the wrappable DIDs absent or `null` for none.
 */
export interface PendingAuthInput extends Omit<PendingAuth, "createdAt" | "ownerWrappableDID" | "controllerWrappableDID"> {
  readonly createdAt?: Millis | undefined
  readonly ownerWrappableDID?: string | null | undefined
  readonly controllerWrappableDID?: string | null | undefined
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
