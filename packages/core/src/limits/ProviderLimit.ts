import { Context, Layer } from "effect"
import { compareCodePoints } from "../operation/retention.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** Where a provider limit applies: one account (`connectorName` and `accountKey`) or, without `accountKey`, the whole connector. */
export interface ProviderScope {
  /** The connector (provider integration), e.g. `gcal`. */
  readonly connectorName: string
  /** The provider account within the connector; absent for the whole connector. */
  readonly accountKey?: string | undefined
}

/** The limits of one scope shared by every runner on the database: a concurrency cap and a pause. */
export interface ProviderLimit {
  /** The scope the limits apply to. */
  readonly scope: ProviderScope
  /** At most this many live operation leases in the scope at once; null for no cap. */
  readonly maxInFlight: number | null
  /** No operation of the scope is leased before this time (store clock, epoch ms); null when not paused. */
  readonly pausedUntil: Millis | null
  /** The HTTP status that paused the scope (e.g. 429), when one did. */
  readonly pauseStatus: number | null
  /** The row's optimistic-concurrency version, bumped by every write. */
  readonly version: number
  /** When the row was last written, on the store's clock. */
  readonly updatedAt: Millis
}

/** Why a claim did not lease: its scope is paused, or holds as many live leases as its cap allows. */
export type LimitReason = "paused" | "at-capacity"

/** Which scope kept a claim from leasing, and why (the `limitedBy` of a `scheduled` claim). */
export interface LimitedBy {
  /** The scope whose limit applied. */
  readonly scope: ProviderScope
  /** `paused` (until its pause ends) or `at-capacity` (until a live lease of it ends). */
  readonly reason: LimitReason
}

/** The live operation leases of one scope at a time: how many, and the earliest to end. */
export interface ScopeLoad {
  /** Attempted operations of the scope whose lease is live (expiry after now). */
  readonly live: number
  /** The earliest expiry among them; null when there is none. */
  readonly earliestExpiry: Millis | null
}

/** The scope of `connectorName` and, when given, `accountKey` (absent means the whole connector). */
export const providerScope = (connectorName: string, accountKey?: string | undefined): ProviderScope =>
  accountKey === undefined ? { connectorName } : { connectorName, accountKey }

/** The scopes an operation of this account falls under: the account's, then the connector's. */
export const scopesOfAccount = (connectorName: string, accountKey: string): readonly [ProviderScope, ProviderScope] => [
  { connectorName, accountKey },
  { connectorName }
]

/** The account key a scope is stored under: `''` for the whole connector (an account key is never empty). */
export const storedAccountKey = (scope: ProviderScope): string => scope.accountKey ?? ""

/** The scope of a stored (connector, account key) pair. */
export const scopeOfStored = (connectorName: string, accountKey: string): ProviderScope =>
  accountKey === "" ? { connectorName } : { connectorName, accountKey }

/** An unambiguous map key for a scope. */
export const scopeKey = (scope: ProviderScope): string => JSON.stringify([scope.connectorName, storedAccountKey(scope)])

/** The key order of scopes (connector, then stored account key, in code-point order), as the SQL adapters lock them. */
export const compareScopes = (a: ProviderScope, b: ProviderScope): number =>
  compareCodePoints(a.connectorName, b.connectorName) || compareCodePoints(storedAccountKey(a), storedAccountKey(b))

/** A readable label of a scope, for errors and logs. */
export const formatProviderScope = (scope: ProviderScope): string =>
  scope.accountKey === undefined ? scope.connectorName : `${scope.connectorName}/${scope.accountKey}`

/** Whether `claimOperation` honours provider limits (off by default); every runner of a fleet should share the setting. */
export class ProviderLimitEnforcement extends Context.Reference<ProviderLimitEnforcement>()(
  "@connector-store/core/ProviderLimitEnforcement",
  { defaultValue: (): { readonly enforce: boolean } => ({ enforce: false }) }
) {
  /** Enforcement on (`true`) or off, for providing to a store layer. */
  static readonly layer = (enforce: boolean): Layer.Layer<ProviderLimitEnforcement> =>
    Layer.succeed(ProviderLimitEnforcement, { enforce })
}
