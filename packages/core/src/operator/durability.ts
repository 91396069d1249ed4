import type { FailoverDoubt } from "../operation/failover.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** Which server (or file) answered: what the store compares with what it recorded to notice a failover or a restore. */
export interface ServerIdentity {
  /** Postgres's `system_identifier` (`pg_control_system()`); null on SQLite or where the server does not say. */
  readonly systemIdentifier: string | null
  /** Postgres's current timeline: a promoted replica, and a point-in-time restore, start a higher one. */
  readonly timeline: number | null
  /** SQLite's generation: a count the store raises as it writes, kept in the file and beside it (see docs/operations.md). */
  readonly generation: number | null
}

/** A standby the primary streams to, as `pg_stat_replication` shows it. */
export interface StandbyReport {
  /** Its `application_name`. */
  readonly name: string
  /** `streaming`, `catchup`, `startup`, … */
  readonly state: string
  /** `sync`, `quorum`, `potential` or `async`. */
  readonly syncState: string
  /** How far its replay is behind, as the primary last measured it (ms); null when unknown. */
  readonly replayLagMs: number | null
}

/** How the Postgres server the store writes to replicates, read at open (and again for each status). */
export interface ReplicationReport {
  /** The store's sessions' `synchronous_commit`. */
  readonly synchronousCommit: string
  /** The server's `synchronous_standby_names` ("" when none). */
  readonly synchronousStandbyNames: string
  /** The standbys streaming from it now (an empty list where the role may not see them, or none are). */
  readonly standbys: ReadonlyArray<StandbyReport>
}

/** A failover (or restore) the store noticed, and the window of doubt it opened. */
export interface NoticedFailover extends FailoverDoubt {
  /** What the store had recorded before: the server that acknowledged the writes that may be lost. */
  readonly from: ServerIdentity
  /** What answered instead. */
  readonly to: ServerIdentity
  /** Claims handed out in doubt because of it (re-sent with their `reissue`, or parked `reconcile_only`), over every process. */
  readonly doubtfulClaims: number
  /** Who ended the window early, and when; null while it runs its course. */
  readonly ended: FailoverDoubtEnded | null
}

/** An operator's early end of a failover's window of doubt, on record. */
export interface FailoverDoubtEnded {
  /** Who ended it, as given to `endFailoverDoubt`. */
  readonly by: string
  /** When, on the store's clock. */
  readonly at: Millis
}

/**
 * What the deployment guarantees an acknowledged write-back across a failover or restore, and what the store noticed:
 *
 * - `canLoseAcknowledgedWrites`: `false` on Postgres with synchronous replication configured for the store's sessions,
 *   `true` where a standby is asynchronous or none is synchronous (a failover to it may forget the newest commits), and
 *   on SQLite (a restored backup forgets); `null` where the store cannot tell (the memory adapter, a server that hides it).
 * - `failover`: the last failover or restore noticed, while its window runs or its lookback still applies; null when none.
 */
export interface StoreDurability {
  /** Which kind of database the store writes to. */
  readonly backend: "postgres" | "sqlite" | "memory"
  /** Whether a failover or restore can lose a write the store acknowledged (see above); null when it cannot tell. */
  readonly canLoseAcknowledgedWrites: boolean | null
  /** Why, in a sentence an operator can act on. */
  readonly explanation: string
  /** What answers now, as the store last checked it; null where the store does not track it. */
  readonly server: ServerIdentity | null
  /** Postgres's replication settings; null elsewhere. */
  readonly replication: ReplicationReport | null
  /** The last failover or restore noticed, with its window; null when none was. */
  readonly failover: NoticedFailover | null
  /** Whether a failover would be noticed: false where the server hides its identity (or a SQLite store keeps no generation file). */
  readonly detecting: boolean
}

/** The report of a store whose adapter keeps no server history. */
export const unknownDurability = (backend: StoreDurability["backend"]): StoreDurability => ({
  backend,
  canLoseAcknowledgedWrites: null,
  explanation: backend === "memory"
    ? "the memory adapter keeps nothing across a restart"
    : "this store's adapter does not record which server it writes to",
  server: null,
  replication: null,
  failover: null,
  detecting: false
})
