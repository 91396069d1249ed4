import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { ProviderLimit, ProviderScope, ScopeLoad } from "../limits/ProviderLimit.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** The provider limits table and the live-lease counts caps are checked against; `lock*` reads lock their rows. */
export class ProviderLimitRepository extends Context.Tag("@connector-store/core/ProviderLimitRepository")<ProviderLimitRepository, {
  /** The limits of the scopes an operation of this account falls under (its account's, its connector's): at most two rows. */
  readonly forAccount: (connectorName: string, accountKey: string) => Effect.Effect<ReadonlyArray<ProviderLimit>, PersistenceError>
  /** `forAccount`, the rows locked, in key order (the connector's row first). */
  readonly lockForAccount: (
    connectorName: string,
    accountKey: string
  ) => Effect.Effect<ReadonlyArray<ProviderLimit>, PersistenceError>
  readonly get: (scope: ProviderScope) => Effect.Effect<Option.Option<ProviderLimit>, PersistenceError>
  readonly lockRead: (scope: ProviderScope) => Effect.Effect<Option.Option<ProviderLimit>, PersistenceError>
  /** Every row, by connector then account key in byte order (a connector's own row first). */
  readonly list: () => Effect.Effect<ReadonlyArray<ProviderLimit>, PersistenceError>
  /** Inserts a new row; `false` when its scope has one already (another writer inserted first). */
  readonly insert: (row: ProviderLimit) => Effect.Effect<boolean, PersistenceError>
  /** Writes `next` over `previous` only if the stored version is still `previous.version`; `false` when the race was lost. */
  readonly update: (previous: ProviderLimit, next: ProviderLimit) => Effect.Effect<boolean, PersistenceError>
  /** The rows that can limit a claim at `now` (a pause in force, or a cap), unlocked, in key order. */
  readonly listActive: (now: Millis) => Effect.Effect<ReadonlyArray<ProviderLimit>, PersistenceError>
  /** The rows of `scopes` (those that have one), locked, in key order. */
  readonly lockScopes: (scopes: ReadonlyArray<ProviderScope>) => Effect.Effect<ReadonlyArray<ProviderLimit>, PersistenceError>
  /** For each of `scopes`, in order, the attempted operations under it whose lease is live at `now`: how many, and the earliest expiry. */
  readonly liveLeases: (scopes: ReadonlyArray<ProviderScope>, now: Millis) => Effect.Effect<ReadonlyArray<ScopeLoad>, PersistenceError>
}>() {}
