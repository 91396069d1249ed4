import type { FailureKind } from "@connector-store/core"
import { type CheckedStore, type CheckEdit, type ProviderClient, type ProviderEntity, ProviderError, type RunnerLoop } from "@connector-store/testkit"

/** What an error proves: a 4xx proves "not applied"; a timeout or a 5xx does not; no network defers. */
export const classify = (error: unknown, now: number): { kind: FailureKind; httpStatus: number | null; retryAt?: number } => {
  const status = error instanceof ProviderError ? error.status : null
  if (status === "offline") return { kind: "offline", httpStatus: null }
  if (status === 401) return { kind: "auth", httpStatus: status }
  if (status === 429 && error instanceof ProviderError) return { kind: "retryable", httpStatus: 429, retryAt: now + (error.retryAfterMs ?? 0) }
  if (typeof status === "number" && status >= 400 && status < 500) return { kind: "permanent", httpStatus: status }
  return { kind: "retryable", httpStatus: typeof status === "number" ? status : null }
}

const carriesWrite = (entity: ProviderEntity, edit: CheckEdit) => entity.digest === edit.payloadHash

const send = (provider: ProviderClient, edit: CheckEdit, reissue: { ifMatch?: string | undefined; id?: string | undefined }) =>
  edit.op === "create" ? provider.create(edit, { id: reissue.id }) : provider.update(edit, { ifMatch: reissue.ifMatch })

const deterministicID = (edit: CheckEdit) => edit.reissueIntent.kind === "deterministic-create" ? edit.reissueIntent.providerID : undefined

/** True when a delete's failure says the entity is gone: 404 or 410, which only `idempotent-delete` may take as applied. */
const goneAnswer = (failure: unknown) => failure instanceof ProviderError && (failure.status === 404 || failure.status === 410)

/** A delete's write-back once marked sent: gone (deleted now or before) finalizes; under `reconcile` a 404/410 is in doubt. */
const deleteBack = async (
  store: CheckedStore,
  provider: ProviderClient,
  edit: CheckEdit,
  leaseToken: string,
  goneMeansApplied: (edit: CheckEdit) => boolean,
  sourceID = edit.sourceID!
) => {
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }
  let failure: unknown, deleted = true
  try {
    await provider.delete(edit)
  } catch (error) {
    failure = error
    deleted = false
  }
  if (deleted || (goneAnswer(failure) && goneMeansApplied(edit))) {
    return (await store.finalizeDeleteOperation(key, { leaseToken, sourceID, documentID: edit.documentID })).outcome
  }
  const { kind, httpStatus, retryAt } = goneAnswer(failure)
    ? { kind: "unknown" as const, httpStatus: (failure as ProviderError).status as number, retryAt: undefined }
    : classify(failure, store.now())
  return (await store.recordAttemptFailure(key, { leaseToken, kind, httpStatus, retryAt })).outcome
}

/** Commits a create or update that the provider answered with `entity`, arming its watch due `dueInMs` on. */
const finalizeWrite = async (store: CheckedStore, edit: CheckEdit, leaseToken: string, entity: ProviderEntity, dueInMs = 300) =>
  (await store.finalizeOperationAndArmWatch({ callerDID: edit.callerDID, operationID: edit.operationID }, { leaseToken,
    sourceID: entity.id, documentID: edit.documentID, providerEtag: entity.etag, resultEntity: entity, watchDueAt: store.now() + dueInMs })).outcome

/** Sends a create or update once as `reissue` says and settles it: finalized when answered, else the classified failure (no 412/409 look-up). */
const sendOnce = async (
  store: CheckedStore,
  provider: ProviderClient,
  edit: CheckEdit,
  leaseToken: string,
  reissue: { ifMatch?: string | undefined; id?: string | undefined }
) => {
  let entity: ProviderEntity | null = null, failure: unknown
  try {
    entity = await send(provider, edit, reissue)
  } catch (error) {
    failure = error
  }
  if (entity !== null) return finalizeWrite(store, edit, leaseToken, entity)
  return (await store.recordAttemptFailure({ callerDID: edit.callerDID, operationID: edit.operationID }, { leaseToken,
    ...classify(failure, store.now()) })).outcome
}

/** The README's write-back loop, on the testkit's provider: only the provider call in the try, the reissue rule, 412/409 means look it up. */
export const readmeLoop: RunnerLoop = (store, provider, edit) => watchDueIn(300)(store, provider, edit)

/**
 * The README's loop, arming each watch due `dueInMs` after its commit; with
 * `markAtClaim`, its claim marks the request sent (`markSent`) and it never
 * calls `markOperationSent`.
 */
export const watchDueIn = (dueInMs: number, markAtClaim = false): RunnerLoop => async (store, provider, edit) => {
  const claim = await store.claimOperation(markAtClaim ? { ...edit, markSent: true } : edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  if (!markAtClaim && (await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  if (edit.op === "delete") return deleteBack(store, provider, edit, leaseToken, (e) => e.reissueIntent.kind === "idempotent-delete")
  const ifMatch = claim.reissue?.kind === "conditional-update" ? claim.reissue.ifMatch : undefined
  const id = deterministicID(edit)
  let entity: ProviderEntity | null = null, failure: unknown
  try {
    entity = await send(provider, edit, { ifMatch, id })
  } catch (error) {
    failure = error
  }
  const { kind, httpStatus, retryAt } = entity === null ? classify(failure, store.now()) : { kind: "unknown" as const, httpStatus: null, retryAt: undefined }
  if (entity === null && (ifMatch !== undefined || id !== undefined) && (httpStatus === 412 || httpStatus === 409)) {
    const found = await provider.get(ifMatch !== undefined ? edit.sourceID! : id!) // did our earlier request land?
    if (found === null || !carriesWrite(found, edit)) return (await store.recordAttemptFailure(key, { leaseToken, kind: "unknown", httpStatus })).outcome
    entity = found
  }
  if (entity === null) return (await store.recordAttemptFailure(key, { leaseToken, kind, httpStatus, retryAt })).outcome
  return finalizeWrite(store, edit, leaseToken, entity, dueInMs)
}

/** A loop that ignores `claim.reissue` and re-sends the plain write. */
export const blindResendLoop: RunnerLoop = async (store, provider, edit) => {
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  if (edit.op === "delete") return deleteBack(store, provider, edit, leaseToken, (e) => e.reissueIntent.kind === "idempotent-delete")
  return sendOnce(store, provider, edit, leaseToken, { id: deterministicID(edit) }) // never If-Match: blind
}

/** A loop whose try holds the finalize too: a finalize that fails is recorded as the provider's failure. */
export const finalizeInTryLoop: RunnerLoop = async (store, provider, edit) => {
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  if (edit.op === "delete") return deleteBack(store, provider, edit, leaseToken, (e) => e.reissueIntent.kind === "idempotent-delete")
  const ifMatch = claim.reissue?.kind === "conditional-update" ? claim.reissue.ifMatch : undefined
  try {
    const entity = await send(provider, edit, { ifMatch, id: deterministicID(edit) })
    return (await store.finalizeOperationAndArmWatch(key, { leaseToken, sourceID: entity.id, documentID: edit.documentID,
      providerEtag: entity.etag, resultEntity: entity, watchDueAt: store.now() + 300 })).outcome
  } catch (error) {
    // Wrong: a store error lands here too, and anything that is not the provider's is called permanent.
    const failure = error instanceof ProviderError ? classify(error, store.now()) : { kind: "permanent" as const, httpStatus: 500 }
    return (await store.recordAttemptFailure(key, { leaseToken, ...failure, notApplied: !(error instanceof ProviderError) })).outcome
  }
}

/** A loop that drops the claim's lease token: it calls the store with a token of its own making instead. */
export const droppedTokenLoop: RunnerLoop = async (store: CheckedStore, provider, edit) => {
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }
  const leaseToken = `lease-of-${edit.operationID}` // wrong: the claim's token is claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  if (edit.op === "delete") return deleteBack(store, provider, edit, leaseToken, (e) => e.reissueIntent.kind === "idempotent-delete")
  const ifMatch = claim.reissue?.kind === "conditional-update" ? claim.reissue.ifMatch : undefined
  return sendOnce(store, provider, edit, leaseToken, { ifMatch, id: deterministicID(edit) })
}

/** A loop that ignores markOperationSent's answer: it sends although the store said its lease is gone (taken over, or out of attempts). */
export const ignoresLeaseLostLoop: RunnerLoop = async (store, provider, edit) => {
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  await store.markOperationSent(key, { leaseToken }) // wrong: "lease-lost" or "exhausted" means do not send
  if (edit.op === "delete") return deleteBack(store, provider, edit, leaseToken, (e) => e.reissueIntent.kind === "idempotent-delete")
  const ifMatch = claim.reissue?.kind === "conditional-update" ? claim.reissue.ifMatch : undefined
  return sendOnce(store, provider, edit, leaseToken, { ifMatch, id: deterministicID(edit) })
}

/** The README's loop, but a 404 or 410 of any delete is taken as gone: under `reconcile` it finalizes deletes that never applied. */
export const goneAlwaysLoop: RunnerLoop = async (store, provider, edit) => {
  if (edit.op !== "delete") return readmeLoop(store, provider, edit)
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  return deleteBack(store, provider, edit, leaseToken, () => true) // wrong: only idempotent-delete may
}

/** The README's loop, but a 404 or 410 of a delete is recorded as the provider's refusal: a delete that reached its goal reads failed. */
export const goneAsFailureLoop: RunnerLoop = async (store, provider, edit) => {
  if (edit.op !== "delete") return readmeLoop(store, provider, edit)
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  let failure: unknown
  try {
    await provider.delete(edit)
  } catch (error) {
    failure = error
  }
  if (failure === undefined) return (await store.finalizeDeleteOperation(key, { leaseToken, sourceID: edit.sourceID!, documentID: edit.documentID })).outcome
  return (await store.recordAttemptFailure(key, { leaseToken, ...classify(failure, store.now()) })).outcome // wrong: 404/410 is gone
}

/** The README's loop, but a delete is finalized naming the document instead of the entity: the deleted entity's watch is never retired. */
export const wrongSourceDeleteLoop: RunnerLoop = async (store, provider, edit) => {
  if (edit.op !== "delete") return readmeLoop(store, provider, edit)
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  return deleteBack(store, provider, edit, leaseToken, (e) => e.reissueIntent.kind === "idempotent-delete", edit.documentID) // wrong: sourceID is edit.sourceID
}
