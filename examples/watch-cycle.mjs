// The main job until the demo CLI exists: open a store on a SQLite file (or
// the URL given with --file / CONNECTOR_STORE_URL), put a projection watch
// under it, arm it, claim an attempt, verify it, and print the rows.
import { WatchRepository } from "@connector-store/core"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"

const argAt = process.argv.indexOf("--file")
const url = argAt > 0 ? process.argv[argAt + 1] : process.env.CONNECTOR_STORE_URL ?? "connector-store.sqlite"

// The document store's converged state lives outside the connector store;
// here it is a map, read through the winner-reader port.
const winners = new Map([["doc-1", "digest-a"]])
const store = await openConnectorStore({ url, readWinner: async (documentID) => winners.get(documentID) ?? null })

const identity = { ownerDID: "did:example:alice", connectorName: "google-calendar", model: "Event", accountKey: "alice@example.com", sourceID: `evt-${Date.now()}` }
const now = Date.now()
await store.runEffect(Effect.flatMap(WatchRepository, (watches) => watches.insert({
  ...identity, documentID: `doc-${identity.sourceID}`, verifiedStateDigest: null, observedWinnerDigest: null,
  verificationStatus: "verified", verificationAttempts: 0, repairGeneration: 0, nextAttemptAt: null,
  claimedUntil: null, deferReason: null, version: 0, createdAt: now, updatedAt: now
})))
winners.set(`doc-${identity.sourceID}`, "digest-b")

const show = async (step) => {
  const row = await store.getWatch(identity)
  console.log(`${step.padEnd(28)} status=${row.verificationStatus} generation=${row.repairGeneration} attempts=${row.verificationAttempts} next=${row.nextAttemptAt} claimedUntil=${row.claimedUntil} verified=${row.verifiedStateDigest} observed=${row.observedWinnerDigest} version=${row.version}`)
}
console.log(`connector-store demo on ${url}`)
await show("watch created")
console.log("arm(ingress):", await store.armWatch(identity, "ingress", { dueAt: now, triggeringWinner: "digest-b" }))
await show("after arm")
const claimedUntil = Date.now() + 30_000
console.log("claim:", await store.claimWatchAttempt(identity, { until: claimedUntil, generation: 1, now: Date.now() }))
await show("after claim")
console.log("verify:", await store.recordVerification(identity, { generation: 1, claimedUntil, fetchedDigest: "digest-b", maxAttempts: 5, dueAt: Date.now() + 60_000 }))
await show("after verification")
const due = await store.listDueOperations(Date.now(), { readWinner: async (documentID) => winners.get(documentID) ?? null })
console.log(`due sweep: ${due.operations.length} operations, ${due.watches.length} watches`)
await store.close()
