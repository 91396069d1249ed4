/**
 * connector-store's Promise API for any app: a store on SQLite or Postgres
 * (`openConnectorStore`) or in memory (`openMemoryConnectorStore`), the
 * store's error classes, and the types of every input and result.
 *
 * The package brings its own Effect 3 line (`effect` and `@effect/*` are
 * its regular dependencies): in an app on Effect 4, or on none, npm nests
 * them under this package and the app's own `effect` stays as it is; in an
 * app on Effect 3.22 npm shares the app's copy. Nothing here asks the app
 * for Effect: every method returns a Promise, and every rejection of a
 * store method is a {@link StoreError}, an `Error` whose `_tag` names the
 * failure and whose `method` names the call, so
 * `error._tag === "IdempotencyConflict"` works from any app.
 *
 * @module @connector-store/promise
 */
import {
  ConcurrentUpdateExhausted,
  CorruptRow,
  DeletionLimitExceeded,
  IdempotencyConflict,
  InvalidClockReading,
  InvalidInput,
  OperatorActionRefused,
  OperatorTargetNotFound,
  PendingAuthStateTaken,
  PersistenceError,
  ReentrantCall,
  RelistRunNotComplete,
  RelistRunNotFound,
  ReservedArmReason,
  StoreClosed,
  SweepApplyFailed,
  SweepCandidateNotFound,
  SweepCandidateWithdrawn,
  SweepOutcomeNotAllowed,
  SyncLeaseLost,
  SyncProgressExhausted,
  SyncProgressRecomputeFailed,
  WinnerReaderMissing,
  WinnerReadFailed
} from "@connector-store/core"
import { ReplicationNotSynchronous, StoreSchemaNotReady, StoreSchemaTooNew } from "@connector-store/sql-adapter"

export type * from "@connector-store/core"
export {
  ConcurrentUpdateExhausted,
  CorruptRow,
  DeletionLimitExceeded,
  IdempotencyConflict,
  InvalidClockReading,
  InvalidInput,
  OperatorActionRefused,
  OperatorTargetNotFound,
  PendingAuthStateTaken,
  PersistenceError,
  ReentrantCall,
  RelistRunNotComplete,
  ReplicationNotSynchronous,
  RelistRunNotFound,
  ReservedArmReason,
  StoreClosed,
  StoreSchemaNotReady,
  StoreSchemaTooNew,
  SweepApplyFailed,
  SweepCandidateNotFound,
  SweepCandidateWithdrawn,
  SweepOutcomeNotAllowed,
  SyncLeaseLost,
  SyncProgressExhausted,
  SyncProgressRecomputeFailed,
  WinnerReaderMissing,
  WinnerReadFailed
}
export { MAX_ID_BYTES, MAX_JSON_DEPTH, MAX_TEXT_BYTES, PERSISTENCE_REASONS } from "@connector-store/core"
export {
  type MemoryConnectorStore,
  type MemoryStoreOptions,
  type MemoryTransaction,
  openMemoryConnectorStore
} from "@connector-store/memory-adapter"
export {
  type OpenConnectorStoreOptions,
  openConnectorStore,
  type SqlConnection,
  type SqlConnectorStore,
  type SqlTransaction
} from "@connector-store/sql-adapter"

/** The store's error classes, each under its `_tag`. */
export const STORE_ERRORS = {
  ConcurrentUpdateExhausted,
  CorruptRow,
  DeletionLimitExceeded,
  IdempotencyConflict,
  InvalidClockReading,
  InvalidInput,
  OperatorActionRefused,
  OperatorTargetNotFound,
  PendingAuthStateTaken,
  PersistenceError,
  ReentrantCall,
  RelistRunNotComplete,
  ReplicationNotSynchronous,
  RelistRunNotFound,
  ReservedArmReason,
  StoreClosed,
  StoreSchemaNotReady,
  StoreSchemaTooNew,
  SweepApplyFailed,
  SweepCandidateNotFound,
  SweepCandidateWithdrawn,
  SweepOutcomeNotAllowed,
  SyncLeaseLost,
  SyncProgressExhausted,
  SyncProgressRecomputeFailed,
  WinnerReaderMissing,
  WinnerReadFailed
} as const

/** The `_tag` of a store error: `"InvalidInput"`, `"IdempotencyConflict"`, … */
export type StoreErrorTag = keyof typeof STORE_ERRORS

/**
 * Any error a store method rejects with, told apart by `_tag` (a union, so
 * `switch (error._tag)` narrows to the class with its fields).
 */
export type StoreError = InstanceType<(typeof STORE_ERRORS)[StoreErrorTag]>

/** Every `_tag` of {@link StoreError}. */
export const STORE_ERROR_TAGS: ReadonlyArray<StoreErrorTag> = Object.keys(STORE_ERRORS) as Array<StoreErrorTag>

/**
 * Whether `value` is one of the store's errors: an instance of one of the
 * classes above (which are the ones the store itself throws, whatever
 * Effect the app runs). For an app that turns a rejection into a typed
 * failure of its own, e.g. Effect 4's
 * `Effect.tryPromise({ try, catch: (e) => isStoreError(e) ? e : … })`.
 */
export const isStoreError = (value: unknown): value is StoreError =>
  typeof value === "object" && value !== null && Object.hasOwn(STORE_ERRORS, (value as { _tag?: unknown })._tag as PropertyKey) &&
  value instanceof STORE_ERRORS[(value as { _tag: StoreErrorTag })._tag]
