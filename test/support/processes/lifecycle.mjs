// A separate OS process that opens the store at argv[2] (a SQLite path or a
// postgres:// URL, tables under the prefix argv[3]) through the Promise API,
// drives one write-back and claims its watch, and prints what it read back:
// `{ claim, finalize, operation, claimed }`. Run under Node flags
// the caller chooses (a hardened Node, say).
import { openConnectorStore } from "@connector-store/promise"

const [url, tablePrefix] = process.argv.slice(2)
const store = await openConnectorStore({ url, tablePrefix, readWinner: () => "winner-1" })
try {
  const key = { callerDID: "did:caller:1", operationID: "op-1" }
  const claim = await store.claimOperation({
    ...key, ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1",
    op: "create", target: "calendars/primary", sourceID: null, deterministicEventID: "doc-1-1", payloadHash: "h1", reissueIntent: { kind: "reconcile" }, providerEtag: null, documentID: "doc-1", markSent: true
  })
  const now = await store.now()
  const finalize = await store.finalizeOperationAndArmWatch(key, {
    leaseToken: claim.lease.token, sourceID: "src-1", documentID: "doc-1", providerEtag: "e1", resultEntity: { id: "src-1" }, watchDueAt: now
  })
  const operation = await store.getOperation(key)
  const due = await store.claimDueWatches({ now, until: now + 60_000, limit: 10 })
  print({
    claim: claim.outcome,
    finalize: finalize.outcome,
    operation: { state: operation?.state, sourceID: operation?.sourceID, resultEntity: operation?.resultEntity },
    claimed: due.claimed.map((watch) => ({ sourceID: watch.sourceID, documentID: watch.documentID, status: watch.verificationStatus }))
  })
} finally {
  await store.close()
}

function print(value) {
  process.stdout.write(JSON.stringify(value) + "\n")
}
