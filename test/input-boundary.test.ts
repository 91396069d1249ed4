import { ConnectorStore, MAX_JSON_BYTES, type PromiseConnectorStore, StoreSnapshot } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Cause, Effect, Exit, ManagedRuntime, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

// The boundary of every method, through both APIs on every adapter: an
// input's fields are read once (what is checked is what is stored), a
// getter that throws is a typed refusal, a key the method does not know is
// refused naming the nearest known one, and a JSON value's encoded size is
// bounded by a walk that stops at the bound, so a small graph of shared
// objects whose text would be gigabytes is refused at once. Every refusal
// leaves every table as it was.

const adapters = await adaptersUnderTest()

/** One API of one store: a call by method name, and every row of every table. */
interface Api {
  readonly name: string
  /** Calls `method`; resolves with its value or with `{ failed: error }` (a typed failure or a rejection). */
  readonly call: (method: string, ...args: ReadonlyArray<unknown>) => Promise<unknown>
  readonly snapshot: () => Promise<unknown>
  /** The code verifier as this API takes it. */
  readonly verifier: (value: string) => unknown
}

class Failed {
  constructor(readonly error: unknown) {}
}

type AnyMethods = Record<string, (...args: ReadonlyArray<unknown>) => unknown>

const effectApi = (runtime: ManagedRuntime.ManagedRuntime<StoreServices, unknown>): Api => ({
  name: "the Effect API",
  call: async (method, ...args) => {
    const exit = await runtime.runPromiseExit(
      Effect.flatMap(ConnectorStore, (s) => (s as unknown as AnyMethods)[method]!(...args) as Effect.Effect<unknown, unknown>)
    )
    if (Exit.isSuccess(exit)) return exit.value
    if (!Cause.isFailType(exit.cause)) throw new Error(`${method} did not fail typed: ${Cause.pretty(exit.cause)}`)
    return new Failed(exit.cause.error)
  },
  snapshot: () => runtime.runPromise(Effect.flatMap(StoreSnapshot, (s) => s.snapshot)),
  verifier: (value) => Redacted.make(value)
})

const promiseApi = (store: PromiseConnectorStore<unknown>): Api => ({
  name: "the Promise API",
  call: (method, ...args) =>
    Promise.resolve().then(() => (store as unknown as AnyMethods)[method]!(...args)).then((v) => v, (e: unknown) => new Failed(e)),
  snapshot: () =>
    store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot) as unknown as Effect.Effect<unknown, unknown, ConnectorStore>),
  verifier: (value) => value
})

/** 25 levels of objects that each refer to the next twice: tiny in memory, 2^24 leaves as JSON text. */
const sharedGraph = (levels = 25): unknown => {
  let node: unknown = { leaf: "x" }
  for (let i = 0; i < levels; i++) node = { left: node, right: node }
  return node
}

const identity = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1", sourceID: "src-1" }
const scope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }

let keys = 0
const claimInput = (overrides: Record<string, unknown> = {}) => ({
  callerDID: "did:caller:1",
  operationID: `op-${++keys}`,
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  accountKey: "acct-1",
  target: "calendar/primary",
  op: "update",
  sourceID: "src-1",
  deterministicEventID: `event-${keys}`,
  payloadHash: "hash-1",
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  ...overrides
})

const finalizeInput = (leaseToken: string, overrides: Record<string, unknown> = {}) => ({
  leaseToken,
  sourceID: "src-1",
  documentID: "doc-1",
  providerEtag: "etag-1",
  resultEntity: { title: "Lunch" },
  watchDueAt: NOW,
  ...overrides
})

/** An object whose `key` reads `first` the first time and `later` after, counting the reads. */
const changingGetter = <T extends object>(base: T, key: string, first: unknown, later: unknown) => {
  const reads = { count: 0 }
  const value = Object.defineProperty({ ...base }, key, {
    enumerable: true,
    get: () => ++reads.count === 1 ? first : later
  })
  return { value, reads }
}

/** An object whose `key` throws when read. */
const throwingGetter = <T extends object>(base: T, key: string) =>
  Object.defineProperty({ ...base }, key, {
    enumerable: true,
    get: () => {
      throw new Error("the getter failed")
    }
  })

for (const adapter of adapters) {
  describe(`the input boundary on ${adapter.name}`, () => {
    let runtime: ManagedRuntime.ManagedRuntime<StoreServices, unknown>
    let promiseStore: PromiseConnectorStore<unknown>
    const apis: Array<Api> = []

    beforeAll(async () => {
      runtime = ManagedRuntime.make(adapter.layer({ readWinner: () => Effect.succeed("w") }))
      promiseStore = adapter.name === "memory"
        ? openMemoryConnectorStore({ readWinner: () => "w", now: () => NOW })
        : await openConnectorStore({ ...(await adapter.connection()), readWinner: () => "w", now: () => NOW })
      apis.push(effectApi(runtime), promiseApi(promiseStore))
    })
    afterAll(async () => {
      await promiseStore.close()
      await runtime.dispose()
    })

    /** A claimed and sent operation of `api`: its key and lease token. */
    const sentOperation = async (api: Api) => {
      const input = claimInput()
      const claim = await api.call("claimOperation", input) as { outcome: string; lease: { token: string } }
      expect(claim.outcome).toBe("claimed")
      const key = { callerDID: input.callerDID, operationID: input.operationID }
      expect(await api.call("markOperationSent", key, { leaseToken: claim.lease.token })).toMatchObject({ outcome: "sent" })
      return { key, leaseToken: claim.lease.token }
    }

    /** Calls `method`, expects the typed refusal `expected`, and that no table changed. */
    const refused = async (api: Api, expected: { method: string; field: string; reason?: RegExp }, ...args: ReadonlyArray<unknown>) => {
      const before = await api.snapshot()
      const answer = await api.call(expected.method, ...args)
      expect(answer, `${api.name}: ${expected.method} should be refused`).toBeInstanceOf(Failed)
      const error = (answer as Failed).error
      expect(error, api.name).toMatchObject({ _tag: "InvalidInput", method: expected.method, field: expected.field })
      if (expected.reason !== undefined) expect((error as { reason: string }).reason).toMatch(expected.reason)
      expect(await api.snapshot(), `${api.name}: ${expected.method} changed a table`).toEqual(before)
      return error
    }

    it("a result entity of shared objects whose text would be huge is refused at once, naming the bound; nothing is written", async () => {
      for (const api of apis) {
        const { key, leaseToken } = await sentOperation(api)
        await refused(
          api,
          { method: "finalizeOperationAndArmWatch", field: "options.resultEntity", reason: new RegExp(`past ${MAX_JSON_BYTES} bytes`) },
          key,
          finalizeInput(leaseToken, { resultEntity: sharedGraph() })
        )
        await refused(
          api,
          { method: "settleOperation", field: "input.resultEntity", reason: /bytes of JSON text/ },
          key,
          { outcome: "committed", sourceID: "src-1", documentID: "doc-1", resultEntity: sharedGraph(), watchDueAt: NOW }
        )
        // The operation is still the runner's to finalize.
        expect(await api.call("finalizeOperationAndArmWatch", key, finalizeInput(leaseToken))).toMatchObject({ outcome: "committed" })
      }
    })

    it("a checkpoint, a recovery buffer or a reissue intent of shared objects is refused at once too", async () => {
      for (const api of apis) {
        const state = { status: "idle", lastSyncedAt: "t", entityCount: 1 }
        await refused(api, { method: "setSyncState", field: "state.checkpoint", reason: /bytes of JSON text/ }, "gcal", "did:owner:dag", {
          ...state,
          checkpoint: sharedGraph()
        })
        await refused(api, { method: "setSyncState", field: "state.recovery", reason: /bytes of JSON text/ }, "gcal", "did:owner:dag", {
          ...state,
          recovery: sharedGraph()
        })
        await refused(
          api,
          { method: "updateSyncProgress", field: "recompute().checkpoint", reason: /bytes of JSON text/ },
          "gcal",
          "did:owner:dag",
          () => ({ checkpoint: sharedGraph(), recovery: null })
        )
        await refused(
          api,
          { method: "claimOperation", field: "input.reissueIntent", reason: /bytes of JSON text/ },
          claimInput({ reissueIntent: { kind: "reconcile", note: sharedGraph() } })
        )
      }
    })

    it("a result entity one byte over the bound is refused typed; one at the bound is stored", async () => {
      for (const api of apis) {
        const { key, leaseToken } = await sentOperation(api)
        // A JSON string's text is its characters and two quotes.
        await refused(
          api,
          { method: "finalizeOperationAndArmWatch", field: "options.resultEntity", reason: /bytes of JSON text/ },
          key,
          finalizeInput(leaseToken, { resultEntity: "x".repeat(MAX_JSON_BYTES - 1) })
        )
        await refused(
          api,
          { method: "finalizeOperationAndArmWatch", field: "options.resultEntity", reason: /bytes of JSON text/ },
          key,
          finalizeInput(leaseToken, { resultEntity: { text: "é".repeat(MAX_JSON_BYTES / 2) } })
        )
        const fits = "x".repeat(MAX_JSON_BYTES - 2)
        const done = await api.call("finalizeOperationAndArmWatch", key, finalizeInput(leaseToken, { resultEntity: fits }))
        expect(done).toMatchObject({ outcome: "committed" })
        expect((await api.call("getOperation", key) as { resultEntity: unknown } | { value: { resultEntity: unknown } }))
          .toMatchObject(api.name === "the Promise API" ? { resultEntity: fits } : { value: { resultEntity: fits } })
      }
    })

    it("a field whose getter changes on each read is read once: the value checked is the value stored", async () => {
      for (const api of apis) {
        const claim = changingGetter(claimInput(), "documentID", "doc-read-once", "doc\u0000changed")
        const claimed = await api.call("claimOperation", claim.value) as { outcome: string; operation: { documentID: string }; lease: { token: string } }
        expect(claimed).toMatchObject({ outcome: "claimed", operation: { documentID: "doc-read-once" } })
        expect(claim.reads.count).toBe(1)
        const key = { callerDID: claim.value.callerDID, operationID: claim.value.operationID }
        await api.call("markOperationSent", key, { leaseToken: claimed.lease.token })

        const entity = changingGetter({ title: "Lunch" }, "room", "first", "second\u0000")
        const finalize = changingGetter(finalizeInput(claimed.lease.token, { resultEntity: entity.value }), "documentID", "doc-read-once", 5)
        expect(await api.call("finalizeOperationAndArmWatch", key, finalize.value)).toMatchObject({
          outcome: "committed",
          operation: { documentID: "doc-read-once", resultEntity: { title: "Lunch", room: "first" } }
        })
        expect([finalize.reads.count, entity.reads.count]).toEqual([1, 1])

        const state = changingGetter({ status: "idle", entityCount: 3 }, "lastSyncedAt", "2025-01-01", "\u0000")
        expect(await api.call("setSyncState", "gcal", `did:owner:getter-${api.name}`, state.value)).toMatchObject({ lastSyncedAt: "2025-01-01" })
        expect(state.reads.count).toBe(1)
      }
    })

    it("a getter that throws is a typed refusal naming its field, nothing written", async () => {
      for (const api of apis) {
        await refused(api, { method: "claimOperation", field: "input.target", reason: /could not be read/ }, throwingGetter(claimInput(), "target"))
        const { key, leaseToken } = await sentOperation(api)
        await refused(
          api,
          { method: "finalizeOperationAndArmWatch", field: "options.resultEntity", reason: /\$\."room" could not be read/ },
          key,
          finalizeInput(leaseToken, { resultEntity: throwingGetter({ title: "Lunch" }, "room") })
        )
        await refused(api, { method: "armWatch", field: "options.dueAt" }, identity, "manual", throwingGetter({ dueAt: NOW }, "dueAt"))
        await refused(
          api,
          { method: "setSyncState", field: "state.entityCount" },
          "gcal",
          "did:owner:1",
          throwingGetter({ status: "idle", lastSyncedAt: "t", entityCount: 1 }, "entityCount")
        )
      }
    })

    it("a misspelled key is refused in every method family, naming it and the key meant; nothing written", async () => {
      for (const api of apis) {
        const { key, leaseToken } = await sentOperation(api)
        // Write-back operations.
        await refused(
          api,
          { method: "recordAttemptFailure", field: "options.retryAfter", reason: /did you mean retryAt\?/ },
          key,
          { leaseToken, kind: "retryable", retryAfter: 60_000 }
        )
        await refused(
          api,
          { method: "claimOperation", field: "input.documentId", reason: /did you mean documentID\?/ },
          claimInput({ documentId: "doc-9" })
        )
        await refused(
          api,
          { method: "finalizeOperationAndArmWatch", field: "options.providerETag", reason: /did you mean providerEtag\?/ },
          key,
          finalizeInput(leaseToken, { providerETag: "etag-2" })
        )
        await refused(api, { method: "markOperationSent", field: "options.leaseTokn", reason: /did you mean leaseToken\?/ }, key, {
          leaseToken,
          leaseTokn: leaseToken
        })
        // Watches.
        await refused(api, { method: "armWatch", field: "options.triggeringwinner", reason: /did you mean triggeringWinner\?/ }, identity, "manual", {
          dueAt: NOW,
          triggeringwinner: "w"
        })
        await refused(api, { method: "listDueOperations", field: "readers.readWinnr", reason: /did you mean readWinner\?/ }, NOW, {
          readWinnr: () => "w"
        })
        await refused(api, { method: "listDueOperations", field: "readers.readWinners", reason: /could not be read/ }, NOW, throwingGetter({}, "readWinners"))
        await refused(api, { method: "recordVerification", field: "input.maxAttempt", reason: /did you mean maxAttempts\?/ }, identity, {
          generation: 1,
          fetchedDigest: "w",
          maxAttempt: 3,
          dueAt: NOW
        })
        // Sync state and its lease.
        await refused(api, { method: "setSyncState", field: "state.checkpiont", reason: /did you mean checkpoint\?/ }, "gcal", "did:owner:1", {
          status: "idle",
          lastSyncedAt: "t",
          entityCount: 1,
          checkpiont: { page: 2 }
        })
        await refused(api, { method: "claimSyncLease", field: "options.leaseMS", reason: /did you mean leaseMs\?/ }, "gcal", "did:owner:1", {
          now: NOW,
          leaseMS: 1_000
        })
        // Pending auth.
        await refused(api, { method: "createPendingAuth", field: "record.redirectUrl", reason: /did you mean redirectURL\?/ }, {
          state: "state-typo",
          provider: "gcal",
          ownerDID: "did:owner:1",
          codeVerifier: api.verifier("v".repeat(43)),
          redirectUrl: "https://app/cb",
          scopes: ["calendar"],
          expiresAt: NOW + 60_000
        })
        // Relist.
        const run = await api.call("startRelistRun", scope) as { runID: string }
        const afterStart = await api.snapshot()
        await refused(
          api,
          { method: "commitSweepCheckpoint", field: "checkpoint.receipts[0].digset", reason: /did you mean digest\?/ },
          run.runID,
          { page: 1, cursor: null, receipts: [{ sourceID: "src-1", digset: "d" }] }
        )
        await refused(api, { method: "listSweepReceipts", field: "page.limt", reason: /did you mean limit\?/ }, run.runID, { limit: 5, limt: 5 })
        expect(await api.snapshot()).toEqual(afterStart)
        // Operator.
        await refused(api, { method: "listOperations", field: "filter.ownerDid", reason: /did you mean ownerDID\?/ }, { ownerDid: "did:owner:1" })
        await refused(api, { method: "rearmWatch", field: "options.dueat", reason: /did you mean dueAt\?/ }, identity, { dueat: NOW })
        await refused(api, { method: "settleOperation", field: "input.zzz", reason: /known: outcome/ }, key, { outcome: "dead", zzz: 1 })
      }
    })

    it("an identity, a key or a lease may be a whole row read back: only its parts are read", async () => {
      for (const api of apis) {
        const { key, leaseToken } = await sentOperation(api)
        const operation = await api.call("getOperation", key)
        const row = api.name === "the Promise API" ? operation : (operation as { value: unknown }).value
        expect(await api.call("finalizeOperationAndArmWatch", row, finalizeInput(leaseToken))).toMatchObject({ outcome: "committed" })
        const claim = await api.call("claimSyncLease", "gcal", `did:owner:lease-${api.name}`, { now: NOW, leaseMs: 1_000 }) as {
          lease: object
        }
        expect(await api.call("releaseSyncLease", { ...claim.lease, note: "a field of the caller's" })).toBe(true)
        const state = await api.call("setSyncState", "gcal", `did:owner:lease-${api.name}`, { status: "idle", lastSyncedAt: "t", entityCount: 1 })
        // A state read back (key, version, incarnation, lease expiry beside it) can be written back.
        expect(await api.call("setSyncState", "gcal", `did:owner:lease-${api.name}`, { ...(state as object), entityCount: 2 }))
          .toMatchObject({ entityCount: 2 })
      }
    })
  })
}
