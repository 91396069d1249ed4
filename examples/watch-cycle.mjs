// The main job: one write-back, end to end, on a SQLite file (or the URL given
// with --file / CONNECTOR_STORE_URL). A runner claims the operation, marks its
// request sent, "calls the provider", finalizes the operation and arms the
// projection watch in one transaction; a verifier then claims the watch and
// verifies it; finally the due sweep runs. Each step prints its outcome and rows.
import { openConnectorStore } from "@connector-store/sql-adapter"

const argAt = process.argv.indexOf("--file")
const url = argAt > 0 ? process.argv[argAt + 1] : process.env.CONNECTOR_STORE_URL ?? "connector-store.sqlite"

// The document store's converged state lives outside the connector store;
// here it is a map, read through the winner reader inside finalize's transaction.
const run = Date.now()
const documentID = `doc-${run}`
const winners = new Map([[documentID, "digest-after-edit"]])
const readWinner = async (id) => winners.get(id) ?? null
const store = await openConnectorStore({ url, readWinner })

const key = { callerDID: "did:example:alice-laptop", operationID: `edit-${run}` }
const showOperation = (label, op) =>
  console.log(`  ${label}: state=${op.state} attempts=${op.attempts} lease=${op.leaseToken?.slice(0, 8) ?? "-"} ` +
    `until=${op.leaseExpiresAt ?? "-"} sendMarker=${op.sendMarker?.slice(0, 8) ?? "-"} next=${op.nextAttemptAt ?? "-"} ` +
    `source=${op.sourceID ?? "-"} etag=${op.providerEtag ?? "-"} version=${op.version}`)
const showWatch = (label, w) =>
  console.log(`  ${label}: ${w.sourceID} → ${w.documentID} status=${w.verificationStatus} generation=${w.repairGeneration} ` +
    `attempts=${w.verificationAttempts} next=${w.nextAttemptAt ?? "-"} claimedUntil=${w.claimedUntil ?? "-"} ` +
    `observed=${w.observedWinnerDigest} verified=${w.verifiedStateDigest ?? "-"} version=${w.version}`)

console.log(`connector-store demo on ${url}`)

const input = {
  ...key,
  ownerDID: "did:example:alice",
  connectorName: "google-calendar",
  model: "Event",
  op: "update",
  accountKey: "alice@example.com",
  target: "calendars/primary",
  sourceID: `evt-${run}`,
  deterministicEventID: `local-event-${run}`,
  payloadHash: "sha256:lunch-at-one",
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-before-edit" },
  providerEtag: "etag-before-edit",
  documentID
}
const claim = await store.claimOperation(input)
console.log(`1. claimOperation → ${claim.outcome}${claim.outcome === "claimed" ? ` (new key: ${claim.created})` : ""}`)
if (claim.outcome !== "claimed") throw new Error("the demo's fresh key was not claimed")
showOperation("operation", claim.operation)
const leaseToken = claim.lease.token

const replay = await store.claimOperation(input)
console.log(`2. the same claim replayed → ${replay.outcome} (one row, one lease holder)`)

const sent = await store.markOperationSent(key, { leaseToken })
console.log(`3. markOperationSent → ${sent.outcome} (attempt counted before the request leaves)`)
showOperation("operation", sent.operation)

// … the provider applies the update and answers with its new etag …
const finalized = await store.finalizeOperationAndArmWatch(key, {
  leaseToken,
  sourceID: `evt-${run}`,
  documentID,
  providerEtag: "etag-after-edit",
  resultEntity: { id: `evt-${run}`, summary: "Lunch", start: "13:00" },
  watchDueAt: Date.now()
})
console.log(`4. finalizeOperationAndArmWatch → ${finalized.outcome} (one transaction)`)
if (finalized.outcome !== "committed") throw new Error("finalize did not commit")
showOperation("operation", finalized.operation)
showWatch("watch", finalized.watch)

const { ownerDID, connectorName, model, accountKey, sourceID } = finalized.watch
const watchID = { ownerDID, connectorName, model, accountKey, sourceID }
const claimedUntil = Date.now() + 30_000
const claimedWatch = await store.claimWatchAttempt(watchID, { generation: finalized.watch.repairGeneration, until: claimedUntil, now: Date.now() })
console.log(`5. claimWatchAttempt → ${claimedWatch}`)

const verification = await store.recordVerification(watchID, {
  generation: finalized.watch.repairGeneration,
  claimedUntil,
  fetchedDigest: "digest-after-edit",
  maxAttempts: 5,
  dueAt: Date.now() + 60_000
})
console.log(`6. recordVerification (the provider's state projects to the winner) → ${verification}`)
showWatch("watch", await store.getWatch(watchID))
console.log(`   write state of ${documentID}: ${(await store.getDocumentWriteStates([documentID])).get(documentID)}`)

const due = await store.listDueOperations(Date.now(), { readWinner })
console.log(`7. listDueOperations → ${due.operations.length} operations, ${due.watches.length} watches due ` +
  `(this run's: ${due.operations.filter((op) => op.operationID === key.operationID).length} operations)`)
await store.close()
