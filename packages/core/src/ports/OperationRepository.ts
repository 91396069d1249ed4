import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../errors.js"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import type { DueOperationPosition } from "../operation/due.js"
import type { TrackedQuery } from "../operation/reads.js"
import type { CollectParams } from "../operation/retention.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ResumeScope } from "../watch/transitions.js"
import type { DueRead, FairDueRead } from "./DueRead.js"
import type { FairPosition } from "../due/fair.js"
import type { ProviderScope } from "../limits/ProviderLimit.js"

/** The watch write that goes with an operation's (`updateWithWatch`), guarded as the watch port's own writes are. */
export type WatchWrite =
  | { readonly kind: "insert"; readonly row: ProjectionWatch }
  | { readonly kind: "update"; readonly previous: ProjectionWatch; readonly next: ProjectionWatch }
  | { readonly kind: "delete"; readonly identity: WatchIdentity; readonly version: number }

/** What `updateWithWatch` did: both writes landed, or which guard lost (after a lost watch write, the caller rolls back). */
export type PairedWrite = "written" | "operation-lost" | "watch-lost"

/** The operation table, as rows; `lock*` reads lock their rows until the transaction ends. */
export class OperationRepository extends Context.Tag("@connector-store/core/OperationRepository")<OperationRepository, {
  readonly lockRead: (key: OperationKey) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /**
   * `lockRead`, then the lock of the document slot the operation commits into (see `WatchRepository.lockDocument`), the row
   * always before the slot; no slot without a row.
   */
  readonly lockReadWithSlot: (
    key: OperationKey,
    documentID: string
  ) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  readonly get: (key: OperationKey) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /** The operation with this public node key, whoever may see it. */
  readonly getByNodeKey: (nodeKey: string) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /** Inserts a new row; `false` when its key or node key is taken (in a transaction, after waiting for a concurrent insert of it). */
  readonly insert: (row: ConnectorOperation) => Effect.Effect<boolean, PersistenceError>
  /** Writes `next` only at `previous.version` (`false`: the race was lost); only the differing columns need writing. */
  readonly update: (previous: ConnectorOperation, next: ConnectorOperation) => Effect.Effect<boolean, PersistenceError>
  /** `update(previous, next)` and, when it landed, `watch`'s guarded write, in one statement where it can; which guard lost. */
  readonly updateWithWatch: (
    previous: ConnectorOperation,
    next: ConnectorOperation,
    watch: WatchWrite
  ) => Effect.Effect<PairedWrite, PersistenceError>
  /**
   * The `sent` branch of `decideMarkSent` as one guarded write, answering the row written; none (nothing written) when the
   * guard fails and the caller decides from a read.
   */
  readonly markSent: (
    key: OperationKey,
    token: string,
    maxAttempts: number,
    now: Millis
  ) => Effect.Effect<Option.Option<ConnectorOperation>, PersistenceError>
  /** Attempted operations whose re-drive is due at `now` (next unset or not later). */
  readonly listDue: (now: Millis) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
  /** One page of the operations due at `now` (`dueOperationsPage` is the reference), reading an index range of `limit` rows. */
  readonly listDuePage: (
    now: Millis,
    after: DueOperationPosition | undefined,
    limit: number
  ) => Effect.Effect<DueRead<ConnectorOperation, DueOperationPosition>, PersistenceError>
  /**
   * One page of the due operations a batch claims at `now`, fair between owners (`fairPage` over `fairOperationTable` is the
   * reference), locked with rows locked elsewhere passed over (`SKIP LOCKED`) and rows under `excluding`'s scopes left out;
   * only inside a transaction.
   */
  readonly lockDuePage: (
    now: Millis,
    at: FairPosition<DueOperationPosition>,
    limit: number,
    excluding?: ReadonlyArray<ProviderScope>
  ) => Effect.Effect<FairDueRead<ConnectorOperation, DueOperationPosition>, PersistenceError>
  /** `update` of each pair in as few statements as the adapter can; whether each landed, in order. */
  readonly updateAll: (
    changes: ReadonlyArray<readonly [previous: ConnectorOperation, next: ConnectorOperation]>
  ) => Effect.Effect<ReadonlyArray<boolean>, PersistenceError>
  /** Locks and returns the attempted operations deferred within `scope`. */
  readonly lockDeferred: (scope: ResumeScope) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
  /** Deletes what `collectableOperations` allows (at most `limit`, oldest first) over the rows it decided on; how many went. */
  readonly collectFinished: (params: CollectParams, now: Millis) => Effect.Effect<number, PersistenceError>
  /** One page of a `TrackedQuery` (`trackedPage` is the reference), any number of document ids. */
  readonly listTracked: (query: TrackedQuery) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
  /** Every operation linked to one of `documentIDs` (at most `DOCUMENT_CHUNK` ids per call). */
  readonly listByDocuments: (
    documentIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<ConnectorOperation>, PersistenceError>
}>() {}
