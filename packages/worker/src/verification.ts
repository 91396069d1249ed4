import type { ProjectionWatch, WatchIdentity } from "@connector-store/promise"
import type { Connector } from "./connector.js"
import { describeValue, HandlerFault, type HandlerName, runHandler } from "./handler.js"
import type { WorkerEvents, WorkerStore } from "./options.js"

/** What a verification needs of its worker. */
export interface VerifyContext {
  readonly store: WorkerStore
  readonly connector: Connector | undefined
  readonly claimedUntil: number
  readonly handlerTimeoutMs: number
  readonly abortGraceMs: number
  readonly verifyRetryMs: number
  readonly verifyMaxAttempts: number
  readonly stopSignal: AbortSignal
  readonly fault: (fault: HandlerFault) => void
}

const identityOf = (w: ProjectionWatch): WatchIdentity =>
  ({ ownerDID: w.ownerDID, connectorName: w.connectorName, model: w.model, accountKey: w.accountKey, sourceID: w.sourceID })

type Verified = WorkerEvents["verification"]

/**
 * Verifies one claimed watch: asks the connector's `verify` for the provider's state and records it for the claimed
 * generation; no answer (a failure, a timeout, garbage, or no `verify` for its connector) defers it without spending an
 * attempt; a mismatch goes to `repair` when there is one, and is due again at once to verify the repair.
 */
export const verifyWatch = async (ctx: VerifyContext, watch: ProjectionWatch): Promise<Verified> => {
  const { store, connector } = ctx
  const identity = identityOf(watch)
  const generation = watch.repairGeneration
  const faultOf = (fault: HandlerFault["fault"], handler: HandlerName, detail: string) =>
    ctx.fault(new HandlerFault(fault, handler, watch.connectorName, watch.sourceID, detail))
  const late = (handler: HandlerName) => (fault: "ignored-abort" | "answered-after-abort", detail: string) => faultOf(fault, handler, detail)
  const defer = async (): Promise<Verified> => {
    await store.deferWatch(identity, { generation, claimedUntil: ctx.claimedUntil, nextAttemptAt: store.now() + ctx.verifyRetryMs, reason: "offline" })
    return { outcome: "deferred", watch, repaired: false }
  }
  if (connector?.verify === undefined) return defer()
  const asked = await runHandler((signal) => connector.verify!(watch, { signal }), {
    signal: ctx.stopSignal,
    timeoutMs: ctx.handlerTimeoutMs,
    abortGraceMs: ctx.abortGraceMs,
    onLate: late("verify")
  })
  if (asked.kind !== "answered") {
    if (asked.kind === "timed-out") faultOf("timed-out", "verify", `no answer within ${ctx.handlerTimeoutMs} ms: deferred`)
    if (asked.kind === "threw" && !(asked.error instanceof Error)) faultOf("threw-non-error", "verify", describeValue(asked.error))
    return defer()
  }
  const digest = asked.value
  if (digest !== null && typeof digest !== "string") {
    faultOf("garbage", "verify", `answered ${describeValue(digest)}, not a digest or null: deferred`)
    return defer()
  }
  const hasRepair = connector.repair !== undefined
  const outcome = await store.recordVerification(identity, {
    generation,
    claimedUntil: ctx.claimedUntil,
    fetchedDigest: digest,
    maxAttempts: ctx.verifyMaxAttempts,
    // Not equal: after the repair it is verified again at once; without one, it waits for ingress or an operator.
    dueAt: hasRepair ? store.now() : store.now() + ctx.verifyRetryMs
  })
  if (outcome !== "pending" || !hasRepair) return { outcome, watch, repaired: false }
  const repaired = await runHandler((signal) => connector.repair!(watch, digest, { signal }), {
    signal: ctx.stopSignal,
    timeoutMs: ctx.handlerTimeoutMs,
    abortGraceMs: ctx.abortGraceMs,
    onLate: late("repair")
  })
  if (repaired.kind === "timed-out") faultOf("timed-out", "repair", `no answer within ${ctx.handlerTimeoutMs} ms`)
  if (repaired.kind === "threw" && !(repaired.error instanceof Error)) faultOf("threw-non-error", "repair", describeValue(repaired.error))
  return { outcome, watch, repaired: repaired.kind === "answered" }
}
