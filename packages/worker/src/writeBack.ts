import type { ConnectorOperation, DueClaim, OperationKey } from "@connector-store/promise"
import { classifyFailure } from "./classify.js"
import type { ClassifiedFailure, Connector, SentEntity } from "./connector.js"
import { describeValue, HandlerFault, type HandlerName, runHandler } from "./handler.js"
import { LeaseKeeper } from "./lease.js"
import type { WorkerEvents, WorkerStore, WriteBackOutcome } from "./options.js"

/** What a drive needs of its worker. */
export interface DriveContext {
  readonly store: WorkerStore
  readonly connectorName: string
  readonly connector: Connector
  readonly leaseMs: number
  readonly sendTimeoutMs: number
  readonly handlerTimeoutMs: number
  readonly abortGraceMs: number
  readonly verifyAfterMs: number
  /** Aborted when the worker's grace period is over. */
  readonly stopSignal: AbortSignal
  readonly fault: (fault: HandlerFault) => void
  readonly storeError: (method: string, error: unknown) => void
  readonly sentOne: () => void
  readonly lookedUp: (settled: boolean) => void
}

const keyOf = (operation: ConnectorOperation): OperationKey => ({ callerDID: operation.callerDID, operationID: operation.operationID })
const subjectOf = (operation: ConnectorOperation) => `${operation.callerDID}/${operation.operationID}`

/** The entity a `send` or `lookup` answered, or undefined when the answer is not one. */
const entityOf = (value: unknown): SentEntity | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const { id, etag, digest } = value as Record<string, unknown>
  if (typeof id !== "string" || id === "") return undefined
  if (etag !== undefined && etag !== null && typeof etag !== "string") return undefined
  if (digest !== undefined && digest !== null && typeof digest !== "string") return undefined
  return value as SentEntity
}

/** Whether `claim`'s send was a conditional one (a 412 or 409 then says the entity changed, perhaps by our earlier request). */
const conditionalSend = (claim: DueClaim): boolean =>
  claim.reissue !== null || (claim.operation.reissueIntent as { readonly kind?: unknown } | null)?.kind === "deterministic-create"

/** Whether a delete's 404 or 410 means "gone": only under `idempotent-delete`. */
const goneCounts = (operation: ConnectorOperation): boolean =>
  (operation.reissueIntent as { readonly kind?: unknown } | null)?.kind === "idempotent-delete"

type Drive = WorkerEvents["write-back"]

/** How many times a finalize that failed (a store error: it applied nothing) is tried under the same lease. */
const FINALIZE_TRIES = 3

/** `call`, tried again after a failure up to `FINALIZE_TRIES` times in all, 50 ms apart; the last failure is thrown. */
const retried = async <A>(call: () => Promise<A>): Promise<A> => {
  for (let tried = 1; ; tried++) {
    try {
      return await call()
    } catch (error) {
      const tag = (error as { readonly _tag?: unknown } | null)?._tag
      if (tried >= FINALIZE_TRIES || tag === "InvalidInput" || tag === "StoreClosed") throw error
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}

/**
 * Drives one leased operation: mark, send under a kept lease, then finalize (or look up and finalize) or record the failure as
 * classified. Never finalizes once the lease was lost; never re-sends but as the claim's `reissue` says.
 */
export const driveWriteBack = async (ctx: DriveContext, claim: DueClaim): Promise<Drive> => {
  const { store, connector } = ctx
  let operation = claim.operation
  const key = keyOf(operation)
  const leaseToken = claim.lease.token
  const ended = (outcome: WriteBackOutcome, extra: Partial<Drive> = {}): Drive =>
    ({ outcome, operation, sent: false, lookedUp: false, ...extra })
  const faultOf = (fault: HandlerFault["fault"], handler: HandlerName, detail: string) =>
    ctx.fault(new HandlerFault(fault, handler, ctx.connectorName, subjectOf(operation), detail))

  const marked = await store.markOperationSent(key, { leaseToken })
  if (marked.outcome !== "sent") return ended(marked.outcome === "already-sent" ? "abandoned" : marked.outcome)
  operation = marked.operation

  const controller = new AbortController()
  const onStop = () => controller.abort(new Error("the worker stopped"))
  if (ctx.stopSignal.aborted) onStop()
  else ctx.stopSignal.addEventListener("abort", onStop, { once: true })
  const keeper = new LeaseKeeper(store, key, claim.lease, ctx.leaseMs, controller, (error) => ctx.storeError("renewOperationLease", error))
  try {
    const late = (handler: HandlerName) => (fault: "ignored-abort" | "answered-after-abort", detail: string) =>
      faultOf(fault, handler, detail)
    const sent = await runHandler((signal) => connector.send(operation, { reissue: claim.reissue, signal, attempt: operation.attempts }), {
      signal: controller.signal,
      timeoutMs: ctx.sendTimeoutMs,
      abortGraceMs: ctx.abortGraceMs,
      onLate: late("send")
    })
    ctx.sentOne()
    // The lease, not the answer, decides whether this run may write: a lost lease ends the drive here.
    const lost = () => keeper.lost
    if (lost() !== undefined || sent.kind === "aborted") {
      return ended("abandoned", { sent: true, leaseLoss: lost() })
    }

    const lookup = async (): Promise<SentEntity | null | undefined> => {
      if (connector.lookup === undefined) return undefined
      const found = await runHandler((signal) => connector.lookup!(operation, { signal }), {
        signal: controller.signal,
        timeoutMs: ctx.handlerTimeoutMs,
        abortGraceMs: ctx.abortGraceMs,
        onLate: late("lookup")
      })
      if (found.kind !== "answered") {
        if (found.kind === "timed-out") faultOf("timed-out", "lookup", `no answer within ${ctx.handlerTimeoutMs} ms`)
        if (found.kind === "threw" && !(found.error instanceof Error)) faultOf("threw-non-error", "lookup", describeValue(found.error))
        return undefined
      }
      if (found.value === null) return null
      const entity = entityOf(found.value)
      if (entity === undefined) {
        faultOf("garbage", "lookup", `answered ${describeValue(found.value)}, not an entity with an id or null`)
        return undefined
      }
      // An entity that does not hold this write is not its landing.
      return entity.digest === undefined || entity.digest === null || entity.digest === operation.payloadHash ? entity : null
    }

    const finalize = async (entity: SentEntity | undefined, lookedUp: boolean): Promise<Drive> => {
      if (lost() !== undefined) return ended("abandoned", { sent: true, lookedUp, leaseLoss: lost() })
      keeper.stop()
      const documentID = operation.documentID
      if (operation.op === "delete") {
        const done = await retried(() =>
          store.finalizeDeleteOperation(key, { leaseToken, sourceID: operation.sourceID ?? "", documentID: documentID ?? "" }))
        if (done.outcome === "committed") operation = done.operation
        return ended(done.outcome, { sent: true, lookedUp })
      }
      const done = await retried(() => store.finalizeOperationAndArmWatch(key, {
        leaseToken,
        sourceID: entity!.id,
        documentID: documentID ?? "",
        providerEtag: entity!.etag ?? null,
        ...(entity!.entity === undefined ? {} : { resultEntity: entity!.entity }),
        watchDueAt: store.now() + ctx.verifyAfterMs
      }))
      if (done.outcome === "committed") operation = done.operation
      return ended(done.outcome, { sent: true, lookedUp })
    }

    const fail = async (failure: ClassifiedFailure, lookedUp: boolean): Promise<Drive> => {
      if (lost() !== undefined) return ended("abandoned", { sent: true, lookedUp, leaseLoss: lost() })
      keeper.stop()
      const retryAt = failure.retryAfterMs === undefined ? undefined : store.now() + Math.ceil(failure.retryAfterMs)
      const recorded = await store.recordAttemptFailure(key, {
        leaseToken,
        kind: failure.kind,
        httpStatus: failure.httpStatus ?? null,
        ...(failure.notApplied === undefined ? {} : { notApplied: failure.notApplied }),
        ...(retryAt === undefined ? {} : { retryAt })
      })
      if (recorded.outcome !== "lease-lost") operation = recorded.operation
      return ended(recorded.outcome, { sent: true, lookedUp })
    }

    /** In doubt: a lookup, where the connector has one, settles it; else the store's rules for an unknown outcome. */
    const settleDoubt = async (failure: ClassifiedFailure): Promise<Drive> => {
      // A delete's lookup would prove nothing a re-sent delete does not: its doubt is the store's to settle.
      if (operation.op === "delete") return fail(failure, false)
      const found = await lookup()
      if (found !== undefined) ctx.lookedUp(found !== null)
      if (found !== undefined && found !== null) return finalize(found, true)
      return fail(failure, found !== undefined)
    }

    if (sent.kind === "timed-out") {
      faultOf("timed-out", "send", `no answer within ${ctx.sendTimeoutMs} ms: recorded as an unknown outcome`)
      return settleDoubt({ kind: "unknown" })
    }
    if (sent.kind === "answered") {
      if (operation.op === "delete") return finalize(undefined, false)
      const entity = entityOf(sent.value)
      if (entity !== undefined) return finalize(entity, false)
      // The request went and something came back, but not an entity: it may have landed.
      faultOf("garbage", "send", `answered ${describeValue(sent.value)}, not an entity with an id: recorded as an unknown outcome`)
      return settleDoubt({ kind: "unknown" })
    }

    if (!(sent.error instanceof Error)) faultOf("threw-non-error", "send", `threw ${describeValue(sent.error)}`)
    const failure = classified(ctx, operation, sent.error, faultOf)
    const status = failure.httpStatus ?? null
    if (operation.op === "delete" && (status === 404 || status === 410)) {
      // Gone: applied, under idempotent-delete; under reconcile a 404 proves nothing (a wrong path, another account).
      return goneCounts(operation) ? finalize(undefined, false) : fail({ kind: "unknown", httpStatus: status }, false)
    }
    if ((status === 412 || status === 409) && conditionalSend(claim)) {
      // Refused as changed (or the id as taken): perhaps by our own earlier request. Look it up; never re-send.
      return settleDoubt({ kind: "unknown", httpStatus: status })
    }
    if (failure.kind === "permanent" && (claim.reissue !== null || operation.inDoubtSince !== null)) {
      // A refusal of a re-send proves nothing of the earlier request, which may have landed: still in doubt, never dead.
      return settleDoubt({ kind: "unknown", httpStatus: status })
    }
    if (failure.kind === "unknown" || (failure.kind === "retryable" && failure.notApplied !== true && (status === null || status >= 500))) {
      return settleDoubt(failure)
    }
    return fail(failure, false)
  } finally {
    keeper.stop()
    ctx.stopSignal.removeEventListener("abort", onStop)
  }
}

/** What the connector's `classify` (or the default) makes of `error`; a classify that throws or answers garbage means `unknown`. */
const classified = (
  ctx: DriveContext,
  operation: ConnectorOperation,
  error: unknown,
  faultOf: (fault: HandlerFault["fault"], handler: HandlerName, detail: string) => void
): ClassifiedFailure => {
  const classify = ctx.connector.classify ?? classifyFailure
  let failure: unknown
  try {
    failure = classify(error)
  } catch (thrown) {
    faultOf(thrown instanceof Error ? "garbage" : "threw-non-error", "classify", `threw ${describeValue(thrown instanceof Error ? thrown.message : thrown)}`)
    return { kind: "unknown" }
  }
  const kinds = ["retryable", "permanent", "unknown", "offline", "auth"]
  const f = failure as Partial<ClassifiedFailure> | null
  const statusOk = f?.httpStatus === undefined || f.httpStatus === null ||
    (Number.isInteger(f.httpStatus) && f.httpStatus >= 100 && f.httpStatus <= 599)
  const retryOk = f?.retryAfterMs === undefined || (typeof f.retryAfterMs === "number" && Number.isFinite(f.retryAfterMs) && f.retryAfterMs >= 0)
  if (typeof f !== "object" || f === null || !kinds.includes(f.kind as string) || !statusOk || !retryOk ||
    (f.notApplied !== undefined && typeof f.notApplied !== "boolean")) {
    faultOf("garbage", "classify", `answered ${describeValue(failure)} for ${subjectOf(operation)}: recorded as an unknown outcome`)
    return { kind: "unknown" }
  }
  return f as ClassifiedFailure
}

/** The options of `driveClaim`: the worker's, for one drive. */
export interface DriveClaimOptions {
  readonly sendTimeoutMs?: number | undefined
  readonly handlerTimeoutMs?: number | undefined
  readonly abortGraceMs?: number | undefined
  readonly verifyAfterMs?: number | undefined
  /** The lease's length for its renewals; the claim's own by default. */
  readonly leaseMs?: number | undefined
  /** Aborts the drive's handlers (as a worker's stop does). */
  readonly signal?: AbortSignal | undefined
  /** Called with each handler fault. */
  readonly onFault?: ((fault: HandlerFault) => void) | undefined
}

/**
 * Drives one operation `claim` leased to the caller (a `claimed` answer of `claimOperation`, or one of `claimDueOperations`)
 * with `connector`, exactly as a worker's slot does: for a loop of your own that wants the worker's drive, and for checking
 * it (`checkRunnerLoop`). Rejects only with a store call's failure.
 */
export const driveClaim = (
  store: Pick<WorkerStore, "now" | "markOperationSent" | "renewOperationLease" | "recordAttemptFailure" | "finalizeOperationAndArmWatch" | "finalizeDeleteOperation">,
  connectorName: string,
  connector: Connector,
  claim: DueClaim,
  options: DriveClaimOptions = {}
): Promise<WorkerEvents["write-back"]> =>
  driveWriteBack({
    store: store as WorkerStore,
    connectorName,
    connector,
    leaseMs: options.leaseMs ?? Math.max(1, claim.lease.expiresAt - store.now()),
    sendTimeoutMs: options.sendTimeoutMs ?? 120_000,
    handlerTimeoutMs: options.handlerTimeoutMs ?? 30_000,
    abortGraceMs: options.abortGraceMs ?? 1_000,
    verifyAfterMs: options.verifyAfterMs ?? 30_000,
    stopSignal: options.signal ?? new AbortController().signal,
    fault: options.onFault ?? (() => {}),
    storeError: () => {},
    sentOne: () => {},
    lookedUp: () => {}
  }, claim)
