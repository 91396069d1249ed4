// Memory over many checkRunnerLoop runs (built packages: `npm run build` first):
//   node --expose-gc bench/testkit-memory.mjs [runs per step] [steps]
// Prints the heap after a GC at each step; flat means nothing of a run outlives it.
import { checkRunnerLoop, ProviderError } from "@connector-store/testkit"

const classify = (error, now) => {
  const status = error instanceof ProviderError ? error.status : null
  if (status === "offline") return { kind: "offline", httpStatus: null }
  if (status === 401) return { kind: "auth", httpStatus: 401 }
  if (status === 429) return { kind: "retryable", httpStatus: 429, retryAt: now + (error.retryAfterMs ?? 0) }
  if (typeof status === "number" && status >= 400 && status < 500) return { kind: "permanent", httpStatus: status }
  return { kind: "retryable", httpStatus: typeof status === "number" ? status : null }
}
const loop = async (store, provider, edit) => {
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  const key = { callerDID: edit.callerDID, operationID: edit.operationID }, leaseToken = claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return "lease-lost"
  if (edit.op === "delete") {
    let failure, deleted = true
    try {
      await provider.delete(edit)
    } catch (error) {
      failure = error
      deleted = false
    }
    const gone = failure instanceof ProviderError && (failure.status === 404 || failure.status === 410)
    if (deleted || (gone && edit.reissueIntent.kind === "idempotent-delete")) {
      return (await store.finalizeDeleteOperation(key, { leaseToken, sourceID: edit.sourceID, documentID: edit.documentID })).outcome
    }
    const { kind, httpStatus, retryAt } = gone ? { kind: "unknown", httpStatus: failure.status } : classify(failure, store.now())
    return (await store.recordAttemptFailure(key, { leaseToken, kind, httpStatus, retryAt })).outcome
  }
  const ifMatch = claim.reissue?.kind === "conditional-update" ? claim.reissue.ifMatch : undefined
  const id = edit.reissueIntent.kind === "deterministic-create" ? edit.reissueIntent.providerID : undefined
  let entity = null, failure
  try {
    entity = edit.op === "create" ? await provider.create(edit, { id }) : await provider.update(edit, { ifMatch })
  } catch (error) {
    failure = error
  }
  const { kind, httpStatus, retryAt } = entity === null ? classify(failure, store.now()) : { kind: "unknown", httpStatus: null }
  if (entity === null && (ifMatch !== undefined || id !== undefined) && (httpStatus === 412 || httpStatus === 409)) {
    const found = await provider.get(ifMatch !== undefined ? edit.sourceID : id)
    if (found === null || found.digest !== edit.payloadHash) return (await store.recordAttemptFailure(key, { leaseToken, kind: "unknown", httpStatus })).outcome
    entity = found
  }
  if (entity === null) return (await store.recordAttemptFailure(key, { leaseToken, kind, httpStatus, retryAt })).outcome
  return (await store.finalizeOperationAndArmWatch(key, { leaseToken, sourceID: entity.id, documentID: edit.documentID,
    providerEtag: entity.etag, resultEntity: entity, watchDueAt: store.now() + 300 })).outcome
}

const perStep = Number(process.argv[2] ?? 100)
const steps = Number(process.argv[3] ?? 10)
const heap = () => {
  globalThis.gc?.()
  return (process.memoryUsage().heapUsed / 1024 / 1024).toFixed(1)
}
console.log(`start: heap ${heap()} MB`)
const started = Date.now()
for (let step = 1; step <= steps; step++) {
  await checkRunnerLoop(loop, { numRuns: perStep, seed: step })
  console.log(`${step * perStep} runs: heap ${heap()} MB (${((Date.now() - started) / 1000).toFixed(1)} s)`)
}
