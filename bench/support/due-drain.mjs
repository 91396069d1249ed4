// How a fleet's runners drain a backlog of due operations, written once over
// "steps" in the Promise API's shapes (the store, or the raw reference of
// support/due-drain-raw-steps.mjs), so every side runs the very same loop.
//
// - `batches`: each runner loops `claimDueOperations({ limit })` and drives
//   every operation it was leased (mark sent → finalize), until a batch
//   comes back empty: then nothing due is left that another runner's batch
//   does not hold.
// - `pages` (the way before the batch call): each runner pages through
//   `listDueWork({ limit })` and claims every listed operation by its key
//   (`claimOperation` with the stored payload), driving those it wins,
//   until a whole pass lists nothing.
//
// Every lease a runner gets is recorded as [operationID, token, from,
// until, runner] (from = the claim's time, the operation's `updatedAt`;
// until = the lease's expiry; both on the store's clock), every commit as
// the operation's id, so the bench can check afterwards that no operation
// was handed to two runners whose leases overlapped, and that each was
// committed once.

/** The provider's answer to every re-sent update. */
const APPLIED_ETAG = "etag-1"
/** When the watch a finalize arms is due. */
const WATCH_DUE_MS = 60_000

const unexpected = (step, got, operationID) =>
  new Error(`${step} of ${operationID} answered ${JSON.stringify(got?.outcome ?? got)}`)

/** A claim's lease as recorded: [operationID, token, from, until, runner]. */
const leaseRecord = (claim, runner) =>
  [claim.operation.operationID, claim.lease.token, claim.operation.updatedAt, claim.lease.expiresAt, runner]

/** Drives one leased operation to its commit: mark sent, then finalize (the provider applied the write). */
const drive = async (steps, claim) => {
  const { callerDID, operationID, sourceID, documentID } = claim.operation
  const key = { callerDID, operationID }
  const leaseToken = claim.lease.token
  const sent = await steps.markOperationSent(key, { leaseToken })
  if (sent.outcome !== "sent") throw unexpected("markOperationSent", sent, operationID)
  const finalized = await steps.finalizeOperationAndArmWatch(key, {
    leaseToken,
    sourceID,
    documentID,
    providerEtag: APPLIED_ETAG,
    resultEntity: { id: sourceID, summary: "Lunch" },
    watchDueAt: steps.now() + WATCH_DUE_MS
  })
  if (finalized.outcome !== "committed") throw unexpected("finalizeOperationAndArmWatch", finalized, operationID)
}

/** A claim of `op`'s own key with its stored payload: what a runner that found it in a due page sends. */
const claimInputOf = (op) => ({
  callerDID: op.callerDID,
  operationID: op.operationID,
  ownerDID: op.ownerDID,
  connectorName: op.connectorName,
  model: op.model,
  op: op.op,
  accountKey: op.accountKey,
  target: op.target,
  sourceID: op.sourceID,
  deterministicEventID: op.deterministicEventID,
  payloadHash: op.payloadHash,
  reissueIntent: op.reissueIntent,
  providerEtag: op.providerEtag,
  documentID: op.documentID
})

/**
 * Drains with `runners` concurrent loops of this process named
 * `${name}/0` … Answers the tally: claims attempted (`asked`: rows asked
 * for; `pages`: claims sent) and won, the other answers by outcome,
 * lifecycles committed, the lease records and the committed ids.
 */
export const drain = async (steps, { way, runners, limit, name }) => {
  const tally = { asked: 0, won: 0, answers: {}, calls: 0, committed: 0, leases: [], commits: [] }
  const answered = (outcome, n = 1) => {
    tally.answers[outcome] = (tally.answers[outcome] ?? 0) + n
  }
  const batchRunner = async (runner) => {
    for (;;) {
      const batch = await steps.claimDueOperations({ limit })
      tally.calls++
      tally.asked += limit
      tally.won += batch.claimed.length
      if (batch.finished.length > 0) answered("finished", batch.finished.length)
      if (batch.corrupt.length > 0) answered("corrupt", batch.corrupt.length)
      if (batch.claimed.length === 0 && batch.finished.length === 0) return
      for (const claim of batch.claimed) {
        tally.leases.push(leaseRecord(claim, runner))
        await drive(steps, claim)
        tally.committed++
        tally.commits.push(claim.operation.operationID)
      }
    }
  }
  const pageRunner = async (runner) => {
    for (;;) {
      let listed = 0
      let cursor
      do {
        const page = await steps.listDueWork({ now: steps.now(), limit, ...(cursor === undefined ? {} : { cursor }) })
        tally.calls++
        listed += page.operations.length
        for (const op of page.operations) {
          const claim = await steps.claimOperation(claimInputOf(op))
          tally.asked++
          if (claim.outcome !== "claimed") {
            answered(claim.outcome)
            continue
          }
          tally.won++
          tally.leases.push(leaseRecord(claim, runner))
          await drive(steps, claim)
          tally.committed++
          tally.commits.push(op.operationID)
        }
        cursor = page.cursor ?? undefined
      } while (cursor !== undefined)
      if (listed === 0) return
    }
  }
  const loop = way === "batches" ? batchRunner : pageRunner
  await Promise.all(Array.from({ length: runners }, (_, i) => loop(`${name}/${i}`)))
  return tally
}

/**
 * Judges the recorded leases of a whole drain (every process's): how many
 * operations were leased more than once, and how many were handed to two
 * leases that overlapped (a double claim: both holders could send; a
 * runner never holds one operation twice, so this is two runners). A
 * lease runs from its claim to its expiry.
 */
export const judgeLeases = (leases) => {
  const byOperation = new Map()
  for (const lease of leases) {
    const list = byOperation.get(lease[0])
    if (list === undefined) byOperation.set(lease[0], [lease])
    else list.push(lease)
  }
  let leasedAgain = 0
  let doubleClaims = 0
  const examples = []
  for (const [operationID, list] of byOperation) {
    if (list.length < 2) continue
    leasedAgain++
    list.sort((a, b) => a[2] - b[2])
    for (let i = 1; i < list.length; i++) {
      const [, token, from, , runner] = list[i]
      const overlapped = list.slice(0, i).find((earlier) => earlier[1] !== token && earlier[3] > from)
      if (overlapped !== undefined) {
        doubleClaims++
        if (examples.length < 3) examples.push(`${operationID}: ${overlapped[4]} until ${overlapped[3]}, ${runner} from ${from}`)
        break
      }
    }
  }
  return { operations: byOperation.size, leasedAgain, doubleClaims, examples }
}
