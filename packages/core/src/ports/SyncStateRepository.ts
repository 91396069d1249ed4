import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type {
  ReportedField,
  SyncLeaseStamp,
  SyncStateKey,
  SyncStateRow,
  SyncStateStamp
} from "../syncstate/SyncState.js"

/**
 * The sync-state table, as rows. Adapters implement only this; every
 * decision about what to write is made in core. Each write touches only its
 * own columns and returns `false` (nothing written) when its guard no
 * longer holds. JSON columns keep any JSON value exactly (`-0` included).
 */
export class SyncStateRepository extends Context.Tag("@connector-store/core/SyncStateRepository")<SyncStateRepository, {
  /** Reads a row and locks it until the surrounding transaction ends. */
  readonly lockRead: (key: SyncStateKey) => Effect.Effect<Option.Option<SyncStateRow>, PersistenceError>
  /** Reads a row without locking it. */
  readonly get: (key: SyncStateKey) => Effect.Effect<Option.Option<SyncStateRow>, PersistenceError>
  /** Inserts a new row; `false` when its key is taken (another writer inserted first). */
  readonly insert: (row: SyncStateRow) => Effect.Effect<boolean, PersistenceError>
  /**
   * Writes checkpoint, recovery and version of `next`, and the `reported`
   * fields of it, if the row still has the stamp `expected` (version,
   * incarnation and, when the stamp has one, lease token). Answers the row
   * as written, every column as stored after this statement, or `None`
   * when the guard failed (nothing written).
   */
  readonly updateProgress: (
    next: SyncStateRow,
    expected: SyncStateStamp,
    reported: ReadonlyArray<ReportedField>
  ) => Effect.Effect<Option.Option<SyncStateRow>, PersistenceError>
  /**
   * Writes status, lastSyncedAt, entityCount, error, checkpoint and recovery
   * of `next` if the row still has the stamp `expected` (version, incarnation
   * and, when the stamp has one, lease token).
   */
  readonly updateStatus: (next: SyncStateRow, expected: SyncStateStamp) => Effect.Effect<boolean, PersistenceError>
  /** Writes the lease token and expiry of `next` if the row still has the lease stamp `expected`. */
  readonly updateLease: (next: SyncStateRow, expected: SyncLeaseStamp) => Effect.Effect<boolean, PersistenceError>
  /** Deletes a row; `false` when there was none. */
  readonly delete: (key: SyncStateKey) => Effect.Effect<boolean, PersistenceError>
  /** Every row of one connector, by owner DID. */
  readonly listByConnector: (connectorName: string) => Effect.Effect<ReadonlyArray<SyncStateRow>, PersistenceError>
}>() {}
