// One write-back through a store, as an app outside the workspace writes it:
// the Promise API and the Effect API, with the checks that it did what the
// docs say. Imported by the packed-install programs (memory.ts, sql.ts).
import { ConnectorStore, type PromiseConnectorStore, type StoreContext, type WatchIdentity } from "@connector-store/core"
import { Effect } from "effect"

const keyOf = (label: string) => ({ callerDID: "did:example:app", operationID: `op-${label}` })

const claimInput = (label: string) => ({
  ...keyOf(label),
  ownerDID: "did:example:owner",
  connectorName: "calendar",
  model: "Event",
  op: "update" as const,
  accountKey: "owner@example.com",
  target: "calendars/primary",
  sourceID: `src-${label}`,
  deterministicEventID: `evt-${label}`,
  payloadHash: `sha256:${label}`,
  reissueIntent: { kind: "conditional-update" as const, ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: `doc-${label}`
})

const watchOf = (label: string): WatchIdentity => ({
  ownerDID: "did:example:owner",
  connectorName: "calendar",
  model: "Event",
  accountKey: "owner@example.com",
  sourceID: `src-${label}`
})

const expectEqual = (what: string, actual: unknown, expected: unknown): void => {
  if (actual !== expected) throw new Error(`${what}: expected ${String(expected)}, got ${String(actual)}`)
}

/** claim → mark sent → finalize and arm → manual arm, and a refused call, through the Promise API. */
export const promiseCycle = async <H>(store: PromiseConnectorStore<H>, label: string): Promise<void> => {
  const claim = await store.claimOperation(claimInput(label))
  if (claim.outcome !== "claimed") throw new Error(`claimOperation: expected claimed, got ${claim.outcome}`)
  const leaseToken = claim.lease.token
  expectEqual("markOperationSent", (await store.markOperationSent(keyOf(label), { leaseToken })).outcome, "sent")
  const finalized = await store.finalizeOperationAndArmWatch(keyOf(label), {
    leaseToken,
    sourceID: `src-${label}`,
    documentID: `doc-${label}`,
    providerEtag: "etag-1",
    resultEntity: { id: `src-${label}` },
    watchDueAt: 0
  })
  expectEqual("finalizeOperationAndArmWatch", finalized.outcome, "committed")
  expectEqual("armWatch", await store.armWatch(watchOf(label), "manual", { dueAt: 0 }), "opened")
  const refused = await store.armWatch({ ...watchOf(label), ownerDID: "" }, "manual", { dueAt: 0 }).then(
    () => undefined,
    (error: unknown) => error
  )
  expectEqual("a bad identity's rejection", (refused as { _tag?: unknown } | undefined)?._tag, "InvalidInput")
}

/** The same cycle through the Effect API (`ConnectorStore` from the app's own `effect`). */
export const effectCycle = (label: string): Effect.Effect<void, unknown, ConnectorStore> =>
  Effect.gen(function*() {
    const store = yield* ConnectorStore
    const claim = yield* store.claimOperation(claimInput(label))
    if (claim.outcome !== "claimed") return yield* Effect.fail(new Error(`claimOperation: ${claim.outcome}`))
    const leaseToken = claim.lease.token
    const sent = yield* store.markOperationSent(keyOf(label), { leaseToken })
    expectEqual("markOperationSent", sent.outcome, "sent")
    const finalized = yield* store.finalizeOperationAndArmWatch(keyOf(label), {
      leaseToken,
      sourceID: `src-${label}`,
      documentID: `doc-${label}`,
      providerEtag: "etag-1",
      resultEntity: { id: `src-${label}` },
      watchDueAt: 0
    })
    expectEqual("finalizeOperationAndArmWatch", finalized.outcome, "committed")
    expectEqual("armWatch", yield* store.armWatch(watchOf(label), "manual", { dueAt: 0 }), "opened")
    const refused = yield* Effect.flip(store.armWatch({ ...watchOf(label), ownerDID: "" }, "manual", { dueAt: 0 }))
    expectEqual("a bad identity's error", refused._tag, "InvalidInput")
  })

/** Mixing the APIs: an Effect run on a Promise store's own runtime. */
export const mixedCall = <H>(store: PromiseConnectorStore<H>, label: string): Promise<void> =>
  store.runEffect(
    Effect.flatMap(ConnectorStore, (s) => s.getWatch(watchOf(label))).pipe(
      Effect.flatMap((watch) => watch._tag === "Some" ? Effect.void : Effect.fail(new Error("runEffect: no watch")))
    ) satisfies Effect.Effect<void, unknown, StoreContext>
  )
