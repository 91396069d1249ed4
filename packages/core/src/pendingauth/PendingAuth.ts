import { Option, Redacted } from "effect"
import type { Millis } from "../watch/ProjectionWatch.js"

/**
 * The PKCE state of one OAuth authorization until its callback, keyed by its `state`: single use, its code verifier `Redacted`
 * everywhere in the store.
 */
export interface PendingAuth {
  /** The OAuth `state` parameter of the authorize redirect: the record's key, unique among pending authorizations. */
  readonly state: string
  /** The PKCE code verifier (RFC 7636, 43 to 128 characters), kept `Redacted`; sent to the token endpoint at the callback. */
  readonly codeVerifier: Redacted.Redacted<string>
  /** The connector (OAuth provider) being authorized. */
  readonly provider: string
  /** The DID of the owner the authorization is for. */
  readonly ownerDID: string
  /** Present only when one was stored. */
  readonly ownerWrappableDID?: string
  /** Present only when one was stored. */
  readonly controllerWrappableDID?: string
  /** When the authorization was started (ms since the epoch); the caller's value or the store's clock. */
  readonly createdAt: Millis
  /** The redirect URL the authorize request named, which the token request must repeat. */
  readonly redirectURL: string
  /** The OAuth scopes requested. */
  readonly scopes: ReadonlyArray<string>
  /** The last instant the authorization may be completed (inclusive). */
  readonly expiresAt: Millis
}

/** What `createPendingAuth` takes: a record whose `createdAt` defaults to the store's clock and whose wrappable DIDs may be `null`. */
export interface PendingAuthInput extends Omit<PendingAuth, "createdAt" | "ownerWrappableDID" | "controllerWrappableDID"> {
  /** When the authorization was started (ms since the epoch); omitted: the store's clock at creation. */
  readonly createdAt?: Millis | undefined
  /** The owner's wrappable DID, if any; omitted or `null` stores none. */
  readonly ownerWrappableDID?: string | null | undefined
  /** The controller's wrappable DID, if any; omitted or `null` stores none. */
  readonly controllerWrappableDID?: string | null | undefined
}

/** The code verifiers RFC 7636 allows: 43 to 128 characters of `A-Z a-z 0-9 - . _ ~`. */
export const PKCE_VERIFIER_PATTERN = /^[A-Za-z0-9\-._~]{43,128}$/

/** True when `value` is a Redacted string holding an RFC 7636 code verifier. */
export const isRedactedVerifier = (value: unknown): value is Redacted.Redacted<string> => {
  if (!Redacted.isRedacted(value)) return false
  const inner: unknown = Redacted.value(value)
  return typeof inner === "string" && PKCE_VERIFIER_PATTERN.test(inner)
}

/** True once the authorization expired strictly before `now` (one expiring at `now` is still good). */
export const isPendingAuthExpired = (record: Pick<PendingAuth, "expiresAt">, now: Millis): boolean =>
  record.expiresAt < now

/** What a consume hands back: the record it removed, unless it had expired at `now`. */
export const decideConsume = (taken: Option.Option<PendingAuth>, now: Millis): Option.Option<PendingAuth> =>
  Option.filter(taken, (record) => !isPendingAuthExpired(record, now))
