/**
 * connector-store's worker: `startWorker(store, { connectors })` runs the loops around the store (write-backs, their
 * verification) so that a connector writes only its provider calls. On the Promise API: any store `openConnectorStore` or
 * `openMemoryConnectorStore` opens, in an app on Effect 4, Effect 3 or none.
 *
 * @module @connector-store/worker
 */
export { classifyFailure, retryAfterOf, statusOf } from "./classify.js"
export type { ClassifiedFailure, Connector, HandlerContext, SendContext, SentEntity } from "./connector.js"
export { HandlerFault, type HandlerFaultKind, type HandlerName } from "./handler.js"
export type { LeaseLoss, VerificationEnd, WorkerEvents, WorkerOptions, WorkerStats, WorkerStore, WriteBackOutcome } from "./options.js"
export { type DriveClaimOptions, driveClaim } from "./writeBack.js"
export { startWorker, type Worker } from "./worker.js"
