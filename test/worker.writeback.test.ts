import { FakeProvider, type RequestFate } from "@connector-store/testkit/provider"
import { startWorker } from "@connector-store/worker"
import { describe, expect, it } from "vitest"
import { adaptersUnderTest } from "./support/stores.js"
import {
  type Documents,
  editOf,
  eventually,
  fakeConnector,
  operationsByState,
  providerWith,
  seeded,
  storesOn
} from "./worker.support.js"

// The worker's write-backs on every adapter through the Promise API: a
// happy drain, a provider that drops, garbles, delays and refuses answers,
// and a worker cut off mid-send whose operation a second worker takes over.
// The provider's ledger judges every run: no write applied twice.

const adapters = await adaptersUnderTest()

describe.each(adapters)("startWorker on $name", (adapter) => {
  it("drains enqueued edits: each sent once, committed, its watch armed and verified", async () => {
    const documents: Documents = new Map()
    const { open, closeAll } = await storesOn(adapter, documents)
    const store = await open()
    const provider = new FakeProvider()
    try {
      const count = 24
      for (let n = 0; n < count; n++) {
        const op = n % 3 === 0 ? "create" : "update"
        const seeded = op === "update" ? provider.seed(`evt-${n}`, "old", `doc-${n}`) : undefined
        documents.set(`doc-${n}`, `digest-${n}`)
        expect((await store.enqueueOperation(editOf(n, op, { ...(seeded && { ifMatch: seeded.etag }) }))).outcome).toBe("enqueued")
      }
      const worker = startWorker(store, { connectors: { gcal: fakeConnector(provider, "w1") }, concurrency: 4, verifyAfterMs: 1 })
      await eventually(() => worker.stats().verifications.verified >= count, 30_000, "every watch verified")
      await worker.stop()
      const states = await operationsByState(store, count)
      expect(states.get("committed")?.length).toBe(count)
      expect(provider.ledger.length).toBe(count) // one request each
      expect(provider.check()).toEqual([])
      expect(worker.stats()).toMatchObject({ claimed: count, sent: count, writeBacks: { committed: count }, handlerFaults: 0, inFlight: 0 })
      for (let n = 0; n < count; n++) {
        expect((await store.getWatchByDocument(`doc-${n}`))?.verificationStatus).toBe("verified")
      }
    } finally {
      await closeAll()
    }
  })

  it("against a provider that drops, garbles, delays and refuses: nothing applied twice, none left attempted, at most 5% for a person", async () => {
    const documents: Documents = new Map()
    const { open, closeAll } = await storesOn(adapter, documents)
    const stores = [await open(), await open()]
    const random = seeded(adapter.name.length * 7919)
    // About 15% of requests apply without an answer or lose it, 10% are refused as not applied, a few are slow.
    const fate = (): RequestFate => {
      const r = random()
      return r < 0.05 ? "502-after-apply" : r < 0.10 ? "applied-no-answer" : r < 0.15 ? "lost"
        : r < 0.18 ? "503" : r < 0.21 ? "429" : r < 0.23 ? "500" : r < 0.25 ? "offline" : r < 0.27 ? "422" : "ok"
    }
    const provider = providerWith(fate)
    const count = 60
    try {
      for (let n = 0; n < count; n++) {
        const op = n % 4 === 0 ? "create" : n % 4 === 1 ? "delete" : "update"
        const entity = op !== "create" ? provider.seed(`evt-${n}`, "old", `doc-${n}`) : undefined
        documents.set(`doc-${n}`, `digest-${n}`)
        await stores[0]!.enqueueOperation(editOf(n, op, { ...(entity && { ifMatch: entity.etag }) }))
      }
      const delay = () => (random() < 0.1 ? 15 : 0)
      const workers = stores.map((store, i) =>
        startWorker(store, { connectors: { gcal: fakeConnector(provider, `w${i}`, { delay }) }, concurrency: 3, verification: false, pollMs: 50 }))
      await eventually(async () => !(await operationsByState(stores[0]!, count)).has("attempted"), 60_000, "every operation final")
      await Promise.all(workers.map((w) => w.stop()))
      const states = await operationsByState(stores[0]!, count)
      expect(provider.check()).toEqual([])
      for (const row of states.get("committed") ?? []) {
        // Committed only what the provider applied (a delete may have found its entity gone after its own earlier request).
        expect(provider.appliedOf(`${row.callerDID}/${row.operationID}`).length).toBeGreaterThanOrEqual(1)
      }
      for (const row of states.get("dead") ?? []) {
        expect(provider.appliedOf(`${row.callerDID}/${row.operationID}`)).toEqual([])
      }
      const forAPerson = states.get("reconcile_only")?.length ?? 0
      expect(forAPerson / count, JSON.stringify((states.get("reconcile_only") ?? []).map((o) => [o.op, o.lastKind, o.lastHTTPStatus, o.attempts]))).toBeLessThanOrEqual(0.05)
      expect(states.get("committed")?.length ?? 0).toBeGreaterThanOrEqual(count - forAPerson - (states.get("dead")?.length ?? 0))
    } finally {
      await closeAll()
    }
  })

  it("with no lookup, a re-drive in doubt re-sends only as its reissue says: never applied twice, never committed unapplied", async () => {
    const documents: Documents = new Map()
    const { open, closeAll } = await storesOn(adapter, documents)
    const store = await open()
    const random = seeded(31 + adapter.name.length)
    const provider = providerWith(() => {
      const r = random()
      return r < 0.2 ? "502-after-apply" : r < 0.4 ? "applied-no-answer" : r < 0.5 ? "lost" : "ok"
    })
    const count = 20
    try {
      for (let n = 0; n < count; n++) {
        const entity = provider.seed(`evt-${n}`, "old", `doc-${n}`)
        documents.set(`doc-${n}`, `digest-${n}`)
        await store.enqueueOperation(editOf(n, "update", { ifMatch: entity.etag }))
      }
      const worker = startWorker(store, { connectors: { gcal: fakeConnector(provider, "w1", { lookup: false }) }, concurrency: 4, verification: false, pollMs: 50 })
      await eventually(async () => !(await operationsByState(store, count)).has("attempted"), 60_000, "every operation final")
      await worker.stop()
      expect(provider.check()).toEqual([])
      const states = await operationsByState(store, count)
      for (const row of states.get("committed") ?? []) {
        expect(provider.appliedOf(`${row.callerDID}/${row.operationID}`)).toHaveLength(1)
      }
      // A re-send in doubt did go out (as its reissue), and was refused as stale where the first had landed.
      expect(provider.ledger.some((e) => e.request.reissue === "conditional-update" && e.status === 412)).toBe(true)
    } finally {
      await closeAll()
    }
  })

  it("a worker cut off mid-send (stopped abruptly, its send never answering): a second worker takes over, the write applied once", async () => {
    const documents: Documents = new Map([["doc-1", "digest-1"]])
    const { open, closeAll } = await storesOn(adapter, documents, { policy: { leaseMs: 300, maxAttempts: 8, backoff: { baseDelayMs: 1, maxDelayMs: 4, jitter: "none" }, deferMs: 5 } })
    const first = await open()
    const second = await open()
    const provider = providerWith(() => "applied-no-answer")
    const entity = provider.seed("evt-1", "old", "doc-1")
    try {
      await first.enqueueOperation(editOf(1, "update", { ifMatch: entity.etag }))
      const gcal = fakeConnector(provider, "w1")
      let sent!: () => void
      const sending = new Promise<void>((resolve) => { sent = resolve })
      const hanging = startWorker(first, {
        connectors: { gcal: { ...gcal, send: async (operation, context) => {
          // The request lands; then this process is as good as dead: it never answers, and ignores its abort.
          await gcal.send(operation, context).catch(() => undefined)
          sent()
          return new Promise(() => {})
        } } },
        abortGraceMs: 10
      })
      await sending
      await hanging.stop({ graceMs: 1 })
      expect((await first.getOperation({ callerDID: "did:example:laptop", operationID: "edit-1" }))?.state).toBe("attempted")
      const provider2 = fakeConnector(provider, "w2")
      const taker = startWorker(second, { connectors: { gcal: provider2 }, pollMs: 50 })
      await eventually(() => taker.stats().writeBacks.committed === 1, 30_000, "the takeover committed")
      await taker.stop()
      expect(provider.appliedOf("did:example:laptop/edit-1")).toHaveLength(1)
      expect(provider.check()).toEqual([])
      // The takeover's conditional re-send met 412 (the first request had landed) and its lookup settled it.
      expect(taker.stats()).toMatchObject({ lookupsSettled: 1 })
    } finally {
      await closeAll()
    }
  })
})
