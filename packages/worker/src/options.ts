import type { ConnectorOperation, PromiseConnectorStore, ProjectionWatch } from "@connector-store/promise"
import type { Connector } from "./connector.js"
import type { HandlerFault } from "./handler.js"

/** Why a drive lost its lease: the store refused the renewal (taken over, or ended), or the lease ran out unrenewed. */
export type LeaseLoss = "renewal-refused" | "expired"

/** The store calls a worker makes: any store `openConnectorStore` or `openMemoryConnectorStore` opens. */
export type WorkerStore =
  & Pick<
    PromiseConnectorStore<unknown>,
    | "awaitWork"
    | "claimDueOperations"
    | "markOperationSent"
    | "renewOperationLease"
    | "recordAttemptFailure"
    | "finalizeOperationAndArmWatch"
    | "finalizeDeleteOperation"
    | "claimDueWatches"
    | "recordVerification"
    | "deferWatch"
  >
  & {
    /** The store's clock: leases and due times are on it. */
    now(): number
  }

/** The options of `startWorker`. */
export interface WorkerOptions {
  /** The connectors this worker drives, by `connectorName`: every connector whose operations the store holds. */
  readonly connectors: Readonly<Record<string, Connector>>
  /** How many operations (and verifications) run at once; 1 by default. */
  readonly concurrency?: number | undefined
  /**
   * How many due operations one claim leases (1 to 1,000); they wait in the worker for a free slot, a claim whose lease is
   * half gone renewed before it is driven. The larger of 20 and twice `concurrency` by default.
   */
  readonly batchSize?: number | undefined
  /** Each claim's lease, renewed every third of it while a send runs; the store's policy's by default. */
  readonly leaseMs?: number | undefined
  /** How long a `send` may take before it is aborted and recorded `unknown` (in doubt); 120 s by default. */
  readonly sendTimeoutMs?: number | undefined
  /** How long a `lookup`, `verify`, `repair` or `classify` may take; 30 s by default. */
  readonly handlerTimeoutMs?: number | undefined
  /** How long an aborted handler has to settle before the worker goes on without it; 1 s by default. */
  readonly abortGraceMs?: number | undefined
  /** The due sweep's period: how long a wait for a wake-up lasts at most; 1 s by default. */
  readonly pollMs?: number | undefined
  /** When a committed write's watch is due for verification, after the commit; 30 s by default. */
  readonly verifyAfterMs?: number | undefined
  /** When a verification that got no answer (offline) is tried again; 30 s by default. */
  readonly verifyRetryMs?: number | undefined
  /** Verification attempts after which a still-mismatching generation is given up; 5 by default. */
  readonly verifyMaxAttempts?: number | undefined
  /** Whether the worker claims due watches (when some connector has `verify`); true by default. */
  readonly verification?: boolean | undefined
  /** How long `stop()` lets what is in flight finish before it aborts it; 10 s by default. */
  readonly graceMs?: number | undefined
  /** Signals on which the process stops the worker as `stop()` does (e.g. `["SIGTERM"]`); none by default. */
  readonly stopOnSignals?: ReadonlyArray<NodeJS.Signals> | undefined
}

/** How one write-back drive ended. */
export type WriteBackOutcome =
  | "committed"
  | "already-committed"
  | "retrying"
  | "deferred"
  | "dead"
  | "reconcile_only"
  | "lease-lost"
  | "exhausted"
  | "abandoned"

/** How one verification ended. */
export type VerificationEnd = "verified" | "pending" | "repair_failed" | "stale-generation" | "stale-claim" | "deferred"

/** What a worker reports, by event name. */
export interface WorkerEvents {
  /** A write-back drive ended (`abandoned`: the worker stopped, or the lease was lost, before an outcome could be recorded). */
  readonly "write-back": {
    readonly outcome: WriteBackOutcome
    readonly operation: ConnectorOperation
    /** Whether the provider call was made. */
    readonly sent: boolean
    /** Whether the outcome came from a `lookup`. */
    readonly lookedUp: boolean
    readonly leaseLoss?: LeaseLoss | undefined
  }
  /** A due claim ended an operation instead of leasing it (out of attempts, or in doubt with no safe re-send). */
  readonly finished: { readonly operation: ConnectorOperation }
  /** A verification ended. */
  readonly verification: { readonly outcome: VerificationEnd; readonly watch: ProjectionWatch; readonly repaired: boolean }
  /** A handler misbehaved; what the worker did about it is in the drive's own event. */
  readonly "handler-fault": HandlerFault
  /** A store call failed (the worker goes on: the store's rules leave nothing half-done). */
  readonly "store-error": { readonly method: string; readonly error: unknown }
  /** The worker stopped: `stop()` resolved. */
  readonly stopped: { readonly aborted: number }
}

/** The counts a worker keeps since it started. */
export interface WorkerStats {
  /** Milliseconds since the worker started. */
  readonly uptimeMs: number
  /** Operations leased to this worker. */
  readonly claimed: number
  /** Provider calls made (`send`). */
  readonly sent: number
  /** Drives by how they ended. */
  readonly writeBacks: Readonly<Record<WriteBackOutcome, number>>
  /** Operations a due claim finished without a drive. */
  readonly finished: number
  /** Lookups asked, and those that settled a write-back. */
  readonly lookups: number
  readonly lookupsSettled: number
  /** Verifications by how they ended. */
  readonly verifications: Readonly<Record<VerificationEnd, number>>
  /** Handler faults by kind. */
  readonly handlerFaults: number
  /** Store calls that failed. */
  readonly storeErrors: number
  /** Drives and verifications running now. */
  readonly inFlight: number
  /** Committed write-backs per second since the start. */
  readonly committedPerSecond: number
  /** Whether the worker is stopping or stopped. */
  readonly stopping: boolean
}
