import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { PendingAuth } from "../pendingauth/PendingAuth.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** The pending-authorization table; the code verifier crosses it only `Redacted` and no failure carries it. */
export class PendingAuthRepository extends Context.Tag("@connector-store/core/PendingAuthRepository")<PendingAuthRepository, {
  /** Inserts a record; `false` when its state is taken. */
  readonly insert: (record: PendingAuth) => Effect.Effect<boolean, PersistenceError>
  /**
   * Removes and returns the record of `state`, atomically (one of concurrent takes gets it); a row that does not decode fails
   * the take, so its rollback keeps it.
   */
  readonly take: (state: string) => Effect.Effect<Option.Option<PendingAuth>, PersistenceError>
  /** Removes every record that expired strictly before `cutoff`; returns how many. */
  readonly deleteExpiredBefore: (cutoff: Millis) => Effect.Effect<number, PersistenceError>
}>() {}
