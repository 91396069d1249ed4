// Spans of the store printed to the console through OpenTelemetry: one
// write-back (claim → mark sent → finalize and arm) on an in-memory SQLite
// database, each public call a span `connector-store.<method>` with its
// identity, outcome and attempts. Run: npm run build && node examples/tracing.mjs
import { NodeSdk } from "@effect/opentelemetry"
import { ConsoleSpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { openConnectorStore } from "@connector-store/sql-adapter"

const observability = NodeSdk.layer(() => ({
  resource: { serviceName: "connector-store-example" },
  spanProcessor: new SimpleSpanProcessor(new ConsoleSpanExporter())
}))

const store = await openConnectorStore({
  url: process.argv[2] ?? ":memory:",
  readWinner: async () => "digest-after-edit",
  observability
})

const key = { callerDID: "did:example:alice-laptop", operationID: "edit-1" }
const claim = await store.claimOperation({
  ...key,
  ownerDID: "did:example:alice",
  connectorName: "gcal",
  model: "Event",
  op: "update",
  accountKey: "alice@example.com",
  target: "calendar/primary",
  sourceID: "event-1",
  deterministicEventID: "event-1",
  payloadHash: "sha256:payload",
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: "doc-1"
})
await store.markOperationSent(key, { leaseToken: claim.lease.token })
await store.finalizeOperationAndArmWatch(key, {
  leaseToken: claim.lease.token,
  sourceID: "event-1",
  documentID: "doc-1",
  providerEtag: "etag-1",
  resultEntity: { id: "event-1" },
  watchDueAt: Date.now() + 5_000
})
// A refused call: its span ends with the error and its outcome is the error's tag.
await store.getWatchByDocument("").catch((error) => console.log(`refused: ${error.message}`))
await store.close()
