import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { PendingAuth } from "../pendingauth/PendingAuth.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/**
 * The pending-authorization table, as records. The code verifier crosses
 * this port only `Redacted`; an adapter's failures never carry it (a driver
 * error that quotes the failing row is scrubbed before it is wrapped).
 */
export class PendingAuthRepository extends Context.Tag("@connector-store/core/PendingAuthRepository")<PendingAuthRepository, {
  /** Inserts a record; `false` when its state is taken. */
  readonly insert: (record: PendingAuth) => Effect.Effect<boolean, PersistenceError>
  /**
   * Removes the record of `state` and returns it, atomically: of any number
   * of concurrent takes of one state, exactly one gets the record. Decodes
   * what it removed before it succeeds: a row that is not a record fails
   * the take (a `PersistenceError` naming the column, never its value), so
   * the caller's transaction rolls back and the row stays.
   */
  readonly take: (state: string) => Effect.Effect<Option.Option<PendingAuth>, PersistenceError>
  /** Removes every record that expired strictly before `cutoff`; returns how many. */
  readonly deleteExpiredBefore: (cutoff: Millis) => Effect.Effect<number, PersistenceError>
}>() {}
