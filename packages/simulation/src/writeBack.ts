import type {
  ClaimOperationInput,
  ClaimResult,
  FailureKind,
  OperationKey,
  PromiseConnectorStore,
  SafeReissue
} from "@connector-store/core"
import { keyOf } from "@connector-store/testkit/provider"
import type { SimClock } from "./clock.js"
import type { PlannedOperation } from "./plan.js"
import type { Entity, ProviderAnswer, WriteRequest } from "./provider.js"
import type { WorldClient } from "./world.js"

/** What one write-back needs: the store, the world, and the store-wide lease length. */
export interface WriteBackContext {
  readonly store: PromiseConnectorStore<unknown>
  readonly world: WorldClient
  readonly clock: SimClock
  readonly leaseMs: number
  /** How long after a commit the watch's first verification falls due. */
  readonly watchDelayMs: number
  /** A broken runner that ignores `claim.reissue` and re-sends the plain write: shows what the invariant check catches. */
  readonly blindResend?: boolean | undefined
}


/**
 * The request a claim allows. A first attempt sends the plain write (an
 * unconditional update; a create with its deterministic id). A re-drive that
 * the store handed a reissue (`claim.reissue`) re-sends exactly as the intent
 * says, marked as a sanctioned reissue: an update conditional on the etag the
 * edit was based on, the create with the deterministic provider id, or the
 * delete again.
 */
export const requestFor = (op: PlannedOperation, reissue: SafeReissue | null): WriteRequest => {
  const plain = {
    opIndex: op.index, key: keyOf(op), kind: op.op, entityID: op.document.entityID, documentID: op.document.documentID, content: op.content
  }
  if (reissue === null) return { ...plain, reissue: null }
  switch (reissue.kind) {
    case "conditional-update":
      return { ...plain, kind: "update", ifMatch: reissue.ifMatch, reissue: reissue.kind }
    case "deterministic-create":
      return { ...plain, kind: "create", entityID: reissue.providerID, reissue: reissue.kind }
    case "idempotent-delete":
      return { ...plain, kind: "delete", reissue: reissue.kind }
  }
}

/** True when the provider's entity carries this operation's write (the provider may normalize the title). */
const carries = (entity: Entity, op: PlannedOperation): boolean =>
  entity.content.revision === op.content.revision && entity.content.by === op.content.by

/**
 * Drives one write-back through the store's public API: claim → mark sent
 * → provider call → finalize-and-arm (a delete: finalize-and-retire), or
 * the failure the answer means.
 * The world may choose a crash site for this claim: the runner then simply
 * stops there (lease held, nothing recorded), as a killed process would;
 * the due sweep finds the operation once the lease lapses.
 */
export const driveWriteBack = async (
  ctx: WriteBackContext,
  op: PlannedOperation,
  input: ClaimOperationInput
): Promise<void> => {
  const claim = await ctx.store.claimOperation(input)
  ctx.world.count(`claim.${claim.outcome}`)
  if (claim.outcome !== "claimed") return
  if (claim.created) await ctx.world.editLocally(op.document.documentID, op.op === "delete" ? null : op.content)
  await driveClaimed(ctx, op, input, claim)
}

/**
 * Drives a write-back this runner holds the lease of (a `claimed` answer of
 * `claimOperation`, or one operation of a `claimDueOperations` batch), from
 * the send marker on, as `driveWriteBack` does.
 */
export const driveClaimed = async (
  ctx: WriteBackContext,
  op: PlannedOperation,
  input: ClaimOperationInput,
  claim: Extract<ClaimResult, { readonly outcome: "claimed" }>
): Promise<void> => {
  const { store, world } = ctx
  const key: OperationKey = { callerDID: input.callerDID, operationID: input.operationID }
  const leaseToken = claim.lease.token
  const crash = await world.crashSite(op.index)
  const died = () => world.count(`crash.${crash}`)
  if (crash === "after-claim") return died()
  if (claim.reissue !== null) world.count(`reissue.handed-out.${claim.reissue.kind}`)
  const request = requestFor(op, ctx.blindResend === true ? null : claim.reissue)

  const sent = await store.markOperationSent(key, { leaseToken })
  world.count(`mark-sent.${sent.outcome}`)
  if (sent.outcome !== "sent") return
  if (crash === "after-mark-sent") return died()
  if (crash === "stalls-past-lease") {
    died()
    await ctx.clock.sleep(Math.ceil(ctx.leaseMs * 1.6))
    // A runner checks its lease before a request leaves; one that was taken over stops here.
    const renewed = await store.renewOperationLease(key, { leaseToken })
    world.count(`stale-runner.${renewed.outcome}`)
    if (renewed.outcome !== "renewed") return
  }
  if (crash === "during-request") {
    void ctx.clock.spawn(() => world.write(request))
    return died()
  }
  const answer = await world.write(request)
  world.count(`provider.${answer.status}`)
  if (crash === "after-response") return died()
  await settle(ctx, op, key, leaseToken, request, answer)
}

const settle = async (
  ctx: WriteBackContext,
  op: PlannedOperation,
  key: OperationKey,
  leaseToken: string,
  request: WriteRequest,
  answer: ProviderAnswer
): Promise<void> => {
  const { store, world } = ctx
  const fail = async (kind: FailureKind, httpStatus: number | null, retryAt?: number) => {
    const failed = await store.recordAttemptFailure(key, {
      leaseToken,
      kind,
      httpStatus,
      ...(retryAt === undefined ? {} : { retryAt })
    })
    world.count(`failure.${kind}.${failed.outcome}`)
  }
  const finalize = async (entity: Entity) => {
    const done = await store.finalizeOperationAndArmWatch(key, {
      leaseToken,
      sourceID: entity.id,
      documentID: op.document.documentID,
      providerEtag: entity.etag,
      resultEntity: entity,
      watchDueAt: ctx.clock.now() + ctx.watchDelayMs
    })
    world.count(`finalize.${done.outcome}`)
    if (done.outcome === "committed") await world.noteWritten(op.document.documentID, entity)
  }
  /** The failure an answer that says nothing about this write's kind means (rate limit, 5xx, no answer, auth, offline), or undefined. */
  const transient = () => {
    switch (answer.status) {
      case 429:
        return fail("retryable", 429, ctx.clock.now() + answer.retryAfterMs)
      case 500:
      case 502:
      case 503:
        return fail("retryable", answer.status)
      case "timeout":
        return fail("retryable", null)
      case 401:
        return fail("auth", 401)
      case "offline":
        return fail("offline", null)
      default:
        return undefined
    }
  }
  if (request.kind === "delete") {
    const retire = async () => {
      const done = await store.finalizeDeleteOperation(key, {
        leaseToken,
        sourceID: request.entityID,
        documentID: op.document.documentID
      })
      world.count(`finalize-delete.${done.outcome}`)
    }
    switch (answer.status) {
      case 204:
      // Gone: this delete (or an earlier request of it) removed the entity, or someone else did. Either way it is done.
      case 404:
      case 410:
        return retire()
      default:
        return transient() ?? fail("permanent", answer.status as number)
    }
  }
  switch (answer.status) {
    case 200:
      return finalize(answer.entity)
    case 409:
    case 412: {
      // The precondition failed: an earlier request may have landed. Look it up; never re-send.
      if (request.reissue !== null) world.count("reissue.refused-by-provider")
      const found = await world.read(request.entityID)
      if ("id" in found && carries(found, op)) {
        world.count("reissue.settled-by-lookup")
        return finalize(found)
      }
      if ("status" in found && found.status === "offline") return fail("offline", null)
      if ("status" in found && found.status === 401) return fail("auth", 401)
      return fail("unknown", answer.status)
    }
    case 400:
    case 404:
    case 410:
    case 422:
    case 204:
      return fail("permanent", answer.status)
    default:
      return transient()
  }
}
