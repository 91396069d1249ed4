// One runner's drive of one operation, exactly as docs/operations.md
// prescribes: claim → (offline?) → mark sent → (offline?) → renew → one
// provider request, sent only as `claim.reissue` allows → finalize-and-arm,
// or the failure kind the answer calls for. Shared by the workers and the
// controller's recovery pass.
import { REQUEST_TIMEOUT_MS } from "./provider.mjs"

/** How much of a renewed lease must be left for a request to leave (it lands within milliseconds). */
const LATE_MARGIN_MS = 2_000

/** The tags of the store's errors; a rejection without one of these is an untyped rejection. */
export const STORE_ERROR_TAGS = new Set([
  "InvalidInput", "PersistenceError", "ConcurrentUpdateExhausted", "ReservedArmReason", "WinnerReaderMissing",
  "WinnerReadFailed", "IdempotencyConflict", "StoreClosed"
])

/** Thrown (and caught by the caller's loop) once a store rejection has been recorded: the drive stops there. */
export class Aborted extends Error {}

const describe = (error) => {
  const text = [error?.message, error?.cause?.message, error?.cause?.code, String(error?.cause ?? "")].join(" ")
  return text.slice(0, 300)
}

/**
 * Calls the store, recording a rejection through `report`: `untyped` when it
 * carries no store `_tag`, `busy` when SQLITE_BUSY reached the caller, else
 * a typed error. Any rejection aborts the drive.
 */
export const storeCall = async (report, method, run) => {
  try {
    return await run()
  } catch (error) {
    const tag = error?._tag
    const text = describe(error)
    if (typeof tag !== "string" || !STORE_ERROR_TAGS.has(tag)) report({ type: "violation", what: "untyped", method, text })
    else if (/SQLITE_BUSY|database is locked/i.test(text)) report({ type: "violation", what: "busy", method, text })
    else report({ type: "typed-error", tag, method, text })
    throw new Aborted(method)
  }
}

/** The claim input a re-drive brings: the stored row's own fields (so the payload hash matches). */
export const claimInputOf = (row) => ({
  callerDID: row.callerDID, operationID: row.operationID, ownerDID: row.ownerDID, connectorName: row.connectorName,
  model: row.model, op: row.op, accountKey: row.accountKey, target: row.target, sourceID: row.sourceID,
  deterministicEventID: row.deterministicEventID, payloadHash: row.payloadHash, reissueIntent: row.reissueIntent,
  providerEtag: row.providerEtag, documentID: row.documentID
})

/**
 * The request a run may send. No reissue (no earlier request can have
 * landed): an update goes out unconditionally and a reconcile-only create
 * without an id, as a plain client would; a deterministic create always
 * names its id; a delete is a delete. With a reissue: exactly what it says,
 * never anything blind.
 */
export const requestFor = (input, reissue) => {
  const base = { key: input.operationID, documentID: input.documentID, reissue: reissue?.kind ?? null }
  // A delete re-sends as itself: gone (410) means an earlier request landed.
  if (input.op === "delete") return { ...base, op: "delete", entityID: input.sourceID }
  if (reissue?.kind === "conditional-update") return { ...base, op: "update", entityID: input.sourceID, ifMatch: reissue.ifMatch }
  if (reissue?.kind === "deterministic-create") return { ...base, op: "create", providerID: reissue.providerID }
  if (input.op === "update") return { ...base, op: "update", entityID: input.sourceID }
  const intent = input.reissueIntent
  return intent.kind === "deterministic-create" ? { ...base, op: "create", providerID: intent.providerID } : { ...base, op: "create" }
}

/** One provider request: `{ status, body }`, or `{ status: "timeout" }` when no answer came in time. */
export const send = async (providerUrl, path, body, timeoutMs = REQUEST_TIMEOUT_MS) => {
  try {
    const response = await fetch(`${providerUrl}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs)
    })
    return { status: response.status, body: await response.json() }
  } catch {
    return { status: "timeout" }
  }
}

const lookup = (ctx, key) => send(ctx.providerUrl, `/lookup?key=${encodeURIComponent(key)}`, undefined, 5_000)

/**
 * Drives `input` once and returns what happened (a short label). `ctx`:
 * `{ store, providerUrl, worker, report(event), offline(): boolean,
 * authExpired(): void, watchDueInMs }`. Store rejections are reported and
 * end the drive with `Aborted`.
 */
export const driveOperation = async (ctx, input) => {
  ctx.report({ type: "claim-intent", key: input.operationID })
  const claim = await storeCall(ctx.report, "claimOperation", () => ctx.store.claimOperation(input))
  ctx.report({ type: "claim-answer", key: input.operationID, outcome: claim.outcome })
  if (claim.outcome !== "claimed") return claim.outcome
  return driveClaimed(ctx, input, claim)
}

/**
 * Leases up to `limit` due operations in one batch (`claimDueOperations`)
 * and drives each claimed one as `driveOperation` drives a claim; returns
 * what happened to each (the batch's finished ones as `finished`).
 */
export const driveDueBatch = async (ctx, limit) => {
  const batch = await storeCall(ctx.report, "claimDueOperations", () => ctx.store.claimDueOperations({ limit }))
  const results = []
  for (const row of batch.finished) {
    ctx.report({ type: "claim-answer", key: row.operationID, outcome: "finished" })
    results.push("batch:finished")
  }
  for (const claim of batch.claimed) {
    ctx.report({ type: "claim-answer", key: claim.operation.operationID, outcome: "claimed" })
    results.push(await driveClaimed(ctx, claimInputOf(claim.operation), claim))
  }
  return results
}

/** Drives an operation this runner holds the lease of (`claim`), from the send marker on. */
const driveClaimed = async (ctx, input, claim) => {
  const { store, report } = ctx
  const key = { callerDID: input.callerDID, operationID: input.operationID }
  const call = (method, run) => storeCall(report, method, run)
  const leaseToken = claim.lease.token
  const fail = async (kind, extra = {}) => {
    const result = await call("recordAttemptFailure", () => store.recordAttemptFailure(key, { leaseToken, kind, ...extra }))
    return `${kind}:${result.outcome}`
  }
  const finalize = (sourceID, etag) => input.op === "delete"
    ? call("finalizeDeleteOperation", () =>
      store.finalizeDeleteOperation(key, { leaseToken, sourceID, documentID: input.documentID }))
      .then((result) => `finalize-delete:${result.outcome}`)
    : call("finalizeOperationAndArmWatch", () =>
      store.finalizeOperationAndArmWatch(key, {
        leaseToken, sourceID, documentID: input.documentID, providerEtag: etag, resultEntity: { etag },
        watchDueAt: Date.now() + ctx.watchDueInMs
      })).then((result) => `finalize:${result.outcome}`)
  /** The run in doubt settles its own operation when the provider shows its write landed. */
  const settle = async (outcome) => {
    const found = await lookup(ctx, input.operationID)
    if (found.status === 200 && found.body.applied) return finalize(found.body.entityID, found.body.etag)
    return outcome
  }

  if (ctx.offline()) return fail("offline", { retryAt: Date.now() + 800 })
  // A claim asked to mark its request sent did it in its own write.
  if (claim.operation.sendMarker !== leaseToken) {
    const sent = await call("markOperationSent", () => store.markOperationSent(key, { leaseToken }))
    if (sent.outcome !== "sent") return `mark:${sent.outcome}`
  }
  if (ctx.offline()) return fail("offline", { retryAt: Date.now() + 800 })
  // The request must land well inside the lease: renew right before it leaves.
  const renewed = await call("renewOperationLease", () => store.renewOperationLease(key, { leaseToken }))
  if (renewed.outcome !== "renewed") return `renew:${renewed.outcome}`

  // A request that might arrive after the lease lapsed could race a takeover's
  // re-send (a runner's timing fault, not the store's): do not send it then.
  const leaseExpiresAt = renewed.lease.expiresAt
  if (Date.now() >= leaseExpiresAt - LATE_MARGIN_MS) return "renew:too-late"
  const request = { ...requestFor(input, claim.reissue), token: leaseToken, worker: ctx.worker, leaseExpiresAt }
  const answer = await send(ctx.providerUrl, "/write", request)
  switch (answer.status) {
    case 200:
      return finalize(answer.body.entityID, answer.body.etag)
    case 404:
    case 410: // a delete of an entity that is gone: this key's earlier request deleted it
      if (input.op === "delete") return finalize(input.sourceID, null)
      return fail("retryable", { httpStatus: answer.status })
    case "timeout": {
      const outcome = await fail("unknown")
      return outcome === "unknown:reconcile_only" ? settle(outcome) : outcome
    }
    case 409: // the deterministic id is taken: an earlier request of this key created it
    case 412: { // refused as stale: an earlier request of this key may have landed; look it up
      const found = await lookup(ctx, input.operationID)
      if (found.status === 200 && found.body.applied) return finalize(found.body.entityID, found.body.etag)
      return fail("unknown", { httpStatus: answer.status })
    }
    case 401:
      ctx.authExpired()
      return fail("auth", { httpStatus: 401, retryAt: Date.now() + 1_000 })
    case 429:
      return fail("retryable", { httpStatus: 429, retryAt: Date.now() + (answer.body.retryAfterMs ?? 500) })
    case 422:
      return fail("permanent", { httpStatus: 422 })
    default:
      return fail("retryable", { httpStatus: answer.status })
  }
}

/** Claims a due watch, fetches the entity from the provider and records the verification. */
export const verifyWatch = async (ctx, watch) => {
  const call = (method, run) => storeCall(ctx.report, method, run)
  const identity = {
    ownerDID: watch.ownerDID, connectorName: watch.connectorName, model: watch.model,
    accountKey: watch.accountKey, sourceID: watch.sourceID
  }
  const now = Date.now()
  const until = now + 1_000
  const claimed = await call("claimWatchAttempt", () =>
    ctx.store.claimWatchAttempt(identity, { generation: watch.repairGeneration, until, now }))
  if (!claimed) return "watch:not-claimed"
  const fetched = await send(ctx.providerUrl, `/entity?id=${encodeURIComponent(watch.sourceID)}`)
  const fetchedDigest = fetched.status === 200 ? `doc:${fetched.body.documentID}` : null
  const outcome = await call("recordVerification", () =>
    ctx.store.recordVerification(identity, {
      generation: watch.repairGeneration, claimedUntil: until, fetchedDigest, maxAttempts: 3, dueAt: Date.now() + 500
    }))
  return `watch:${outcome}`
}

/** The winner reader every soak store uses: a document's winner digest is a function of its id. */
export const readWinner = async (documentID) => `doc:${documentID}`

/** The same digests for many documents at once (the sweep's audit reads every settled watch's winner). */
export const readWinners = async (documentIDs) => Object.fromEntries(documentIDs.map((id) => [id, `doc:${id}`]))
