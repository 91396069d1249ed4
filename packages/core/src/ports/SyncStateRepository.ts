import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type {
  ReportedField,
  SyncLeaseStamp,
  SyncStateKey,
  SyncStateRow,
  SyncStateStamp
} from "../syncstate/SyncState.js"

/** The sync-state table, as rows; each write touches only its own columns and answers `false` (nothing written) once its guard fails. */
export class SyncStateRepository extends Context.Tag("@connector-store/core/SyncStateRepository")<SyncStateRepository, {
  /** Reads a row and locks it until the surrounding transaction ends. */
  readonly lockRead: (key: SyncStateKey) => Effect.Effect<Option.Option<SyncStateRow>, PersistenceError>
  /** Reads a row without locking it. */
  readonly get: (key: SyncStateKey) => Effect.Effect<Option.Option<SyncStateRow>, PersistenceError>
  /** Inserts a new row; `false` when its key is taken (another writer inserted first). */
  readonly insert: (row: SyncStateRow) => Effect.Effect<boolean, PersistenceError>
  /** Writes `next`'s progress fields while the row has the stamp `expected`; answers the row as stored after, or `None`. */
  readonly updateProgress: (
    next: SyncStateRow,
    expected: SyncStateStamp,
    reported: ReadonlyArray<ReportedField>
  ) => Effect.Effect<Option.Option<SyncStateRow>, PersistenceError>
  /** Writes `next`'s report (status, lastSyncedAt, entityCount, error, checkpoint, recovery) while the row has the stamp `expected`. */
  readonly updateStatus: (next: SyncStateRow, expected: SyncStateStamp) => Effect.Effect<boolean, PersistenceError>
  /** Writes the lease token and expiry of `next` if the row still has the lease stamp `expected`. */
  readonly updateLease: (next: SyncStateRow, expected: SyncLeaseStamp) => Effect.Effect<boolean, PersistenceError>
  /** Deletes a row; `false` when there was none. */
  readonly delete: (key: SyncStateKey) => Effect.Effect<boolean, PersistenceError>
  /** Every row of one connector, by owner DID. */
  readonly listByConnector: (connectorName: string) => Effect.Effect<ReadonlyArray<SyncStateRow>, PersistenceError>
}>() {}
