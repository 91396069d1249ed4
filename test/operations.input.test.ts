import { type ConnectorStoreApi, ConnectorStore } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { claimedAndSent, claimInput, KEY, onOperationStore } from "./operations.fixtures.js"
import { failsChangingNothing } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()

/** One refused call: what it is, the field the error must name, and the call. */
type BadCall = readonly [label: string, field: string, call: (store: ConnectorStoreApi, token: string) => Effect.Effect<unknown, unknown>]

const loose = (value: unknown) => value as never
const TOKEN = "<token>"
const withToken = (options: Record<string, unknown>, token: string) =>
  loose(Object.fromEntries(Object.entries(options).map(([k, v]) => [k, v === TOKEN ? token : v])))

const finalizeOptions = { leaseToken: TOKEN, sourceID: "src-1", documentID: "doc-1", watchDueAt: 1 }
const circular: Record<string, unknown> = {}
circular["self"] = circular

const badCalls: ReadonlyArray<BadCall> = [
  ["claim without input", "input", (s) => s.claimOperation(loose(undefined))],
  ["claim with an empty caller", "input.callerDID", (s) => s.claimOperation(claimInput({ callerDID: "" }))],
  ["claim with a numeric operation id", "input.operationID", (s) => s.claimOperation(loose({ ...claimInput(), operationID: 7 }))],
  ["claim with no owner", "input.ownerDID", (s) => s.claimOperation(loose({ ...claimInput(), ownerDID: undefined }))],
  ["claim with an empty payload hash", "input.payloadHash", (s) => s.claimOperation(claimInput({ payloadHash: "" }))],
  ["claim with an unknown op", "input.op", (s) => s.claimOperation(loose({ ...claimInput(), op: "remove" }))],
  ["claim with an empty source id", "input.sourceID", (s) => s.claimOperation(claimInput({ sourceID: "" }))],
  ["claim with a numeric document id", "input.documentID", (s) => s.claimOperation(loose({ ...claimInput(), documentID: 1 }))],
  ["claim with a numeric etag", "input.providerEtag", (s) => s.claimOperation(loose({ ...claimInput(), providerEtag: 5 }))],
  ["claim with no reissue intent", "input.reissueIntent", (s) => s.claimOperation(loose({ ...claimInput(), reissueIntent: undefined }))],
  ["claim with an unknown intent", "input.reissueIntent", (s) => s.claimOperation(loose({ ...claimInput(), reissueIntent: { kind: "yolo" } }))],
  ["claim with a conditional update without etag", "input.reissueIntent", (s) =>
    s.claimOperation(loose({ ...claimInput(), reissueIntent: { kind: "conditional-update" } }))],
  ["claim with a deterministic create without id", "input.reissueIntent", (s) =>
    s.claimOperation(loose({ ...claimInput(), reissueIntent: { kind: "deterministic-create", providerID: "" } }))],
  ["claim with a zero lease", "input.leaseMs", (s) => s.claimOperation(claimInput({ leaseMs: 0 }))],
  ["claim with a fractional lease", "input.leaseMs", (s) => s.claimOperation(claimInput({ leaseMs: 1.5 }))],
  ["claim with a lease over a day", "input.leaseMs", (s) => s.claimOperation(claimInput({ leaseMs: 86_400_001 }))],
  ["renew without key", "key", (s, t) => s.renewOperationLease(loose(null), { leaseToken: t })],
  ["renew with an empty caller", "key.callerDID", (s, t) => s.renewOperationLease({ ...KEY, callerDID: "" }, { leaseToken: t })],
  ["renew without options", "options", (s) => s.renewOperationLease(KEY, loose(undefined))],
  ["renew with an empty token", "options.leaseToken", (s) => s.renewOperationLease(KEY, { leaseToken: "" })],
  ["renew with a negative lease", "options.leaseMs", (s, t) => s.renewOperationLease(KEY, { leaseToken: t, leaseMs: -1 })],
  ["mark sent with an empty operation id", "key.operationID", (s, t) => s.markOperationSent({ ...KEY, operationID: "" }, { leaseToken: t })],
  ["mark sent with a numeric token", "options.leaseToken", (s) => s.markOperationSent(KEY, loose({ leaseToken: 1 }))],
  ["failure of an unknown kind", "options.kind", (s, t) => s.recordAttemptFailure(KEY, loose({ leaseToken: t, kind: "flaky" }))],
  ["failure with a status out of range", "options.httpStatus", (s, t) =>
    s.recordAttemptFailure(KEY, { leaseToken: t, kind: "retryable", httpStatus: 700 })],
  ["failure with a fractional status", "options.httpStatus", (s, t) =>
    s.recordAttemptFailure(KEY, { leaseToken: t, kind: "retryable", httpStatus: 500.5 })],
  ["failure with a non-boolean notApplied", "options.notApplied", (s, t) =>
    s.recordAttemptFailure(KEY, loose({ leaseToken: t, kind: "retryable", notApplied: "yes" }))],
  ["failure with a non-finite retry time", "options.retryAt", (s, t) =>
    s.recordAttemptFailure(KEY, { leaseToken: t, kind: "offline", retryAt: Number.POSITIVE_INFINITY })],
  ["failure with a negative retry time", "options.retryAt", (s, t) => s.recordAttemptFailure(KEY, { leaseToken: t, kind: "retryable", retryAt: -5 })],
  ["finalize without key", "key", (s, t) => s.finalizeOperationAndArmWatch(loose("k"), withToken(finalizeOptions, t))],
  ["finalize with an empty token", "options.leaseToken", (s) => s.finalizeOperationAndArmWatch(KEY, loose({ ...finalizeOptions, leaseToken: "" }))],
  ["finalize with an empty source", "options.sourceID", (s, t) => s.finalizeOperationAndArmWatch(KEY, withToken({ ...finalizeOptions, sourceID: "" }, t))],
  ["finalize with no document", "options.documentID", (s, t) =>
    s.finalizeOperationAndArmWatch(KEY, withToken({ ...finalizeOptions, documentID: undefined }, t))],
  ["finalize with a numeric etag", "options.providerEtag", (s, t) =>
    s.finalizeOperationAndArmWatch(KEY, withToken({ ...finalizeOptions, providerEtag: 3 }, t))],
  ["finalize with a result that is not JSON", "options.resultEntity", (s, t) =>
    s.finalizeOperationAndArmWatch(KEY, withToken({ ...finalizeOptions, resultEntity: circular }, t))],
  ["finalize with a bigint result", "options.resultEntity", (s, t) =>
    s.finalizeOperationAndArmWatch(KEY, withToken({ ...finalizeOptions, resultEntity: 10n }, t))],
  ["finalize with a NaN due time", "options.watchDueAt", (s, t) => s.finalizeOperationAndArmWatch(KEY, withToken({ ...finalizeOptions, watchDueAt: Number.NaN }, t))],
  ["get with an empty key", "key.callerDID", (s) => s.getOperation({ ...KEY, callerDID: "" })],
  ["get by an empty node key", "nodeKey", (s) => s.getOperationByNodeKey("", "did:caller:1")],
  ["get by node key for nobody", "viewerDID", (s) => s.getOperationByNodeKey("n", loose(null))],
  ["list without filter", "filter", (s) => s.listTrackedOperations(loose(undefined))],
  ["list for nobody", "filter.visibleTo", (s) => s.listTrackedOperations(loose({}))],
  ["list with a document list that is not one", "filter.documentIDs", (s) => s.listTrackedOperations(loose({ visibleTo: "d", documentIDs: "doc-1" }))],
  ["list with an empty document id", "filter.documentIDs", (s) => s.listTrackedOperations({ visibleTo: "d", documentIDs: ["doc-1", ""] })],
  ["list with an unknown state", "filter.states", (s) => s.listTrackedOperations(loose({ visibleTo: "d", states: ["sent"] }))],
  ["list with an empty connector", "filter.connectorName", (s) => s.listTrackedOperations({ visibleTo: "d", connectorName: "" })],
  ["list with a zero limit", "filter.limit", (s) => s.listTrackedOperations({ visibleTo: "d", limit: 0 })],
  ["list with a limit over the maximum", "filter.limit", (s) => s.listTrackedOperations({ visibleTo: "d", limit: 501 })],
  ["list with an empty cursor", "filter.cursor", (s) => s.listTrackedOperations({ visibleTo: "d", cursor: "" })],
  ["write states of a non-list", "documentIDs", (s) => s.getDocumentWriteStates(loose("doc-1"))],
  ["write states with an empty id", "documentIDs", (s) => s.getDocumentWriteStates(["doc-1", ""])]
]

for (const adapter of adapters) {
  describe(`bad input to the operation methods on ${adapter.name}`, () => {
    it.effect("every refused call is InvalidInput naming its method and field, and no table changes", () => {
      const winners = new Winners({ "doc-1": "w-1" })
      return onOperationStore(adapter, winners.single(), Effect.gen(function*() {
        const token = yield* claimedAndSent()
        const store = yield* ConnectorStore
        for (const [label, field, call] of badCalls) {
          const error = yield* failsChangingNothing(call(store, token))
          expect(error, label).toMatchObject({ _tag: "InvalidInput", field })
        }
        expect(winners.singleReads).toEqual([])
      }))
    })
  })
}
